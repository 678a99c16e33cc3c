"""Jellyfin: the client mirror uses to read items and download originals.

The package itself holds only the plain data of Jellyfin's answers: the client (httpx)
is `mirror.jellyfin.client`, imported where a client is built, so commands that never
talk to Jellyfin (`mirror show`, `mirror jobs`) start without it.
"""

from mirror.jellyfin.models import ItemHit, ItemPage, ItemSummary, Library, require_item_id

__all__ = ["ItemHit", "ItemPage", "ItemSummary", "Library", "require_item_id"]
