"""Jellyfin's side of the dashboard: find items by title, queue a whole series, season or
library, and see where each library stands.

Search is Jellyfin's own (`/Items?searchTerm=`); queueing a parent is the sweep of
`mirror enqueue --parent-id`; a library's counts are `mirror sync --dry-run`'s classes
(mirror.converge.library_status) and "mirror the rest" is `mirror sync` without --delete. A
library's counts cost one walk of its listing, so they are kept for `COUNTS_TTL_S` and
shown with the time they were computed; "mirror the rest" and a recount refresh them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from mirror.converge.library_status import LibraryCounts, library_counts
from mirror.converge.library_sweep import sweep_library
from mirror.converge.sync import SyncJobs
from mirror.db.repository import JobRepository
from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.item import normalize_item_id
from mirror.domain.listing import ItemHit, ItemPage, Library
from mirror.web.api import ApiError

COUNTS_TTL_S = 60.0
MIN_RECOUNT_S = 5.0
SEARCH_LIMIT = 25
T = TypeVar("T")


class JellyfinView(Protocol):
    """What the dashboard asks of Jellyfin (JellyfinClient)."""

    def search_items(
        self, term: str, *, item_types: Sequence[str] = ..., limit: int = ...
    ) -> list[ItemHit]: ...

    def list_libraries(self) -> list[Library]: ...

    def iter_library_pages(
        self, parent_id: str, item_types: Sequence[str] = ..., page_size: int = ...
    ) -> Iterator[ItemPage]: ...


# Opens a client for one request's questions (JellyfinClient is its own context manager).
JellyfinFactory = Callable[[], AbstractContextManager[JellyfinView]]


class JellyfinProblem(ApiError):
    """Jellyfin is not configured (503), unreachable or said no (502), or has no such
    library (404): one line for the person, answered like every API error."""


@dataclass(frozen=True, slots=True)
class LibraryStatus:
    """One library's counts and when they were computed."""

    library: Library
    counts: LibraryCounts
    computed_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.library.item_id,
            "name": self.library.name,
            "collection_type": self.library.collection_type,
            "counts": self.counts.to_json(),
            "computed_at": self.computed_at.isoformat(timespec="seconds"),
        }


class LibraryBoard:
    """Search, parent sweeps and library counts over one Jellyfin client and Postgres."""

    def __init__(
        self,
        jellyfin: JellyfinFactory | None,
        sync_jobs: SyncJobs,
        repo: JobRepository,
        *,
        item_types: Sequence[str],
        max_attempts: int,
        ttl_s: float = COUNTS_TTL_S,
        min_recount_s: float = MIN_RECOUNT_S,
    ) -> None:
        self.jellyfin = jellyfin
        self.sync_jobs = sync_jobs
        self.repo = repo
        self.item_types = tuple(item_types)
        self.max_attempts = max_attempts
        self.ttl_s = ttl_s
        self.min_recount_s = min_recount_s
        self._lock = threading.Lock()
        self._counted: dict[str, tuple[float, LibraryStatus]] = {}  # library id -> (when, it)
        self._walking: dict[str, threading.Lock] = {}  # library id -> held while counting

    def search(self, term: str) -> list[ItemHit]:
        """Libraries whose name contains `term` (to queue whole), then Jellyfin's search."""
        wanted = term.strip().casefold()
        libraries = [
            ItemHit(id=lib.item_id, name=lib.name, type="Library")
            for lib in self.libraries()
            if wanted in lib.name.casefold()
        ]
        return libraries + self._ask(lambda j: j.search_items(term, limit=SEARCH_LIMIT))

    def libraries(self) -> list[Library]:
        return self._ask(lambda j: j.list_libraries())

    def library(self, ref: str) -> Library:
        """A library by id, or by name (exact, then ignoring case) like `--library NAME`."""
        libraries = self.libraries()
        by_id = _id_or_none(ref)
        exact = [lib for lib in libraries if lib.item_id == by_id or lib.name == ref]
        loose = [lib for lib in libraries if lib.name.casefold() == ref.casefold()]
        if exact or loose:
            return (exact or loose)[0]
        raise JellyfinProblem(404, f"no Jellyfin library {ref[:80]!r}")

    def status(self, library: Library, *, fresh: bool = False) -> LibraryStatus:
        """The library's counts, from the last minute's walk unless `fresh`.

        One walk at a time per library: requests arriving during a walk wait for its
        result instead of walking too, and `fresh` within `min_recount_s` of the last
        walk is the last walk (reloading the page cannot keep Jellyfin busy).
        """
        with self._lock:
            walk_lock = self._walking.setdefault(library.item_id, threading.Lock())
        with walk_lock:
            with self._lock:
                kept = self._counted.get(library.item_id)
            if kept is not None:
                age = time.monotonic() - kept[0]
                if age < self.min_recount_s or (age < self.ttl_s and not fresh):
                    return kept[1]
            counts = self._ask(
                lambda j: library_counts(
                    j, self.sync_jobs, library.item_id, item_types=self.item_types
                )
            )
            return self._keep(library, counts)

    def mirror_rest(self, library: Library) -> LibraryStatus:
        """Queue the library's NEW and CHANGED items (`mirror sync`); counts from before."""
        counts = self._ask(
            lambda j: library_counts(
                j,
                self.sync_jobs,
                library.item_id,
                item_types=self.item_types,
                mirror_rest=True,
                library_name=library.name,
            )
        )
        with self._lock:  # what was counted is out of date now
            self._counted.pop(library.item_id, None)
        return LibraryStatus(library, counts, datetime.now(UTC))

    def sweep(self, parent_id: str, *, priority: int = 0) -> dict[str, Any]:
        """`mirror enqueue --parent-id`: every item under a series, season or library."""
        library = next((lib for lib in self.libraries() if lib.item_id == parent_id), None)
        result = self._ask(
            lambda j: sweep_library(
                j,
                self.repo,
                parent_id,
                item_types=self.item_types,
                priority=priority,
                max_attempts=self.max_attempts,
                library_name=library.name if library is not None else None,
            )
        )
        return {
            "parent_id": parent_id,
            "seen": result.seen,
            "queued": result.queued,
            "already_queued": result.already_queued,
            "already_mirrored": result.already_mirrored,
            "skipped": result.skipped.total(),
            "summary": result.summary(),
        }

    def _keep(self, library: Library, counts: LibraryCounts) -> LibraryStatus:
        status = LibraryStatus(library, counts, datetime.now(UTC))
        with self._lock:
            self._counted[library.item_id] = (time.monotonic(), status)
        return status

    def _ask(self, call: Callable[[JellyfinView], T]) -> T:
        """Run `call(jellyfin)`; no Jellyfin or its failure becomes a JellyfinProblem."""
        if self.jellyfin is None:
            raise JellyfinProblem(
                503,
                "Jellyfin is not configured: set MIRROR_JELLYFIN_URL and "
                "MIRROR_JELLYFIN_API_KEY for `mirror serve`",
            )
        try:
            with self.jellyfin() as client:
                return call(client)
        except (PermanentError, TransientError) as error:  # Jellyfin's; a database's is not
            raise JellyfinProblem(502, f"Jellyfin: {error}") from None


def _id_or_none(text: str) -> str | None:
    try:
        return normalize_item_id(text)
    except ValueError:
        return None
