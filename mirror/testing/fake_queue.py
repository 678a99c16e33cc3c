"""An in-memory job queue: the worker's `JobQueue`, the attempt's `AttemptQueue` and
`AttemptHistory`, with JobRepository's semantics (fencing by lease token, attempts,
backoff, waits in a row, the reaper) and none of its SQL.

For in-process tests of the worker and the attempt that are not about Postgres itself.
tests/integration/test_fake_conformance.py runs one scenario on this and on
JobRepository (+ AttemptLog) against Postgres, so the two cannot drift apart.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from mirror.domain.item import ItemTitle, normalize_item_id
from mirror.domain.jobs import (
    AttemptStats,
    Fence,
    FleetChange,
    FleetMode,
    FleetState,
    JobNotFound,
    JobRecord,
    JobStateError,
    Lease,
    Mirrored,
    Rescued,
    Status,
)

NOT_READY_MAX_DELAY_S = 3600.0


@dataclass
class AttemptRow:
    """One claim of a job, as media_mirror.job_attempts keeps it."""

    token: uuid.UUID
    job_id: uuid.UUID
    attempt: int
    worker_id: str
    claimed_at: datetime
    ended_at: datetime | None = None
    outcome: str | None = None
    error: str | None = None
    stats: AttemptStats | None = None


def _now() -> datetime:
    return datetime.now(UTC)


class InMemoryJobQueue:
    def __init__(self) -> None:
        self._jobs: dict[uuid.UUID, JobRecord] = {}
        self._attempts: list[AttemptRow] = []
        self._lock = threading.RLock()
        # Raise this from every statement while set (e.g. DatabaseUnavailable).
        self.fail_with: BaseException | None = None
        # The fleet's row (mirror.db.fleet): mode, changed_at, changed_by, reason.
        self._fleet: tuple[FleetMode, datetime | None, str | None, str | None] = (
            FleetMode.RUNNING,
            None,
            None,
            None,
        )

    # -- people's commands --------------------------------------------------------------

    def enqueue(self, item_ids: Iterable[str], *, max_attempts: int = 3) -> list[JobRecord]:
        """One `new` job per item without an active one; the active jobs of all."""
        jobs = []
        with self._lock:
            for item_id in dict.fromkeys(normalize_item_id(raw) for raw in item_ids):
                active = [
                    j
                    for j in self._jobs.values()
                    if j.item_id == item_id and j.status in (Status.NEW, Status.PROCESSING)
                ]
                if active:
                    jobs.append(active[0])
                    continue
                now = _now()
                job = JobRecord(
                    id=uuid.uuid4(),
                    item_id=item_id,
                    status=Status.NEW,
                    priority=0,
                    attempts=0,
                    max_attempts=max_attempts,
                    run_after=now,
                    worker_id=None,
                    lease_token=None,
                    taken_at=None,
                    heartbeat_at=None,
                    heartbeat_data=None,
                    video_key=None,
                    audio_keys=None,
                    error=None,
                    created_at=now,
                    updated_at=now,
                    finished_at=None,
                )
                self._jobs[job.id] = job
                jobs.append(job)
        return jobs

    def cancel(self, job_id: uuid.UUID) -> JobRecord:
        """Stop a queued or running job; a running attempt notices at its next beat."""
        with self._lock:
            job = self.get(job_id)
            if job.status not in (Status.NEW, Status.PROCESSING):
                raise JobStateError(f"job {job_id} is already {job.status}; nothing to cancel")
            return self._set(job_id, status=Status.CANCELLED, finished_at=_now())

    def get(self, job_id: uuid.UUID) -> JobRecord:
        with self._lock:
            if job_id not in self._jobs:
                raise JobNotFound(str(job_id))
            return self._jobs[job_id]

    def latest_for_item(self, item_id: str) -> JobRecord:
        item_id = normalize_item_id(item_id)
        with self._lock:
            jobs = [j for j in self._jobs.values() if j.item_id == item_id]
        if not jobs:
            raise JobNotFound(item_id)
        return max(jobs, key=lambda j: j.created_at)

    def attempts_of(self, job_id: uuid.UUID) -> list[AttemptRow]:
        with self._lock:
            return [a for a in self._attempts if a.job_id == job_id]

    def make_stale(self, job_id: uuid.UUID, seconds: float = 3600) -> None:
        """The holder stopped beating `seconds` ago (a dead worker)."""
        with self._lock:
            self._set(job_id, heartbeat_at=_now() - timedelta(seconds=seconds))

    # -- FleetControl -------------------------------------------------------------------

    def fleet_state(self) -> FleetState:
        with self._lock:
            self._check()
            mode, changed_at, changed_by, reason = self._fleet
            statuses = [job.status for job in self._jobs.values()]
            return FleetState(
                mode=mode,
                changed_at=changed_at,
                changed_by=changed_by,
                reason=reason,
                running=statuses.count(Status.PROCESSING),
                queued=statuses.count(Status.NEW),
            )

    def set_fleet_mode(
        self, mode: FleetMode, *, changed_by: str, reason: str | None = None
    ) -> FleetChange:
        with self._lock:
            self._check()
            before = self._fleet[0]
            if before is not mode:
                self._fleet = (mode, _now(), changed_by, reason)
            return FleetChange(before=before, state=self.fleet_state())

    # -- JobQueue -----------------------------------------------------------------------

    def claim_next(self, worker_id: str) -> Lease | None:
        with self._lock:
            self._check()
            if self._fleet[0] is not FleetMode.RUNNING:
                return None
            now = _now()
            due = [j for j in self._jobs.values() if j.status == Status.NEW and j.run_after <= now]
            if not due:
                return None
            job = min(due, key=lambda j: (-j.priority, j.run_after))
            token = uuid.uuid4()
            job = self._set(
                job.id,
                status=Status.PROCESSING,
                worker_id=worker_id,
                lease_token=token,
                taken_at=now,
                heartbeat_at=now,
                heartbeat_data=None,
                attempts=job.attempts + 1,
            )
            self._attempts.append(AttemptRow(token, job.id, job.attempts, worker_id, now))
            return Lease(job=job, token=token)

    def return_stale_to_new(self, stale_timeout_s: float) -> list[Rescued]:
        rescued = []
        with self._lock:
            self._check()
            cutoff = _now() - timedelta(seconds=stale_timeout_s)
            for job in list(self._jobs.values()):
                if job.status != Status.PROCESSING or job.heartbeat_at is None:
                    continue
                if job.heartbeat_at >= cutoff:
                    continue
                used_up = job.attempts >= job.max_attempts
                for row in self._attempts:
                    if row.token == job.lease_token and row.ended_at is None:
                        row.ended_at, row.outcome = _now(), "stale"
                        row.error = f"no heartbeat for over {stale_timeout_s:g}s"
                error = (
                    f"worker {job.worker_id or '?'} stopped sending heartbeats "
                    f"(none for over {stale_timeout_s:g}s)"
                    + (
                        f"; attempts used up ({job.attempts} of {job.max_attempts})"
                        if used_up
                        else "; returned to the queue"
                    )
                )
                status = Status.FAILED if used_up else Status.NEW
                self._set(
                    job.id,
                    status=status,
                    error=error,
                    finished_at=_now() if used_up else None,
                    run_after=_now(),
                    worker_id=None,
                    lease_token=None,
                )
                rescued.append(Rescued(job.id, job.item_id, status, job.attempts, job.worker_id))
        return rescued

    # -- AttemptQueue -------------------------------------------------------------------

    def heartbeat(
        self, job_id: uuid.UUID, token: uuid.UUID, progress: dict[str, Any] | None
    ) -> Fence:
        with self._lock:
            fence = self._fence(job_id, token)
            if fence is Fence.OK:
                job = self._jobs[job_id]
                self._set(
                    job_id,
                    heartbeat_at=_now(),
                    heartbeat_data=progress if progress is not None else job.heartbeat_data,
                )
                if self._fleet[0] is FleetMode.PAUSED:
                    return Fence.PAUSED
            return fence

    def mark_done(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        mirrored: Mirrored,
        *,
        progress: dict[str, Any] | None = None,
    ) -> Fence:
        with self._lock:
            fence = self._fence(job_id, token, done_is_ok=True)
            job = self._jobs.get(job_id)
            if fence is not Fence.OK or job is None or job.status == Status.DONE:
                return fence
            self._set(
                job_id,
                status=Status.DONE,
                error=None,
                finished_at=_now(),
                heartbeat_at=_now(),
                heartbeat_data=progress if progress is not None else job.heartbeat_data,
                **{name: getattr(mirrored, name) for name in Mirrored.__slots__},
            )
            return Fence.OK

    def mark_failed(self, job_id: uuid.UUID, token: uuid.UUID, error: str) -> Fence:
        with self._lock:
            fence = self._fence(job_id, token)
            if fence is Fence.OK:
                self._set(job_id, status=Status.FAILED, error=error, finished_at=_now(),
                          heartbeat_at=_now())  # fmt: skip
            return fence

    def fail_or_retry(
        self, job_id: uuid.UUID, token: uuid.UUID, error: str, *, backoff_s: float
    ) -> tuple[Fence, str | None]:
        with self._lock:
            fence = self._fence(job_id, token)
            if fence is not Fence.OK:
                return fence, None
            job = self._jobs[job_id]
            used_up = job.attempts >= job.max_attempts
            delay = backoff_s * 2 ** max(job.attempts - 1, 0)
            self._set(
                job_id,
                status=Status.FAILED if used_up else Status.NEW,
                error=(
                    f"{error} (attempts used up: {job.attempts} of {job.max_attempts})"
                    if used_up
                    else error
                ),
                finished_at=_now() if used_up else None,
                run_after=_now() + timedelta(seconds=delay),
                worker_id=None,
                lease_token=None,
            )
            return Fence.OK, Status.FAILED if used_up else Status.NEW

    def release(
        self, job_id: uuid.UUID, token: uuid.UUID, *, delay_s: float = 0.0, note: str | None = None
    ) -> Fence:
        with self._lock:
            fence = self._fence(job_id, token)
            if fence is Fence.OK:
                job = self._jobs[job_id]
                self._set(
                    job_id,
                    status=Status.NEW,
                    attempts=max(job.attempts - 1, 0),
                    run_after=_now() + timedelta(seconds=delay_s),
                    error=note if note is not None else job.error,
                    worker_id=None,
                    lease_token=None,
                )
            return fence

    def release_until_ready(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        *,
        note: str,
        phase: str,
        first_delay_s: float,
        max_delay_s: float = NOT_READY_MAX_DELAY_S,
        give_up_after_s: float | None = None,
        gave_up: str | None = None,
    ) -> tuple[Fence, str | None]:
        with self._lock:
            fence = self._fence(job_id, token)
            if fence is not Fence.OK:
                return fence, None
            job = self._jobs[job_id]
            waits = self._waits_in_a_row(job_id)
            delay = min(first_delay_s * 2 ** min(waits, 40), max(max_delay_s, first_delay_s))
            expired = give_up_after_s is not None and job.created_at < _now() - timedelta(
                seconds=give_up_after_s
            )
            if expired:
                self._set(job_id, status=Status.FAILED, error=gave_up or note, finished_at=_now(),
                          heartbeat_at=_now(), worker_id=None, lease_token=None)  # fmt: skip
                return Fence.OK, Status.FAILED
            self._set(
                job_id,
                status=Status.NEW,
                attempts=max(job.attempts - 1, 0),
                error=note,
                run_after=_now() + timedelta(seconds=delay),
                heartbeat_data={"phase": phase, "waits": waits + 1, "retry_in_s": round(delay, 1)},
                heartbeat_at=_now(),
                worker_id=None,
                lease_token=None,
            )
            return Fence.OK, Status.NEW

    def refresh_title(self, job_id: uuid.UUID, token: uuid.UUID, title: ItemTitle) -> Fence:
        """As mirror.db.titles: every job of the item takes the facts given (None keeps)."""
        with self._lock:
            fence = self._fence(job_id, token)
            if fence is Fence.OK:
                item_id = self._jobs[job_id].item_id
                facts = {k: v for k, v in asdict(title).items() if v is not None}
                for job in list(self._jobs.values()):
                    if job.item_id == item_id:
                        self._jobs[job.id] = replace(job, **facts)
            return fence

    # -- AttemptHistory -----------------------------------------------------------------

    def end_attempt(
        self, token: uuid.UUID, outcome: str, error: str | None, stats: AttemptStats
    ) -> bool:
        with self._lock:
            self._check()
            for row in self._attempts:
                if row.token == token and row.ended_at is None:
                    row.ended_at, row.outcome, row.error, row.stats = _now(), outcome, error, stats
                    return True
            return False

    # -- inside -------------------------------------------------------------------------

    def _check(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def _fence(self, job_id: uuid.UUID, token: uuid.UUID, *, done_is_ok: bool = False) -> Fence:
        self._check()
        job = self._jobs.get(job_id)
        if job is None or job.lease_token != token:
            return Fence.LEASE_LOST
        if job.status == Status.PROCESSING:
            return Fence.OK
        if job.status == Status.CANCELLED:
            return Fence.CANCELLED
        if done_is_ok and job.status == Status.DONE:
            return Fence.OK
        return Fence.LEASE_LOST

    def _waits_in_a_row(self, job_id: uuid.UUID) -> int:
        rows = self.attempts_of(job_id)
        last_other = max(
            (r.claimed_at for r in rows if r.ended_at is not None and r.outcome != "waiting"),
            default=None,
        )
        return sum(
            1
            for r in rows
            if r.outcome == "waiting" and (last_other is None or r.claimed_at > last_other)
        )

    def _set(self, job_id: uuid.UUID, **changes: Any) -> JobRecord:
        if job_id not in self._jobs:
            raise JobNotFound(str(job_id))
        job = replace(self._jobs[job_id], updated_at=_now(), **changes)
        self._jobs[job_id] = job
        return job
