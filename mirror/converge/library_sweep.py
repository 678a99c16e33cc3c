"""Library sweeps: enqueue every item of a Jellyfin library not already mirrored or queued.

Used by `mirror enqueue --library/--parent-id`; the webhook's deliveries are only hints,
so a periodic sweep is also how a deployment reconciles what it missed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from mirror.domain.item import ItemTitle
from mirror.domain.jobs import Enqueued
from mirror.domain.listing import ItemPage, ItemSummary
from mirror.domain.sources import non_file_kind


class LibraryLister(Protocol):
    """What a sweep needs from Jellyfin (JellyfinClient)."""

    def iter_library_pages(
        self, parent_id: str, item_types: Sequence[str] = ..., page_size: int = ...
    ) -> Iterator[ItemPage]: ...


class SweepQueue(Protocol):
    """What a sweep needs from the job queue (JobRepository)."""

    def enqueue(
        self,
        item_ids: Iterable[str],
        *,
        priority: int = ...,
        max_attempts: int = ...,
        skip_mirrored: bool = ...,
        titles: Mapping[str, ItemTitle] | None = ...,
    ) -> Sequence[Enqueued]: ...


@dataclass
class SweepResult:
    seen: int = 0
    queued: int = 0  # new jobs
    already_queued: int = 0  # had an active job
    already_mirrored: int = 0  # had a done job: skipped
    # Not one media file, by what they are (".strm link", "folder (Series)", ...).
    skipped: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        line = (
            f"{self.seen} item(s): {self.queued} queued, {self.already_queued} already queued, "
            f"{self.already_mirrored} already mirrored"
        )
        if self.skipped:
            kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.skipped.items()))
            line += f", {self.skipped.total()} skipped as not a media file ({kinds})"
        return line


# Called after each page with (items handled so far, total reported by Jellyfin).
PageProgress = Callable[[int, int], None]


def sweep_library(
    lister: LibraryLister,
    repo: SweepQueue,
    parent_id: str,
    *,
    item_types: Sequence[str],
    priority: int = 0,
    max_attempts: int = 3,
    on_page: PageProgress | None = None,
    library_name: str | None = None,
) -> SweepResult:
    """Enqueue the library page by page (one transaction per page, constant memory).

    Every listed item's jobs take its title (done ones too: a sweep brings old rows'
    titles up to date); `library_name` is the library's, where the caller knows it.
    """
    result = SweepResult()
    for page in lister.iter_library_pages(parent_id, item_types):
        ids = []
        for item in page.items:
            kind = non_file_kind(item)
            if kind is None:
                ids.append(item.id)
            else:  # its job would only fail: a .strm, a disc, a folder, a missing episode
                result.skipped[kind] += 1
        enqueued = repo.enqueue(
            ids,
            priority=priority,
            max_attempts=max_attempts,
            skip_mirrored=True,
            titles=titles_of(page.items, library_name),
        )
        result.seen += len(page.items)
        result.queued += sum(1 for e in enqueued if e.created)
        result.already_queued += sum(1 for e in enqueued if not e.created)
        result.already_mirrored += len(ids) - len(enqueued)
        if on_page is not None:
            on_page(result.seen, page.total)
    return result


def titles_of(items: Sequence[ItemSummary], library_name: str | None) -> dict[str, ItemTitle]:
    """The listed items' titles by item id, in the library the listing walked."""
    return {item.id: replace(item.title, library_name=library_name) for item in items}
