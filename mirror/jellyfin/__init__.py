"""Jellyfin: the client mirror uses to read items and download originals."""

from mirror.jellyfin.client import JellyfinClient, authorization_header
from mirror.jellyfin.download import sidecar_path
from mirror.jellyfin.models import ItemPage, ItemSummary, Library, require_item_id

__all__ = [
    "ItemPage",
    "ItemSummary",
    "JellyfinClient",
    "Library",
    "authorization_header",
    "require_item_id",
    "sidecar_path",
]
