"""The worker loop: claim jobs into free slots, reap stale jobs, shut down gracefully.

Jobs run in threads (one per slot); the loop itself only claims, reaps and waits. It
wakes on NOTIFY from enqueue (a listener thread), when a slot frees, and at least every
poll_interval. On SIGTERM/SIGINT it stops claiming, gives running jobs shutdown_grace to
finish, then aborts them; each aborted attempt puts its job straight back to `new`.

It claims nothing while the fleet is paused or draining (the claim itself refuses:
`mirror pause`), nor outside its MIRROR_ACTIVE_HOURS, where running jobs finish.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Protocol

from mirror.domain.active_hours import ActiveHours, TimeOfDayClock, local_time_of_day
from mirror.domain.errors import ShutdownRequested
from mirror.domain.jobs import Fence, JobNotFound, JobRecord, Lease, Rescued
from mirror.domain.logs import get_logger
from mirror.domain.progress import AbortSignal
from mirror.files.workspace import clean_up_orphans, resumable_here
from mirror.runner.attempt import Outcome
from mirror.runner.outage import DATABASE_OUTAGE, describe_outage, durably

log = get_logger("mirror.worker")

# After a second stop request, aborted attempts get this long (at most) to release their
# jobs themselves before the worker does it for them.
_HURRIED_ABORT_WAIT_S = 2.0

# Runs one claimed job to its recorded end; the worker gives it the slot's abort signal.
AttemptRunner = Callable[[Lease, AbortSignal], Outcome]
# Runs in the listener thread until the second event is set; sets the first on enqueue
# (mirror.db.listen.JobListener: LISTEN on the job channel).
Listen = Callable[[threading.Event, threading.Event], None]


class JobQueue(Protocol):
    """The queue statements the worker needs; JobRepository satisfies it."""

    def claim_next(self, worker_id: str) -> Lease | None:
        """The next due job, or None: nothing is due, or the fleet is paused or draining."""
        ...

    def return_stale_to_new(self, stale_timeout_s: float) -> list[Rescued]: ...

    def latest_for_item(self, item_id: str) -> JobRecord: ...

    def release(
        self, job_id: uuid.UUID, token: uuid.UUID, *, delay_s: float = 0.0, note: str | None = None
    ) -> Fence: ...


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    name: str  # host:pid
    concurrency: int
    poll_interval: float
    reap_interval: float
    stale_timeout: float
    shutdown_grace: float
    work_dir: Path
    # After the grace, how long aborted attempts get to release their own jobs before the
    # worker releases them itself (an attempt stuck in a call that ignores the abort).
    abort_wait: float = 10.0
    # MIRROR_ACTIVE_HOURS: outside them no claims, running jobs finish. Empty: always.
    active_hours: ActiveHours = field(default_factory=ActiveHours)
    # The video encoder its jobs re-encode with (MIRROR_VIDEO_ENCODER as probed).
    encoder: str = "libx264"


@dataclass
class _Slot:
    lease: Lease
    abort: AbortSignal
    thread: threading.Thread
    outcome: Outcome | None = None


class Worker:
    def __init__(
        self,
        repo: JobQueue,
        run_attempt: AttemptRunner,
        config: WorkerConfig,
        *,
        listen: Listen | None = None,
        time_of_day: TimeOfDayClock = local_time_of_day,
    ) -> None:
        self.repo = repo
        self.time_of_day = time_of_day
        self._in_hours: bool | None = None  # last seen, to log each change once
        self.run_attempt = run_attempt
        self.config = config
        self.listen = listen
        self._slots: dict[int, _Slot] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stop_deadline: float | None = None
        self._hurry = threading.Event()  # a second stop request: abort now, wait less
        self._next_reap = 0.0

    # -- public -------------------------------------------------------------------------

    def run(self, *, burst: bool = False) -> None:
        """Work until stopped (or, with `burst`, until nothing is claimable or running)."""
        log.info(
            "worker %s started: concurrency=%d burst=%s encoder=%s",
            self.config.name,
            self.config.concurrency,
            burst,
            self.config.encoder,
        )
        listener = self._start_listener()
        self._clean_up_workspaces()
        try:
            while not self._stopping.is_set():
                self._reap_if_due()
                finished = self._collect_finished()
                claimed = self._fill_slots()
                if finished:
                    self._clean_up_workspaces()
                if burst and not claimed and not self._slots:
                    log.info("nothing left to claim; burst run finished")
                    break
                if not claimed:
                    self._wake.wait(self.config.poll_interval)
                    self._wake.clear()
        finally:
            self._stopping.set()
            self._shut_down()
            if listener is not None:
                listener.join(timeout=2)
        log.info("worker %s stopped", self.config.name)

    def request_stop(self, *_: object) -> None:
        """First call: graceful stop; a further call: abort running jobs now."""
        now = time.monotonic()
        if self._stopping.is_set():
            log.warning("another stop request: aborting running jobs now")
            self._stop_deadline = now
            self._hurry.set()
        else:
            log.info(
                "stop requested: no new claims; running jobs get %ss to finish",
                self.config.shutdown_grace,
            )
            self._stop_deadline = now + self.config.shutdown_grace
            self._stopping.set()
        self._wake.set()

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.request_stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    # -- the loop's steps ----------------------------------------------------------------

    def _fill_slots(self) -> bool:
        if not self._within_active_hours():
            return False
        claimed = False
        for slot_number in range(self.config.concurrency):
            if slot_number in self._slots or self._stopping.is_set():
                continue
            try:
                lease = self.repo.claim_next(f"{self.config.name}:{slot_number}")
            except DATABASE_OUTAGE as error:
                log.warning("claim failed, retrying later: %s", describe_outage(error))
                return claimed
            if lease is None:
                return claimed
            self._start(slot_number, lease)
            claimed = True
        return claimed

    def _within_active_hours(self) -> bool:
        """MIRROR_ACTIVE_HOURS allow claims now; says so in the log when that changes."""
        hours = self.config.active_hours
        if hours.always:
            return True
        now = self.time_of_day()
        inside = hours.is_open(now)
        if inside != self._in_hours:
            if inside:
                log.info("within MIRROR_ACTIVE_HOURS=%s: claiming jobs", hours)
            else:
                log.info(
                    "outside MIRROR_ACTIVE_HOURS=%s: no new claims until %s; running jobs finish",
                    hours,
                    hours.next_opening(now),
                )
            self._in_hours = inside
        return inside

    def _start(self, slot_number: int, lease: Lease) -> None:
        abort = AbortSignal()
        slot = _Slot(lease=lease, abort=abort, thread=threading.Thread())

        def body() -> None:
            try:
                slot.outcome = self.run_attempt(lease, abort)
            finally:
                self._wake.set()

        slot.thread = threading.Thread(target=body, name=f"job-{lease.job_id}", daemon=True)
        self._slots[slot_number] = slot
        log.bind(job=lease.job_id, item=lease.job.item_id, attempt=lease.job.attempts).info(
            "claimed by %s:%d", self.config.name, slot_number
        )
        slot.thread.start()

    def _collect_finished(self) -> bool:
        finished = [n for n, slot in self._slots.items() if not slot.thread.is_alive()]
        for number in finished:
            slot = self._slots.pop(number)
            slot.thread.join()
        return bool(finished)

    def _reap_if_due(self) -> None:
        now = time.monotonic()
        if now < self._next_reap:
            return
        self._next_reap = now + self.config.reap_interval
        try:
            rescued = self.repo.return_stale_to_new(self.config.stale_timeout)
        except DATABASE_OUTAGE as error:
            log.warning("reaper failed, retrying later: %s", describe_outage(error))
            return
        for job in rescued:
            log.bind(job=job.job_id, item=job.item_id).warning(
                "stale job of worker %s -> %s (attempts %d)",
                job.previous_worker,
                job.status,
                job.attempts,
            )

    def _clean_up_workspaces(self) -> None:
        try:
            for path in clean_up_orphans(self.config.work_dir, self._may_resume_here):
                log.info("removed leftover work directory %s", path)
        except DATABASE_OUTAGE as error:
            log.warning("work directory clean-up skipped: %s", describe_outage(error))
        except OSError as error:
            log.warning("work directory clean-up skipped: %s", error)

    def _may_resume_here(self, item_id: str) -> bool:
        """Keep an item's partial download while its newest job may resume it here."""
        try:
            job = self.repo.latest_for_item(item_id)
        except (JobNotFound, ValueError):  # no such job, or not an item directory
            return False
        host = self.config.name.split(":", 1)[0]
        return resumable_here(job.status, job.worker_id, host)

    def _shut_down(self) -> None:
        """Grace, then abort, then release ourselves what no attempt released: the worker
        never exits holding a job. A second stop request ends the grace and shortens the
        wait for aborted attempts."""
        if not self._slots:
            return
        self._wait_for_slots(lambda: self._stop_deadline or time.monotonic())
        if not self._slots:
            return
        for slot in self._slots.values():
            slot.abort.trigger(ShutdownRequested("worker shutting down"))
        aborted = time.monotonic()
        hurried_wait = min(self.config.abort_wait, _HURRIED_ABORT_WAIT_S)
        self._wait_for_slots(
            lambda: aborted + (hurried_wait if self._hurry.is_set() else self.config.abort_wait)
        )
        for slot in list(self._slots.values()):
            self._release_abandoned(slot)

    def _wait_for_slots(self, deadline: Callable[[], float]) -> None:
        """Collect finished attempts until none is left or `deadline()` has passed."""
        while self._slots and time.monotonic() < deadline():
            self._wake.wait(min(0.2, max(0.0, deadline() - time.monotonic())))
            self._wake.clear()
            self._collect_finished()

    def _release_abandoned(self, slot: _Slot) -> None:
        """Put back the job of an attempt that did not end in time (fenced: if the attempt
        recorded a fate after all, this changes nothing)."""
        lease = slot.lease
        job_log = log.bind(job=lease.job_id, item=lease.job.item_id)
        try:
            fence = durably(
                lambda: self.repo.release(lease.job_id, lease.token),
                limit_s=self.config.abort_wait,
            )
        except DATABASE_OUTAGE as error:
            job_log.error(
                "could not release the job before exiting (%s); the reaper will return it",
                describe_outage(error),
            )
            return
        job_log.warning(
            "the attempt did not stop within %ss; released the job to the queue (%s)",
            self.config.abort_wait,
            fence.value,
        )

    # -- LISTEN/NOTIFY -------------------------------------------------------------------

    def _start_listener(self) -> threading.Thread | None:
        if self.listen is None:
            return None
        thread = threading.Thread(
            target=self.listen, args=(self._wake, self._stopping), name="listen", daemon=True
        )
        thread.start()
        return thread
