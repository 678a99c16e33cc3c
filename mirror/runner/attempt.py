"""One attempt at one claimed job: heartbeat around the pipeline, then the job's fate.

The fate follows from the kind of error alone (mirror.domain.errors), and every statement that
records it is fenced by the lease, so a worker that lost its job changes nothing.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mirror.domain.errors import (
    FleetPaused,
    JobCancelled,
    LeaseLost,
    NotReady,
    PermanentError,
    ShutdownRequested,
    Stalled,
    TransientError,
)
from mirror.domain.jobs import AttemptStats, Fence, Lease, Mirrored, Status
from mirror.domain.logs import ContextAdapter
from mirror.domain.progress import AbortSignal
from mirror.domain.redact import redact
from mirror.runner.heartbeat import Heartbeat
from mirror.runner.outage import DATABASE_OUTAGE, describe_outage, durably


class Outcome(enum.Enum):
    DONE = "done"
    FAILED = "failed"
    RETRY = "retry"  # back to new with backoff (or failed when attempts ran out)
    RELEASED = "released"  # back to new without using an attempt
    WAITING = "waiting"  # not ready (unprobed, disk short): released with a growing delay
    CANCELLED = "cancelled"
    LEASE_LOST = "lease_lost"


class AttemptHistory(Protocol):
    """Closes the attempt's history row (AttemptLog)."""

    def end_attempt(
        self, token: uuid.UUID, outcome: str, error: str | None, stats: AttemptStats
    ) -> bool: ...


class AttemptQueue(Protocol):
    """The fenced queue statements an attempt needs (Postgres: JobRepository satisfies it)."""

    def mark_done(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        mirrored: Mirrored,
        *,
        progress: dict[str, Any] | None = None,
    ) -> Fence: ...

    def heartbeat(
        self, job_id: uuid.UUID, token: uuid.UUID, progress: dict[str, Any] | None
    ) -> Fence: ...

    def mark_failed(self, job_id: uuid.UUID, token: uuid.UUID, error: str) -> Fence: ...

    def fail_or_retry(
        self, job_id: uuid.UUID, token: uuid.UUID, error: str, *, backoff_s: float
    ) -> tuple[Fence, str | None]: ...

    def release(
        self, job_id: uuid.UUID, token: uuid.UUID, *, delay_s: float = 0.0, note: str | None = None
    ) -> Fence: ...

    def release_until_ready(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        *,
        note: str,
        phase: str,
        first_delay_s: float,
        give_up_after_s: float | None = None,
        gave_up: str | None = None,
    ) -> tuple[Fence, str | None]: ...


@dataclass(frozen=True, slots=True)
class AttemptPolicy:
    heartbeat_interval: float
    stall_timeout: float
    stale_timeout: float
    retry_backoff: float
    # The worker's video encoder (MIRROR_VIDEO_ENCODER as probed), in every heartbeat.
    encoder: str | None = None

    @property
    def lease_timeout(self) -> float:
        """Stop on our own a beat before a reaper elsewhere may hand the job on."""
        return max(self.stale_timeout - self.heartbeat_interval, self.heartbeat_interval)


# The pipeline runs the job's work and returns what it mirrored; it raises to say why it
# could not. Recording the outcome, done included, is run_attempt's alone.
Pipeline = Callable[[Lease, Heartbeat], Mirrored]


def run_attempt(
    lease: Lease,
    abort: AbortSignal,
    *,
    queue: AttemptQueue,
    pipeline: Pipeline,
    policy: AttemptPolicy,
    log: ContextAdapter,
    history: AttemptHistory | None = None,
) -> Outcome:
    """Run the pipeline under a heartbeat and record how the attempt ended: the one
    writer of every end state (done, failed, retry, released, waiting)."""
    heartbeat = Heartbeat(
        queue,
        lease.job_id,
        lease.token,
        interval=policy.heartbeat_interval,
        stall_timeout=policy.stall_timeout,
        lease_timeout=policy.lease_timeout,
        abort=abort,
        attempt=lease.job.attempts,
        log=log,
        encoder=policy.encoder,
    )
    error: BaseException | None = None
    try:
        with heartbeat:
            mirrored = pipeline(lease, heartbeat)
            # Every output is in S3: a Postgres blip must not cost the attempt, so the
            # fenced statement is retried for as long as the lease holds.
            fence = durably(
                lambda: queue.mark_done(
                    lease.job_id, lease.token, mirrored, progress=heartbeat.progress_json()
                ),
                abort=heartbeat.abort,
            )
        outcome, error = _done(fence, log)
    except Exception as raised:  # every ending gets a recorded fate
        # When the attempt was stopped from outside, an adapter may surface a secondary
        # error (a killed ffmpeg, a closed socket): the stop reason is the real one.
        error = abort.reason or raised
        latest = heartbeat.latest()
        phase_log = log.bind(phase=latest.phase if latest else "metadata")
        outcome = _record_fate(lease, error, queue, policy, phase_log)
    if history is not None:
        message = None if error is None else error_text(error)
        try:
            durably(
                lambda: history.end_attempt(lease.token, outcome.value, message, heartbeat.stats())
            )
        except DATABASE_OUTAGE as failure:  # history is for people; the job's fate is recorded
            log.warning("attempt history not written: %s", describe_outage(failure))
    return outcome


def _done(fence: Fence, log: ContextAdapter) -> tuple[Outcome, BaseException | None]:
    """The outcome of the fenced `done`; a cancel or a lost lease during the upload wins."""
    if fence is Fence.OK:
        return Outcome.DONE, None
    if fence is Fence.CANCELLED:
        log.info("stopped: the job was cancelled")
        return Outcome.CANCELLED, JobCancelled("job was cancelled while its outputs were uploading")
    lost = LeaseLost("lease lost before the job could be marked done")
    log.warning("stopped, touching nothing: %s", lost)
    return Outcome.LEASE_LOST, lost


def error_text(error: BaseException) -> str:
    """The error as stored in the job row and the attempt history: secrets masked."""
    return redact(str(error) or type(error).__name__)


def _record_fate(
    lease: Lease,
    error: BaseException,
    queue: AttemptQueue,
    policy: AttemptPolicy,
    log: ContextAdapter,
) -> Outcome:
    job_id, token = lease.job_id, lease.token
    message = error_text(error)
    if isinstance(error, JobCancelled):
        log.info("stopped: the job was cancelled")
        return Outcome.CANCELLED
    if isinstance(error, LeaseLost):
        log.warning("stopped, touching nothing: %s", message)
        return Outcome.LEASE_LOST
    if isinstance(error, ShutdownRequested):  # a worker's shutdown, or the fleet's pause
        fence = durably(lambda: queue.release(job_id, token))
        why = "the fleet's pause" if isinstance(error, FleetPaused) else "shutdown"
        log.info("released to the queue for %s (%s)", why, fence.value)
        return _fenced(fence, Outcome.RELEASED, log)
    if isinstance(error, NotReady):
        return _wait_until_ready(lease, error, queue, policy, log)
    if isinstance(error, PermanentError):
        log.error("failed: %s", message)
        fence = durably(lambda: queue.mark_failed(job_id, token, message))
        return _fenced(fence, Outcome.FAILED, log)
    if not isinstance(error, TransientError | Stalled):
        log.error("unexpected error", exc_info=error)
        message = f"unexpected error: {type(error).__name__}: {message}"
    fence, status = durably(
        lambda: queue.fail_or_retry(job_id, token, message, backoff_s=policy.retry_backoff)
    )
    log.warning("attempt failed (%s), job is now %s: %s", fence.value, status, message)
    return _fenced(fence, Outcome.FAILED if status == Status.FAILED else Outcome.RETRY, log)


def _wait_until_ready(
    lease: Lease, error: NotReady, queue: AttemptQueue, policy: AttemptPolicy, log: ContextAdapter
) -> Outcome:
    """Not ready yet: back to the queue with a growing delay, or failed once waited too long."""
    message = str(error)
    fence, status = durably(
        lambda: queue.release_until_ready(
            lease.job_id,
            lease.token,
            note=message,
            phase=error.phase,
            first_delay_s=policy.retry_backoff,
            give_up_after_s=error.give_up_after,
            gave_up=error.gave_up,
        )
    )
    if status == Status.FAILED:
        log.error("failed: %s", error.gave_up)
        return _fenced(fence, Outcome.FAILED, log)
    log.warning("released without using an attempt (%s): %s", error.phase, message)
    return _fenced(fence, Outcome.WAITING, log)


def _fenced(fence: Fence, outcome: Outcome, log: ContextAdapter) -> Outcome:
    if fence is Fence.OK:
        return outcome
    log.warning("could not record the outcome: %s", fence.value)
    return Outcome.CANCELLED if fence is Fence.CANCELLED else Outcome.LEASE_LOST
