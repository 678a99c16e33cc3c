"""`mirror serve`: the dashboard, the JSON API, metrics, the Jellyfin webhook, the player."""
