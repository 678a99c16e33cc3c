"""`mirror sync`: make the bucket converge on the library.

A sweep only adds what was never mirrored; sync also notices what changed since it was
mirrored (a better release replaced the file: new size or ETag) and what left
Jellyfin (its objects are orphans). The classification is a pure function of the
listing and the item's job history, tested on its own; the rest walks the library page
by page like the sweep (same listing, same constant memory) and acts on the result.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mirror.converge.delete_guard import DEFAULT_LIMIT, NO_LIMIT, DeleteLimit, held_back
from mirror.converge.fingerprints import ProbeContent, fingerprint_changes, only_touched
from mirror.converge.library_sweep import LibraryLister, PageProgress, titles_of
from mirror.converge.renames import CopyMirror, copy_renamed
from mirror.domain.item import ItemTitle
from mirror.domain.jobs import ItemHistory, Status
from mirror.domain.listing import ItemSummary
from mirror.domain.sources import non_file_kind


class SyncClass(enum.StrEnum):
    """Where an item stands; `mirror sync` queues NEW and CHANGED."""

    NEW = "new"  # never mirrored (or removed earlier and back in the library)
    CHANGED = "changed"  # its file differs from the one the newest done job mirrored
    REMOVED = "removed"  # mirrored, and Jellyfin no longer has it
    RESTORED = "restored"  # marked removed, back before the grace ran out: kept
    UNCHANGED = "unchanged"
    FAILED = "failed"  # its newest job failed or was cancelled: see `mirror show`
    QUEUED = "queued"  # a job is queued or running already
    SKIPPED = "skipped"  # not one media file (.strm, disc image, folder): never queued


QUEUE_CLASSES = frozenset({SyncClass.NEW, SyncClass.CHANGED})

# Deletes every object of one item; returns how many.
DeleteItem = Callable[[str], int]


def classify(
    current: Mapping[str, Any], history: ItemHistory | None
) -> tuple[SyncClass, list[str]]:
    """The class of a listed item, and for CHANGED what changed.

    A done job without a recorded source (mirrored before fingerprints existed) counts as
    unchanged: there is nothing to compare, and `mirror enqueue ITEM_ID` re-mirrors it.
    """
    if history is not None and history.pending_removal:
        return SyncClass.RESTORED, []
    if history is None or history.latest_status == Status.REMOVED:
        return SyncClass.NEW, []
    if history.latest_status in (Status.NEW, Status.PROCESSING):
        return SyncClass.QUEUED, []
    if history.latest_status in (Status.FAILED, Status.CANCELLED):
        return SyncClass.FAILED, []
    changes = fingerprint_changes(history.done_source or {}, current)
    return (SyncClass.CHANGED, changes) if changes else (SyncClass.UNCHANGED, [])


@dataclass
class SyncReport:
    """Item ids per class, and what was done about them."""

    items: dict[SyncClass, list[str]] = field(
        default_factory=lambda: {kind: [] for kind in SyncClass}
    )
    changes: dict[str, list[str]] = field(default_factory=dict)  # item id -> what changed
    skipped_kinds: dict[str, str] = field(default_factory=dict)  # item id -> ".strm link", ...
    names: dict[str, str] = field(default_factory=dict)
    queued: int = 0  # jobs created for new and changed items
    deleted_objects: int = 0
    dry_run: bool = False
    delete: bool = False
    grace_s: float = 0.0
    held_back: str | None = None  # why this run removed nothing, or None
    purged: list[str] = field(default_factory=list)  # items whose objects were deleted
    touched: list[str] = field(default_factory=list)  # new time, same content probe: kept
    renamed: dict[str, str] = field(default_factory=dict)  # new id -> removed id copied

    def add(self, kind: SyncClass, item_id: str) -> None:
        self.items[kind].append(item_id)

    def counts(self) -> dict[str, int]:
        return {kind.value: len(ids) for kind, ids in self.items.items()}

    def to_json(self) -> dict[str, Any]:
        """`mirror sync --json`: the counts and the item ids per class."""
        return {
            "dry_run": self.dry_run,
            "delete": self.delete,
            "counts": self.counts(),
            "items": {kind.value: sorted(ids) for kind, ids in self.items.items()},
            "changes": self.changes,
            "skipped": self.skipped_kinds,
            "queued": self.queued,
            "deleted_objects": self.deleted_objects,
            "held_back": self.held_back,
            "grace_s": self.grace_s,
            "purged": sorted(self.purged),
            "touched": sorted(self.touched),
            "renamed": self.renamed,
        }


class SyncJobs(Protocol):
    """What sync needs from Postgres (MirroredItems and JobRepository together)."""

    def histories(self, item_ids: Sequence[str]) -> dict[str, ItemHistory]: ...

    def mirrored_item_ids(self) -> set[str]: ...

    def requeue(self, item_ids: Sequence[str], titles: Mapping[str, ItemTitle]) -> int: ...

    def record_titles(self, titles: Mapping[str, ItemTitle]) -> None: ...

    def restore(self, item_ids: Sequence[str]) -> list[str]: ...

    def refresh_source(self, item_id: str, facts: dict[str, object]) -> None: ...

    def probed_sizes(self) -> dict[int, list[tuple[str, str]]]: ...


class SyncRemovals(Protocol):
    """Marks first, objects after the grace (mirror.db.removals.Removals)."""

    def mark_gone(self, item_ids: Sequence[str]) -> int: ...

    def due(self, grace_s: float) -> list[str]: ...

    def mark_purged(self, item_id: str) -> int: ...


@dataclass(frozen=True)
class Deletion:
    """`mirror sync --delete`: how to delete an item's objects, and the guard's terms."""

    delete_item: DeleteItem
    removals: SyncRemovals
    limit: DeleteLimit = DEFAULT_LIMIT
    grace_s: float = 7 * 86400.0


class SyncLister(LibraryLister, Protocol):
    """The sweep's listing, plus: which of these items does Jellyfin still have?"""

    def existing_item_ids(self, item_ids: Sequence[str], batch: int = ...) -> set[str]: ...


@dataclass(frozen=True, slots=True)
class Classified:
    """One listed item, its class, what changed (CHANGED) or what it is (SKIPPED)."""

    item: ItemSummary
    kind: SyncClass
    changes: list[str]
    not_a_file: str | None = None


@dataclass(frozen=True, slots=True)
class SyncedPage:
    """One listing page classified, and how many jobs acting on it created."""

    entries: list[Classified]
    queued: int
    touched: list[str] = field(default_factory=list)  # only their time changed: kept
    held: list[ItemSummary] = field(default_factory=list)  # NEW, not queued: maybe renames


def classify_page(
    items: Iterable[ItemSummary], histories: Mapping[str, ItemHistory]
) -> list[Classified]:
    """`classify` for each item of a page; not one media file is SKIPPED, as in a sweep."""
    entries = []
    for item in items:
        not_a_file = non_file_kind(item)
        if not_a_file is not None:  # its job would only fail, as in a sweep
            entries.append(Classified(item, SyncClass.SKIPPED, [], not_a_file))
            continue
        kind, changes = classify(item.fingerprint(), histories.get(item.id))
        entries.append(Classified(item, kind, changes))
    return entries


def sync_pages(
    lister: LibraryLister,
    jobs: SyncJobs,
    parent_id: str,
    *,
    item_types: Sequence[str],
    dry_run: bool,
    on_page: PageProgress | None = None,
    library_name: str | None = None,
    probe: ProbeContent | None = None,
    hold_back: Callable[[ItemSummary], bool] | None = None,
) -> Iterator[SyncedPage]:
    """Walk the library page by page (constant memory): classify each page and, unless
    `dry_run`, queue its NEW and CHANGED items and keep its RESTORED items' mirrors.

    With `probe`, a CHANGED item whose only change is its time (a `touch`) is probed
    first: the same first and last MiB as mirrored make it UNCHANGED, and (unless
    `dry_run`) its row takes the new ETag so the next sync need not probe again.
    `sync_library` and the dashboard's library page both walk with this, so they count
    alike; what is kept of each page is the caller's choice. NEW items `hold_back`
    picks are not queued but handed back in `held` (possible renames: see sync_library).
    """
    handled = 0
    for page in lister.iter_library_pages(parent_id, item_types):
        histories = jobs.histories([item.id for item in page.items])
        entries = classify_page(page.items, histories)
        touched: list[str] = []
        if probe is not None:
            entries = [_settle_by_probe(e, histories, probe, touched) for e in entries]
        if touched and not dry_run:
            for item_id in touched:
                current = next(e.item for e in entries if e.item.id == item_id)
                jobs.refresh_source(item_id, current.fingerprint())
        queued = 0
        held = [
            e.item
            for e in entries
            if hold_back is not None and e.kind is SyncClass.NEW and hold_back(e.item)
        ]
        if not dry_run:
            held_ids = {item.id for item in held}
            to_queue = [
                e.item.id for e in entries if e.kind in QUEUE_CLASSES and e.item.id not in held_ids
            ]
            back = [e.item.id for e in entries if e.kind is SyncClass.RESTORED]
            # Every listed item's jobs take its title (old rows too), new jobs start with it.
            titles = titles_of(page.items, library_name)
            jobs.record_titles(titles)
            if to_queue:
                queued = jobs.requeue(to_queue, {i: titles[i] for i in to_queue})
            if back:  # marked removed, listed again: their mirror stays
                jobs.restore(back)
        yield SyncedPage(entries, queued, touched, held)
        handled += len(page.items)
        if on_page is not None:
            on_page(handled, page.total)


def _settle_by_probe(
    entry: Classified,
    histories: Mapping[str, ItemHistory],
    probe: ProbeContent,
    touched: list[str],
) -> Classified:
    """UNCHANGED instead of CHANGED when only the time changed and the content probe
    equals the mirrored file's; `touched` collects those items."""
    history = histories.get(entry.item.id)
    recorded = (history.done_source if history is not None else None) or {}
    if entry.kind is not SyncClass.CHANGED or not only_touched(
        recorded, entry.item.fingerprint(), entry.item.id, probe
    ):
        return entry
    touched.append(entry.item.id)
    return Classified(entry.item, SyncClass.UNCHANGED, [])


def sync_library(
    lister: SyncLister,
    jobs: SyncJobs,
    parent_id: str,
    *,
    item_types: Sequence[str],
    dry_run: bool,
    deletion: Deletion | None,
    on_page: PageProgress | None = None,
    library_name: str | None = None,
    probe: ProbeContent | None = None,
    copy_mirror: CopyMirror | None = None,
) -> SyncReport:
    """Classify every listed item and every mirrored item no longer listed; act on them.

    Queues NEW and CHANGED page by page (unless `dry_run`) and keeps RESTORED items'
    mirrors. With `deletion`, removed items are marked (unless that is more than its
    limit: then nothing is removed at all and `held_back` says why), and items marked at
    least the grace ago that Jellyfin still does not have lose their objects; objects go
    first and the mark after, so a failed delete is tried again by the next sync.

    With `probe` and `copy_mirror` (and not `dry_run`), a NEW item of the size of a
    mirrored item that has a content probe waits until the walk is done: when such a
    mirrored item turned out removed and the probes match, it was renamed, and its
    mirror is copied to the new id instead of queueing a transcode (mirror.converge.renames).
    """
    report = SyncReport(dry_run=dry_run, delete=deletion is not None)
    seen: set[str] = set()
    renamable = jobs.probed_sizes() if probe and copy_mirror and not dry_run else {}
    held: list[ItemSummary] = []
    for page in sync_pages(
        lister,
        jobs,
        parent_id,
        item_types=item_types,
        dry_run=dry_run,
        on_page=on_page,
        library_name=library_name,
        probe=probe,
        hold_back=(lambda item: item.size in renamable) if renamable else None,
    ):
        report.queued += page.queued
        report.touched += page.touched
        held += page.held
        for entry in page.entries:
            seen.add(entry.item.id)
            report.names[entry.item.id] = entry.item.name
            report.add(entry.kind, entry.item.id)
            if entry.changes:
                report.changes[entry.item.id] = entry.changes
            if entry.not_a_file is not None:
                report.skipped_kinds[entry.item.id] = entry.not_a_file
    mirrored = jobs.mirrored_item_ids()
    removed = _removed(lister, mirrored - seen)
    for item_id in removed:
        report.add(SyncClass.REMOVED, item_id)
    if held:
        assert probe is not None and copy_mirror is not None
        report.renamed = copy_renamed(held, renamable, set(removed), probe, copy_mirror)
        to_queue = [item for item in held if item.id not in report.renamed]
        titles = titles_of(held, library_name)
        if to_queue:
            report.queued += jobs.requeue(
                [item.id for item in to_queue], {item.id: titles[item.id] for item in to_queue}
            )
        jobs.record_titles({new_id: titles[new_id] for new_id in report.renamed})
    if deletion is not None:
        # The share is of this library's mirror: one library on an offline mount is a
        # small part of a big mirror, and all of its own.
        here = len(mirrored & seen) + len(removed)
        _remove(lister, jobs, deletion, report, removed, mirrored=here, listed=len(seen))
    return report


def _remove(
    lister: SyncLister,
    jobs: SyncJobs,
    deletion: Deletion,
    report: SyncReport,
    removed: list[str],
    *,
    mirrored: int,
    listed: int,
) -> None:
    """Mark the removed items, then purge those whose grace ran out (see sync_library)."""
    report.grace_s = deletion.grace_s
    due = deletion.removals.due(deletion.grace_s)
    if report.dry_run and deletion.grace_s == 0:
        due = sorted(set(due) | set(removed))  # what a real run would purge at once
    report.held_back = held_back(
        len(removed), mirrored, listed=listed, limit=deletion.limit
    ) or held_back(len(due), mirrored + len(due), listed=listed, limit=NO_LIMIT)
    if report.held_back is not None:
        return
    if not report.dry_run:
        deletion.removals.mark_gone(removed)
        due = deletion.removals.due(deletion.grace_s)
    if not due:
        return
    still_there = lister.existing_item_ids(due)
    back = [item_id for item_id in due if item_id in still_there]
    for item_id in back:
        report.add(SyncClass.RESTORED, item_id)
    report.purged = [item_id for item_id in due if item_id not in still_there]
    if report.dry_run:
        return
    jobs.restore(back)
    for item_id in report.purged:
        report.deleted_objects += deletion.delete_item(item_id)
        deletion.removals.mark_purged(item_id)


def _removed(lister: SyncLister, candidates: Iterable[str]) -> list[str]:
    """Mirrored items outside this listing that Jellyfin no longer has at all.

    Not being listed is not enough: the item may sit in another library, or be of a
    type this sync did not ask for.
    """
    unlisted = sorted(candidates)
    if not unlisted:
        return []
    still_there = lister.existing_item_ids(unlisted)
    return [item_id for item_id in unlisted if item_id not in still_there]
