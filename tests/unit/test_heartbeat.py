"""Heartbeat throttling, fencing reactions and watchdogs, on an injected clock."""

from __future__ import annotations

import uuid

import pytest

from mirror.domain.errors import FleetPaused, JobCancelled, LeaseLost, ShutdownRequested, Stalled
from mirror.domain.jobs import DatabaseUnavailable, FleetMode
from mirror.domain.progress import AbortSignal, Progress
from mirror.pipeline.phases import OverlappedPhases
from mirror.runner.heartbeat import Heartbeat
from mirror.testing.fakes import InMemoryBeatQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_heartbeat(
    clock: FakeClock, *, interval: float = 10, stall: float = 600, lease: float = 1800
) -> tuple[Heartbeat, InMemoryBeatQueue]:
    job_id, token = uuid.uuid4(), uuid.uuid4()
    queue = InMemoryBeatQueue(job_id, token)
    heartbeat = Heartbeat(
        queue,
        job_id,
        token,
        interval=interval,
        stall_timeout=stall,
        lease_timeout=lease,
        clock=clock,
        attempt=1,
    )
    return heartbeat, queue


def test_100k_calls_in_60_simulated_seconds_write_at_most_7_times() -> None:
    clock = FakeClock()
    heartbeat, queue = make_heartbeat(clock, interval=10)
    start = clock.now
    calls = 100_000
    for i in range(calls):
        clock.now = start + 60.0 * i / calls
        heartbeat(Progress(phase="download", bytes_done=i * 1000, bytes_total=calls * 1000))
    heartbeat.flush()
    assert queue.writes <= 7
    assert queue.writes >= 6  # one per interval really happened
    assert queue.progress is not None
    assert queue.progress["bytes_done"] == (calls - 1) * 1000
    assert queue.progress["phase"] == "download"
    assert queue.progress["attempt"] == 1


def test_first_progress_is_written_at_once_then_throttled() -> None:
    clock = FakeClock()
    heartbeat, queue = make_heartbeat(clock, interval=10)
    heartbeat(Progress(phase="transcode", frames_done=1, frames_total=100))
    assert queue.writes == 1
    clock.now += 9.9
    heartbeat(Progress(phase="transcode", frames_done=50, frames_total=100))
    assert queue.writes == 1
    clock.now += 0.1
    heartbeat(Progress(phase="transcode", frames_done=51, frames_total=100))
    assert queue.writes == 2
    assert queue.progress == {
        "phase": "transcode",
        "frames_done": 51,
        "frames_total": 100,
        "percent": 51.0,
        "attempt": 1,
    }


def test_a_keep_alive_beat_before_the_first_progress_does_not_hide_the_phase() -> None:
    """Seen in a full run: the keep-alive beat (no progress yet) used the first-write
    allowance, so the download's first progress waited an interval and a short download
    never showed; each phase is shown at once, once, then throttled."""
    clock = FakeClock()
    heartbeat, queue = make_heartbeat(clock, interval=10)
    heartbeat.beat_if_due()  # the keep-alive thread's tick, before any progress
    assert (queue.writes, queue.progress) == (1, None)
    clock.now += 0.5
    heartbeat(Progress(phase="download", bytes_done=1, bytes_total=100))
    assert queue.writes == 2 and queue.progress is not None
    assert queue.progress["phase"] == "download"
    heartbeat(Progress(phase="download", bytes_done=2, bytes_total=100))
    assert queue.writes == 2  # same phase: throttled
    heartbeat(Progress(phase="upload", bytes_done=1, bytes_total=100))
    assert queue.writes == 3 and queue.progress["phase"] == "upload"
    heartbeat(Progress(phase="upload", bytes_done=2, bytes_total=100))
    assert queue.writes == 3


def test_cancelled_row_raises_in_the_job_thread_and_fires_abort_hooks() -> None:
    clock = FakeClock()
    heartbeat, queue = make_heartbeat(clock)
    killed: list[str] = []
    heartbeat.abort.on_abort(lambda: killed.append("ffmpeg"))
    heartbeat(Progress(phase="transcode", frames_done=1))
    queue.cancel()
    clock.now += 10
    with pytest.raises(JobCancelled):
        heartbeat(Progress(phase="transcode", frames_done=2))
    assert killed == ["ffmpeg"]
    with pytest.raises(JobCancelled):  # and keeps raising
        heartbeat(Progress(phase="transcode", frames_done=3))


def test_lost_lease_raises_lease_lost() -> None:
    clock = FakeClock()
    heartbeat, queue = make_heartbeat(clock)
    heartbeat(Progress(phase="upload", bytes_done=1))
    queue.take_over()
    clock.now += 10
    with pytest.raises(LeaseLost):
        heartbeat(Progress(phase="upload", bytes_done=2))


def test_a_paused_fleet_stops_the_attempt_as_a_shutdown_after_writing_the_beat() -> None:
    clock = FakeClock()
    heartbeat, queue = make_heartbeat(clock)
    heartbeat(Progress(phase="download", bytes_done=1))
    queue.set_fleet_mode(FleetMode.DRAINING)  # a drain lets the attempt go on
    clock.now += 10
    heartbeat(Progress(phase="download", bytes_done=2))
    queue.set_fleet_mode(FleetMode.PAUSED)
    clock.now += 10
    with pytest.raises(FleetPaused) as stopped:
        heartbeat(Progress(phase="download", bytes_done=3))
    assert isinstance(stopped.value, ShutdownRequested)  # released, no attempt used
    assert queue.writes == 3 and queue.progress is not None
    assert queue.progress["bytes_done"] == 3  # the beat that said "paused" was written
    with pytest.raises(FleetPaused):  # and the checkpoint before publishing says so too
        heartbeat.checkpoint()


def test_checkpoint_detects_a_takeover_without_waiting_for_the_interval() -> None:
    clock = FakeClock()
    heartbeat, queue = make_heartbeat(clock)
    heartbeat(Progress(phase="transcode", frames_done=1))
    heartbeat.checkpoint()  # still ours
    queue.take_over()
    with pytest.raises(LeaseLost):
        heartbeat.checkpoint()


def test_no_progress_for_stall_timeout_trips_the_stall_watchdog() -> None:
    clock = FakeClock()
    heartbeat, _ = make_heartbeat(clock, interval=10, stall=60)
    same = Progress(phase="download", bytes_done=500, bytes_total=1000)
    heartbeat(same)
    for _ in range(5):
        clock.now += 10
        heartbeat(same)  # beats keep coming, progress does not move
        heartbeat.check_watchdogs(clock.now)
    assert not heartbeat.abort.is_set()
    clock.now += 10
    heartbeat.check_watchdogs(clock.now)
    assert isinstance(heartbeat.abort.reason, Stalled)
    assert "download" in str(heartbeat.abort.reason)
    with pytest.raises(Stalled):
        heartbeat(same)


def test_moving_progress_never_trips_the_stall_watchdog() -> None:
    clock = FakeClock()
    heartbeat, _ = make_heartbeat(clock, interval=10, stall=60)
    for i in range(100):
        clock.now += 5
        heartbeat(Progress(phase="download", bytes_done=i))
        heartbeat.check_watchdogs(clock.now)
    assert not heartbeat.abort.is_set()


def test_waiting_for_a_download_slot_is_not_a_stall_but_the_download_after_it_is_watched() -> None:
    clock = FakeClock()
    heartbeat, store = make_heartbeat(clock, interval=10, stall=60)
    waiting = Progress(phase="waiting", note="waiting for a download slot (2 of 2 in use)")
    heartbeat(waiting)
    for _ in range(60):  # ten minutes of waiting, ten stall timeouts
        clock.now += 10
        heartbeat(waiting)
        heartbeat.check_watchdogs(clock.now)
    assert not heartbeat.abort.is_set(), heartbeat.abort.reason
    assert store.progress is not None
    assert store.progress["phase"] == "waiting"
    assert store.progress["note"] == "waiting for a download slot (2 of 2 in use)"
    # The slot came: from now on a silent download is a stall again.
    heartbeat(Progress(phase="download", bytes_done=0, bytes_total=1000))
    clock.now += 61
    heartbeat.check_watchdogs(clock.now)
    assert isinstance(heartbeat.abort.reason, Stalled)


def test_database_errors_are_survived_until_the_local_lease_expires() -> None:
    clock = FakeClock()
    heartbeat, queue = make_heartbeat(clock, interval=10, lease=60)
    heartbeat(Progress(phase="download", bytes_done=1))
    queue.fail_with = DatabaseUnavailable(
        "database error: server closed the connection", "server closed the connection"
    )
    for i in range(5):
        clock.now += 10
        heartbeat(Progress(phase="download", bytes_done=2 + i))  # no raise: retried later
        heartbeat.check_watchdogs(clock.now)
    assert not heartbeat.abort.is_set()
    queue.fail_with = None
    clock.now += 10
    heartbeat(Progress(phase="download", bytes_done=10))  # Postgres is back in time
    assert queue.progress is not None and queue.progress["bytes_done"] == 10
    queue.fail_with = DatabaseUnavailable("database error: gone again", "gone again")
    clock.now += 61
    heartbeat.check_watchdogs(clock.now)
    assert isinstance(heartbeat.abort.reason, LeaseLost)


def test_failed_writes_are_throttled_too() -> None:
    clock = FakeClock()
    heartbeat, queue = make_heartbeat(clock, interval=10)
    attempts = 0

    class CountingError(DatabaseUnavailable):
        pass

    original = queue.heartbeat

    def failing(*args: object) -> object:
        nonlocal attempts
        attempts += 1
        raise CountingError("database error: down", "down")

    queue.heartbeat = failing  # type: ignore[method-assign]
    for i in range(10_000):
        clock.now += 0.001
        heartbeat(Progress(phase="download", bytes_done=i))
    assert attempts == 1  # not one reconnect attempt per callback
    queue.heartbeat = original  # type: ignore[method-assign]


def test_abort_signal_runs_late_hooks_at_once_and_keeps_first_reason() -> None:
    signal = AbortSignal()
    signal.trigger(JobCancelled("first"))
    signal.trigger(LeaseLost("second"))
    ran: list[int] = []
    signal.on_abort(lambda: ran.append(1))
    assert ran == [1]
    assert str(signal.reason) == "first"


def test_a_transcode_waiting_on_a_moving_upload_is_no_stall_but_a_still_one_is() -> None:
    """Overlap with backpressure: the shown transcode stands while ffmpeg's input waits
    for the upload; the upload moving keeps the watchdog quiet, its stopping does not."""
    clock = FakeClock()
    heartbeat, _ = make_heartbeat(clock, interval=10, stall=60)
    phases = OverlappedPhases(heartbeat, moved=heartbeat.moved)
    phases(Progress(phase="download", bytes_done=1000, bytes_total=1000))
    phases.finished("download")
    phases(Progress(phase="transcode", out_time_s=30.0, duration_s=60.0))
    for sent in range(1, 20):  # 190 s of the transcode standing still, the upload moving
        clock.now += 10
        phases(Progress(phase="upload", bytes_done=sent * 100, bytes_total=5000))
        heartbeat.check_watchdogs(clock.now)
    assert not heartbeat.abort.is_set()
    assert heartbeat.latest() == Progress(phase="transcode", out_time_s=30.0, duration_s=60.0)
    clock.now += 61  # then the upload stops too
    heartbeat.check_watchdogs(clock.now)
    assert isinstance(heartbeat.abort.reason, Stalled)
    assert "transcode" in str(heartbeat.abort.reason)
