"""jellyfin-plugin-webhook's Generic destination, as the stand-in's changes reach mirror.

What decides behaviour, from the sources (Jellyfin 10.9.11-12.0-rc5, plugin v15-v21):
- Jellyfin's LibraryManager.DeleteItem (Emby.Server.Implementations/Library/) raises
  ItemRemoved for the deleted item only - a Series or Season goes with all its seasons
  and episodes, and only the folder is reported - up to 12.0-rc4; 12.0-rc5 reports each
  descendant first ("Announce the descendants before the item itself").
- The plugin has ItemDeleted from v16 (Notifiers/ItemDeletedNotifier/); it skips
  virtual items and Studios, and its WebhookSender.NotifyOnItem sends only the item
  types ticked (Movies, Episodes, Series, Seasons, Albums, Songs, Videos: never a BoxSet
  or a plain Folder).
- ItemAdded and ItemDeleted wait in two separate queues (ItemAddedManager,
  ItemDeletedManager), each drained by its own scheduled task every 30 s, and an added
  item is held back until its metadata has provider ids (up to 10 rechecks): for a file
  replaced in place either delivery can come first (jellyfin-plugin-webhook #327).
  Here each queue is drained when the test says so (`send_added`, `send_deleted`).
- Nothing is retried: a failed delivery is only logged (WebhookSender.SendNotification).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from mirror.demo.stand_in.catalog import CatalogItem

PLUGIN_VERSION = "v18"  # the first for Jellyfin 10.11
FIRST_WITH_ITEM_DELETED = 16
DESCENDANTS_REPORTED_FROM = (12, 0, 0, 5)  # Jellyfin 12.0-rc5
# The plugin's item type checkboxes, by the class name it sends as ItemType.
NOTIFIABLE = ("Movie", "Episode", "Series", "Season", "MusicAlbum", "Audio", "Video")
_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?(?:-rc(\d+))?")


def reports_descendants(jellyfin_version: str) -> bool:
    """Whether deleting a folder in this Jellyfin raises ItemRemoved for what is under it."""
    match = _VERSION.match(jellyfin_version)
    if match is None:
        return False
    major, minor, patch, rc = match.groups()
    release = (int(major), int(minor), int(patch or 0), int(rc) if rc else 1_000)
    return release >= DESCENDANTS_REPORTED_FROM


@dataclass(frozen=True, slots=True)
class Delivered:
    """One POST the plugin made, and mirror's answer."""

    notification_type: str
    item_id: str
    item_type: str
    status: int
    answer: dict[str, object]


class WebhookPlugin:
    """A Generic destination posting mirror's README template with the secret header."""

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        version: str = PLUGIN_VERSION,
        item_types: Sequence[str] = ("Movie", "Episode", "Series", "Season"),
        secret_header: str = "X-Mirror-Secret",
    ) -> None:
        self.url = url
        self.version = version
        self.item_types = tuple(item_types)
        self._headers = {secret_header: secret, "Content-Type": "text/plain"}
        self._added: dict[str, CatalogItem] = {}  # ItemAddedManager's queue
        self._deleted: dict[str, CatalogItem] = {}  # ItemDeletedManager's queue

    @property
    def sends_item_deleted(self) -> bool:
        return int(self.version.lstrip("v").split(".")[0]) >= FIRST_WITH_ITEM_DELETED

    def item_added(self, item: CatalogItem) -> None:
        self._added[item.id] = item

    def items_removed(self, removed: Sequence[CatalogItem], jellyfin_version: str) -> None:
        """LibraryManager.ItemRemoved for what one DeleteItem removed (descendants first)."""
        if not self.sends_item_deleted:
            return
        reported = removed if reports_descendants(jellyfin_version) else removed[-1:]
        for item in reported:
            if item.location_type != "Virtual" and item.type != "Studio":
                self._deleted[item.id] = item

    def send_added(self) -> list[Delivered]:
        """ItemAddedScheduledTask's run: every queued ItemAdded, then the queue is empty."""
        return self._send("ItemAdded", self._added)

    def send_deleted(self) -> list[Delivered]:
        """ItemDeletedScheduledTask's run."""
        return self._send("ItemDeleted", self._deleted)

    def _send(self, kind: str, queue: dict[str, CatalogItem]) -> list[Delivered]:
        items = list(queue.values())
        queue.clear()
        return [self._post(kind, item) for item in items if item.type in self.item_types]

    def _post(self, kind: str, item: CatalogItem) -> Delivered:
        fields = {"NotificationType": kind, "ItemId": item.id, "ItemType": item.type}
        body = json.dumps(fields).encode()  # the README's template, as text/plain
        response = httpx.post(self.url, content=body, headers=self._headers, timeout=30)
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        return Delivered(kind, item.id, item.type, response.status_code, answer)
