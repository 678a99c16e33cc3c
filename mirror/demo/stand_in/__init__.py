"""A Jellyfin stand-in: the HTTP API mirror uses, over a catalog of local files."""
