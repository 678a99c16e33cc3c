"""The `Heartbeat` of one running attempt: throttled progress writes, keep-alive, watchdogs.

Every progress callback of the job (download chunks, ffmpeg progress lines, S3 upload
callbacks) calls the heartbeat with the latest counts. It writes to Postgres at most once
per `interval` (latest progress wins), and a keep-alive thread beats on the same interval
so phases without callbacks never look stale. It stops the attempt through the job's
`AbortSignal` when:

- the row says the job was cancelled, or the lease belongs to someone else now;
- the fleet is paused (`mirror pause`): the attempt releases its job to the queue;
- no progress arrived for `stall_timeout` (a hung ffmpeg or a silent socket), unless the
  job is merely waiting its turn (phase `waiting`: a download slot held by others);
- no beat succeeded for `lease_timeout` (e.g. the process was paused or Postgres was
  unreachable that long): a reaper elsewhere may already have handed the job to another
  worker, so this attempt must not write anything more.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from mirror.domain.durations import format_duration
from mirror.domain.errors import FleetPaused, JobCancelled, LeaseLost, Stalled
from mirror.domain.jobs import AttemptStats, Fence
from mirror.domain.progress import AbortSignal, Progress
from mirror.runner.outage import DATABASE_OUTAGE, describe_outage

log = logging.getLogger("mirror.heartbeat")  # the name logs carried before the move to packages

Clock = Callable[[], float]


class BeatQueue(Protocol):
    """The one queue statement the heartbeat needs (Postgres: JobRepository satisfies it)."""

    def heartbeat(
        self, job_id: uuid.UUID, token: uuid.UUID, progress: dict[str, Any] | None
    ) -> Fence: ...


class Heartbeat:
    """Callable progress sink for one attempt; see the module docstring."""

    def __init__(
        self,
        queue: BeatQueue,
        job_id: uuid.UUID,
        token: uuid.UUID,
        *,
        interval: float,
        stall_timeout: float,
        lease_timeout: float,
        abort: AbortSignal | None = None,
        clock: Clock = time.monotonic,
        attempt: int | None = None,
        log: logging.LoggerAdapter[logging.Logger] | None = None,
        encoder: str | None = None,
    ) -> None:
        self.queue = queue
        self.job_id = job_id
        self.token = token
        self.interval = interval
        self.stall_timeout = stall_timeout
        self.lease_timeout = lease_timeout
        self.abort = abort if abort is not None else AbortSignal()
        self.clock = clock
        self.attempt = attempt
        self.encoder = encoder  # the worker's video encoder, named in heartbeat_data
        self.log = log
        self.writes = 0  # successful writes, for tests and metrics

        self._lock = threading.Lock()  # guards the fields below and serializes writes
        now = clock()
        self._latest: Progress | None = None
        self._written: Progress | None = None
        self._last_attempted_write = now - interval  # first call writes at once
        self._attempted_phase: str | None = None  # of the latest write tried
        self._last_success = now
        self._last_progress_change = now
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Per-phase figures for the attempt history: seconds spent and latest progress.
        self._phase_seconds: dict[str, float] = {}
        self._phase_started = now
        self._last_of_phase: dict[str, Progress] = {}

    # -- the progress callback ------------------------------------------------------------

    def __call__(self, progress: Progress) -> None:
        """Record progress; write when due; raise if the attempt must stop."""
        self.abort.raise_if_set()
        now = self.clock()
        with self._lock:
            previous = self._latest
            if progress != previous:
                self._latest = progress
                self._last_progress_change = now
                self._last_of_phase[progress.phase] = progress
                if previous is None:
                    self._phase_started = now
                elif previous.phase != progress.phase:
                    self._close_phase(previous.phase, now)
        if self.log is not None and (previous is None or previous.phase != progress.phase):
            self.log.info("phase=%s started", progress.phase)
        self.beat_if_due(now)
        self.abort.raise_if_set()

    def moved(self) -> None:
        """Some work moved that the shown progress does not count (a later phase of the
        overlap, e.g. the upload while the shown transcode waits for it): no stall."""
        with self._lock:
            self._last_progress_change = self.clock()

    def beat_if_due(self, now: float | None = None) -> None:
        """Write if an interval has passed since the last write (or its attempt), or a
        phase started that no write has shown yet: a keep-alive beat just before the
        first progress must not hide the download until an interval later."""
        now = self.clock() if now is None else now
        # Non-blocking: if another thread is writing right now, this beat is covered.
        if not self._lock.acquire(blocking=False):
            return
        try:
            if now - self._last_attempted_write < self.interval and not self._new_phase_locked():
                return
            self._write_locked(now)
        finally:
            self._lock.release()

    def checkpoint(self) -> None:
        """Beat now, synchronously, and raise unless this attempt still owns the job.

        Called before side effects another worker could race (publishing the outputs),
        so a worker paused past stale_timeout finds out before S3 shows anything. While
        Postgres is unreachable it keeps trying, up to the lease timeout.
        """
        while True:
            self.check_watchdogs(self.clock())
            self.abort.raise_if_set()
            try:
                with self._lock:
                    self._write_locked(self.clock(), raise_db_errors=True)
                break
            except DATABASE_OUTAGE:
                # Postgres is away (the outputs wait, invisible): try again until it
                # answers or the local lease runs out, which fires the abort above.
                self.abort.wait(min(self.interval, 1.0))
        self.abort.raise_if_set()

    def flush(self) -> None:
        """Write the latest progress now if it was not written yet (end of a phase)."""
        with self._lock:
            if self._latest != self._written:
                self._write_locked(self.clock())
        self.abort.raise_if_set()

    def stats(self) -> AttemptStats:
        """Seconds per phase, bytes moved and writes made so far, for the attempt history."""
        with self._lock:
            seconds = dict(self._phase_seconds)
            if self._latest is not None:
                current = self._latest.phase
                seconds[current] = seconds.get(current, 0.0) + self.clock() - self._phase_started
            download = self._last_of_phase.get("download")
            upload = self._last_of_phase.get("upload")
        return AttemptStats(
            heartbeat_writes=self.writes,
            bytes_downloaded=download.bytes_done if download else None,
            bytes_uploaded=upload.bytes_done if upload else None,
            download_s=seconds.get("download"),
            transcode_s=seconds.get("transcode"),
            upload_s=seconds.get("upload"),
        )

    def _close_phase(self, phase: str, now: float) -> None:
        self._phase_seconds[phase] = self._phase_seconds.get(phase, 0.0) + now - self._phase_started
        self._phase_started = now

    def latest(self) -> Progress | None:
        with self._lock:
            return self._latest

    def progress_json(self) -> dict[str, Any] | None:
        with self._lock:
            return self._as_json(self._latest)

    # -- keep-alive -----------------------------------------------------------------------

    def start(self) -> Heartbeat:
        """Start the keep-alive thread (beats and watchdogs while no callbacks arrive)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._keep_alive, name=f"heartbeat-{self.job_id}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(5.0, self.interval * 2))

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _keep_alive(self) -> None:
        tick = min(self.interval / 4, 1.0)
        while not self._stop.wait(tick):
            if self.abort.is_set():
                return
            now = self.clock()
            self.check_watchdogs(now)
            if self.abort.is_set():
                return
            self.beat_if_due(now)

    def check_watchdogs(self, now: float) -> None:
        """Fire the abort signal on a stall or an expired local lease (keep-alive calls it)."""
        with self._lock:
            since_progress = now - self._last_progress_change
            since_success = now - self._last_success
            phase = self._latest.phase if self._latest else "start"
        if since_success >= self.lease_timeout:
            self.abort.trigger(
                LeaseLost(
                    f"lease lost (no successful heartbeat for {format_duration(since_success)}; "
                    "another worker may own the job now)"
                )
            )
        elif since_progress >= self.stall_timeout and phase != "waiting":
            self.abort.trigger(
                Stalled(
                    f"stalled: no progress for {format_duration(since_progress)} in phase {phase}"
                )
            )

    # -- the write ------------------------------------------------------------------------

    def _write_locked(self, now: float, *, raise_db_errors: bool = False) -> None:
        """One heartbeat statement; caller holds the lock."""
        self._last_attempted_write = now
        progress = self._latest if self._latest != self._written else None
        if self._latest is not None:
            self._attempted_phase = self._latest.phase
        try:
            fence = self.queue.heartbeat(self.job_id, self.token, self._as_json(progress))
        except DATABASE_OUTAGE as error:
            # Postgres restarting, a connection killed, no pooled connection free: keep
            # working and try again next interval; the lease timeout stops us if it lasts.
            log.warning("heartbeat write failed, will retry: %s", describe_outage(error))
            if raise_db_errors:
                raise
            return
        if fence in (Fence.OK, Fence.PAUSED):
            self.writes += 1
            self._last_success = now
            if progress is not None:
                self._written = progress
        if fence is Fence.PAUSED:
            self.abort.trigger(FleetPaused("the fleet was paused (mirror pause)"))
        elif fence is Fence.CANCELLED:
            self.abort.trigger(JobCancelled("job was cancelled"))
        elif fence is not Fence.OK:
            self.abort.trigger(LeaseLost("lease lost: another attempt owns the job now"))

    def _new_phase_locked(self) -> bool:
        """The latest progress is of a phase no write has tried to show yet (once per
        phase: a failing write is retried on the interval, as any other)."""
        return self._latest is not None and self._latest.phase != self._attempted_phase

    def _as_json(self, progress: Progress | None) -> dict[str, Any] | None:
        if progress is None:
            return None
        data = progress.to_json()
        if self.attempt is not None:
            data["attempt"] = self.attempt
        if self.encoder is not None:
            data["encoder"] = self.encoder
        return data
