"""Items that left Jellyfin: marked first, their objects deleted only after the grace.

A library whose network mount was offline during a scan is emptied by Jellyfin and
comes back whole when the mount does; deleting at the first sight of "gone" would throw
the mirror away. So marking (`removed_at`; done jobs become `removed`, an active job
`cancelled`) is undone by the item coming back, and the objects go only when the item is
still gone after MIRROR_DELETE_GRACE (`objects_deleted_at`, set by the purge of `mirror
sync --delete`). Each method is one short transaction; none is fenced: a cancelled
attempt learns of it at its next heartbeat, as with `mirror cancel`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.schema import JOBS as _JOBS
from mirror.domain.jobs import Status

# Serialises the webhook's guard: two ItemDeleted deliveries at once must not both
# pass a limit that only one of them fits under. Any constant unique in the database.
_GUARD_LOCK = 0x6D69_7272_6F72_6431  # "mirrord1"
CANCELLED_BY_DELETE = "cancelled: the item was deleted in Jellyfin"
# A `Marked.outcome` besides the statuses the jobs took (`removed`, `cancelled`).
HELD_BACK = "held back"

# The item and every item recorded under it (titles, migration 0010): deleting a Series or
# Season in Jellyfin 10.9-12.0-rc4 reports only the folder (LibraryManager.DeleteItem calls
# ReportItemRemoved for the item alone; 12.0-rc5 announces its descendants first), so the
# webhook plugin sends one ItemDeleted, for the folder.
_MEMBERS = f"""
    SELECT member.item_id FROM {_JOBS} AS member
    WHERE member.item_id = :item_id OR member.series_id = :item_id
       OR member.season_id = :item_id OR member.parent_id = :item_id
"""

# (items to remove, mirrored items) -> why that is too many, or None to go ahead.
RemovalCheck = Callable[[int, int], "str | None"]


@dataclass(frozen=True, slots=True)
class Marked:
    """What marking one item did (the ItemDeleted webhook's answer)."""

    # Status.REMOVED; Status.CANCELLED (a job ran or waited, nothing was mirrored yet);
    # HELD_BACK; already removed; not mirrored
    outcome: str
    reason: str | None = None  # for held back: why
    items: int = 1  # how many items that was (a Series or Season: its mirrored episodes)


@raises_unavailable
class Removals:
    """Mark, restore and purge removed items."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def mark_gone(self, item_ids: Sequence[str]) -> int:
        """Found gone: done jobs become `removed`, active ones `cancelled`; returns the rows."""
        if not item_ids:
            return 0
        with self.engine.begin() as conn:
            return _mark(conn, list(item_ids))

    def mark_one_unless_too_many(self, item_id: str, check: RemovalCheck) -> Marked:
        """The ItemDeleted webhook: mark one item, and the mirrored items recorded under it
        when it is a folder (a Series or Season: Jellyfin up to 12.0-rc4 reports only the
        folder; see `members`), unless the removals pending would be too many of the
        mirror (`check`, counting the items under a folder, not 1), as a burst of
        deliveries is the symptom of a library emptied by an offline mount. Items that were
        never mirrored only have their jobs cancelled: there is no mirror to protect."""
        with self.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _GUARD_LOCK})
            states = conn.execute(
                text(
                    f"""
                    SELECT
                        item_id,
                        bool_or(status = 'done') AS mirrored,
                        bool_or(status IN ('new', 'processing')) AS active,
                        bool_or(removed_at IS NOT NULL AND objects_deleted_at IS NULL)
                            AS marked
                    FROM {_JOBS}
                    WHERE item_id IN ({_MEMBERS})
                    GROUP BY item_id
                    """
                ),
                {"item_id": item_id},
            ).all()
            mirrored = [state.item_id for state in states if state.mirrored]
            active = [state.item_id for state in states if state.active]
            if not mirrored:
                if not active:
                    marked = any(state.marked for state in states)
                    return Marked("already removed" if marked else "not mirrored")
                _mark(conn, active)
                return Marked(Status.CANCELLED, items=len(active))
            counts = conn.execute(
                text(
                    f"""
                    SELECT
                        count(DISTINCT item_id) FILTER (
                            WHERE status = 'removed' AND objects_deleted_at IS NULL
                              AND removed_at IS NOT NULL) AS pending,
                        count(DISTINCT item_id) FILTER (
                            WHERE status = 'done' OR (status = 'removed'
                              AND objects_deleted_at IS NULL AND removed_at IS NOT NULL))
                            AS mirrored
                    FROM {_JOBS}
                    """
                )
            ).one()
            problem = check(counts.pending + len(mirrored), counts.mirrored)
            if problem is not None:
                return Marked(HELD_BACK, problem, items=len(mirrored))
            _mark(conn, sorted({*mirrored, *active}))
            return Marked(Status.REMOVED, items=len(mirrored))

    def restore(self, item_ids: Sequence[str]) -> list[str]:
        """Back in Jellyfin before the purge: its `removed` jobs are `done` again."""
        if not item_ids:
            return []
        with self.engine.begin() as conn:
            return restore_on(conn, item_ids)

    def due(self, grace_s: float) -> list[str]:
        """Items marked gone at least `grace_s` ago whose objects are still there, and
        that have no done or active job (a job queued since means it came back)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"""
                    SELECT marked.item_id FROM {_JOBS} AS marked
                    WHERE marked.removed_at IS NOT NULL AND marked.objects_deleted_at IS NULL
                    GROUP BY marked.item_id
                    HAVING max(marked.removed_at) <= now() - make_interval(secs => :grace)
                       AND NOT EXISTS (
                           SELECT 1 FROM {_JOBS} AS live
                           WHERE live.item_id = marked.item_id
                             AND live.status IN ('new', 'processing', 'done'))
                    ORDER BY marked.item_id
                    """
                ),
                {"grace": grace_s},
            ).scalars()
            return list(rows)

    def pending(self) -> int:
        """Items marked gone whose objects are still there (within the grace or not)."""
        with self.engine.connect() as conn:
            count = conn.execute(
                text(
                    f"SELECT count(DISTINCT item_id) FROM {_JOBS} "
                    "WHERE removed_at IS NOT NULL AND objects_deleted_at IS NULL"
                )
            ).scalar_one()
            return int(count)

    def mark_purged(self, item_id: str) -> int:
        """Its objects are deleted: the marks say so, and the item is not purged again."""
        with self.engine.begin() as conn:
            return conn.execute(
                text(
                    f"UPDATE {_JOBS} SET objects_deleted_at = now(), updated_at = now() "
                    "WHERE item_id = :item_id "
                    "AND removed_at IS NOT NULL AND objects_deleted_at IS NULL"
                ),
                {"item_id": item_id},
            ).rowcount


def _mark(conn: Connection, item_ids: list[str]) -> int:
    return conn.execute(
        text(
            f"""
            UPDATE {_JOBS}
            SET status = CASE WHEN status = 'done' THEN 'removed' ELSE 'cancelled' END,
                error = CASE WHEN status = 'done' THEN error ELSE :why END,
                finished_at = CASE WHEN status = 'done' THEN finished_at ELSE now() END,
                removed_at = now(), updated_at = now()
            WHERE item_id = ANY(:ids) AND status IN ('done', 'new', 'processing')
            """
        ),
        {"ids": item_ids, "why": CANCELLED_BY_DELETE},
    ).rowcount


def restore_on(conn: Connection, item_ids: Sequence[str]) -> list[str]:
    """`Removals.restore` inside a caller's transaction (an enqueue: the item exists)."""
    rows = conn.execute(
        text(
            f"""
            UPDATE {_JOBS}
            SET status = CASE WHEN status = 'removed' THEN 'done' ELSE status END,
                removed_at = NULL, updated_at = now()
            WHERE item_id = ANY(:ids)
              AND removed_at IS NOT NULL AND objects_deleted_at IS NULL
            RETURNING item_id
            """
        ),
        {"ids": list(item_ids)},
    ).scalars()
    return sorted(set(rows))
