"""In-memory fakes of narrow interfaces, for unit tests that need no services.

tests/integration/test_fake_conformance.py runs the same scenario on each fake and on the
real adapter, so a fake cannot drift from what it stands in for.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from mirror.domain.jobs import Fence, FleetMode, Status


class InMemoryBeatQueue:
    """A `BeatQueue` holding one job's fencing state in memory.

    `fail_with` makes writes raise (e.g. DatabaseUnavailable) to simulate Postgres being away.
    """

    def __init__(self, job_id: uuid.UUID, token: uuid.UUID) -> None:
        self.job_id = job_id
        self.token: uuid.UUID | None = token
        self.status: str = Status.PROCESSING
        self.progress: dict[str, Any] | None = None
        self.writes = 0
        self.fail_with: BaseException | None = None
        self.fleet = FleetMode.RUNNING  # `mirror pause`: PAUSED answers Fence.PAUSED
        self._lock = threading.Lock()

    def heartbeat(
        self, job_id: uuid.UUID, token: uuid.UUID, progress: dict[str, Any] | None
    ) -> Fence:
        with self._lock:
            if self.fail_with is not None:
                raise self.fail_with
            if job_id == self.job_id and self.status == Status.PROCESSING and token == self.token:
                self.writes += 1
                if progress is not None:
                    self.progress = progress
                return Fence.PAUSED if self.fleet is FleetMode.PAUSED else Fence.OK
            if self.status == Status.CANCELLED and token == self.token:
                return Fence.CANCELLED
            return Fence.LEASE_LOST

    def cancel(self) -> None:
        with self._lock:
            self.status = Status.CANCELLED

    def set_fleet_mode(self, mode: FleetMode) -> None:
        with self._lock:
            self.fleet = mode

    def take_over(self) -> None:
        """Another attempt claims the job: the old token no longer works."""
        with self._lock:
            self.token = uuid.uuid4()
