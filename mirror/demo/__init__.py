"""`mirror demo`: sample media end to end, its services and the Jellyfin stand-in it ships."""
