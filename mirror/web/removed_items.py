"""What the ItemDeleted webhook does with a delivery: ask Jellyfin, then mark under the guard.

Kept apart from the HTTP app (mirror.web.serve), which only turns the outcome into an
answer and a metric.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mirror.converge.delete_guard import DEFAULT_LIMIT, DeleteLimit
from mirror.db.removals import Marked, Removals
from mirror.domain.errors import MirrorError

if TYPE_CHECKING:
    from mirror.settings import Settings

# Marks a removed item (its objects go after MIRROR_DELETE_GRACE, with `mirror sync
# --delete`) unless Jellyfin still has it, or that is more removals at once than the
# delete guard allows.
ItemRemover = Callable[[str], Marked]

# Whether Jellyfin still has the item; raises MirrorError when Jellyfin cannot be asked.
ItemPresence = Callable[[str], bool]

STILL_THERE = "still in Jellyfin"
UNCHECKED = "not checked"  # Jellyfin could not be asked: nothing marked, answered 503


def item_remover(
    removals: Removals, still_in_jellyfin: ItemPresence, limit: DeleteLimit = DEFAULT_LIMIT
) -> ItemRemover:
    """Ask Jellyfin first, then mark, never delete.

    A delivery is a hint: jellyfin-plugin-webhook sends ItemAdded and ItemDeleted from
    two separate queues (Notifiers/ItemAddedNotifier/ItemAddedManager.cs and
    Notifiers/ItemDeletedNotifier/ItemDeletedManager.cs, each drained by its own
    scheduled task), so a file replaced in place - same id - can have its ItemDeleted
    arrive after its ItemAdded (jellyfin-plugin-webhook #327). So an item Jellyfin still
    has keeps its mirror, and one it cannot be asked about too (nothing is retried: the
    answer is a 503 the plugin logs, and `mirror sync --delete` is the catch-up).
    A burst of deliveries is the symptom of a library emptied by an offline mount, hence
    the guard; `mirror sync --delete` deletes after the grace, once Jellyfin confirms the
    item is still gone. A queued or running job of the item is cancelled (the worker
    stops at its next heartbeat, and never marks it done)."""

    def remove(item_id: str) -> Marked:
        try:
            present = still_in_jellyfin(item_id)
        except MirrorError as error:
            return Marked(UNCHECKED, f"cannot ask Jellyfin whether it still has it: {error}")
        if present:
            return Marked(STILL_THERE)
        return removals.mark_one_unless_too_many(item_id, limit.problem)

    return remove


def jellyfin_presence(settings: Settings) -> ItemPresence:
    """Asks Jellyfin (MIRROR_JELLYFIN_URL unset: a ConfigError, so nothing is marked) as
    `mirror sync --delete` does (`GET /Items?ids=...`: a deleted item,
    folders included, is simply not listed), two tries while the plugin's request waits."""
    from mirror import wiring

    def present(item_id: str) -> bool:
        with wiring.jellyfin_client(settings, retry_attempts=2) as client:
            return item_id in client.existing_item_ids([item_id])

    return present
