"""`mirror sync`'s view of Postgres (mirror.converge.sync.SyncJobs): item histories, re-mirrors,
restores. Shared by the `sync` command and the dashboard's library page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mirror.db.mirrored import MirroredItems
from mirror.db.removals import Removals
from mirror.db.repository import JobRepository
from mirror.domain.item import ItemTitle
from mirror.domain.jobs import ItemHistory


@dataclass(frozen=True)
class SyncJobStore:
    """MirroredItems, Removals and JobRepository together, as sync asks for them."""

    mirrored: MirroredItems
    removals: Removals
    repo: JobRepository
    max_attempts: int

    def histories(self, item_ids: Sequence[str]) -> dict[str, ItemHistory]:
        return self.mirrored.histories(item_ids)

    def mirrored_item_ids(self) -> set[str]:
        return self.mirrored.mirrored_item_ids()

    def restore(self, item_ids: Sequence[str]) -> list[str]:
        return self.removals.restore(item_ids)

    def requeue(self, item_ids: Sequence[str], titles: Mapping[str, ItemTitle]) -> int:
        results = self.repo.enqueue(item_ids, max_attempts=self.max_attempts, titles=titles)
        return sum(1 for result in results if result.created)

    def record_titles(self, titles: Mapping[str, ItemTitle]) -> None:
        self.repo.record_titles(titles)

    def refresh_source(self, item_id: str, facts: dict[str, object]) -> None:
        self.mirrored.refresh_source(item_id, facts)

    def probed_sizes(self) -> dict[int, list[tuple[str, str]]]:
        return self.mirrored.probed_sizes()
