"""Where a library stands, for the dashboard's library page, and "mirror the rest".

The counts are `mirror sync --dry-run`'s classes (mirror.converge.sync.sync_pages walks the
listing page by page and classifies with the same pure function), kept as numbers only:
constant memory however big the library. "Mirror the rest" is the same walk not dry:
it queues NEW and CHANGED, like `mirror sync` without --delete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mirror.converge.library_sweep import LibraryLister
from mirror.converge.sync import SyncClass, SyncJobs, sync_pages

# The page's column of each class a listing walk can meet.
COLUMNS = {
    SyncClass.UNCHANGED: "mirrored",
    SyncClass.RESTORED: "mirrored",  # marked removed, listed again: its mirror is kept
    SyncClass.CHANGED: "changed",
    SyncClass.QUEUED: "queued",
    SyncClass.FAILED: "failed",
    SyncClass.NEW: "not_mirrored",
    SyncClass.SKIPPED: "skipped",
}


@dataclass
class LibraryCounts:
    """A library's items by where they stand (sync's classes, named for people)."""

    items: int = 0  # listed by Jellyfin, of the asked types
    mirrored: int = 0  # its mirror is of the file Jellyfin has now (unchanged, restored)
    changed: int = 0  # mirrored, and its file changed since: `mirror sync` re-mirrors it
    queued: int = 0  # a job is queued or running
    failed: int = 0  # its newest job failed or was cancelled
    not_mirrored: int = 0  # never mirrored (new)
    skipped: int = 0  # not one media file (.strm, disc image, folder): never queued
    jobs_created: int = 0  # by "mirror the rest"; 0 when only counted

    def add(self, kind: SyncClass) -> None:
        """Count one listed item (REMOVED is never listed: sync finds it off the listing)."""
        self.items += 1
        column = COLUMNS[kind]
        setattr(self, column, getattr(self, column) + 1)

    @property
    def the_rest(self) -> int:
        """What "mirror the rest" would queue: not mirrored and changed."""
        return self.not_mirrored + self.changed

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "the_rest": self.the_rest}


def library_counts(
    lister: LibraryLister,
    jobs: SyncJobs,
    parent_id: str,
    *,
    item_types: Sequence[str],
    mirror_rest: bool = False,
    library_name: str | None = None,
) -> LibraryCounts:
    """One walk of the listing: the counts as they were, and with `mirror_rest` the
    NEW and CHANGED items queued on the way (`jobs_created` says how many)."""
    counts = LibraryCounts()
    pages = sync_pages(
        lister,
        jobs,
        parent_id,
        item_types=item_types,
        dry_run=not mirror_rest,
        library_name=library_name,
    )
    for page in pages:
        counts.jobs_created += page.queued
        for entry in page.entries:
            counts.add(entry.kind)
    return counts
