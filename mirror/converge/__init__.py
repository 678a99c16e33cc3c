"""Keeping the mirror in step with Jellyfin: sweeps, sync, verify, renames, the delete guard.

The use cases speak to Postgres, Jellyfin and S3 through Protocols; the CLI and the web
app hand them the adapters built by `mirror.wiring`.
"""
