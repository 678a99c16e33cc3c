"""`mirror pause` / `--drain` / `resume` and MIRROR_ACTIVE_HOURS on real Postgres, with real
workers and real attempts (`run_attempt`) around a pipeline that beats until told to end."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import time as TimeOfDay
from pathlib import Path

import pytest

from mirror.db.attempt_log import AttemptLog
from mirror.db.listen import JobListener
from mirror.db.repository import JobRepository
from mirror.domain.active_hours import parse_active_hours
from mirror.domain.jobs import Fence, FleetMode, Lease, Mirrored
from mirror.domain.logs import get_logger
from mirror.domain.progress import AbortSignal, Progress
from mirror.runner.attempt import AttemptPolicy, Outcome, run_attempt
from mirror.runner.heartbeat import Heartbeat
from mirror.runner.worker import Worker, WorkerConfig

ITEMS = ("a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21", "b3f4c2e1b5d64e0f9c8b7a6d5e4f3a22")
POLICY = AttemptPolicy(heartbeat_interval=0.1, stall_timeout=60, stale_timeout=60, retry_backoff=0)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Beating:
    """A pipeline that reports download progress until `finish` is set, then is done."""

    def __init__(self) -> None:
        self.finish = threading.Event()
        self.started: list[str] = []

    def __call__(self, lease: Lease, heartbeat: Heartbeat) -> Mirrored:
        self.started.append(lease.job.item_id)
        done = 0
        while not self.finish.is_set():
            done += 1
            heartbeat(Progress(phase="download", bytes_done=done, bytes_total=10**9))
            heartbeat.abort.wait(0.02)
        return Mirrored(video_key=f"{lease.job.item_id}/video.mp4", audio_keys=[])


def make_worker(
    repo: JobRepository,
    pipeline: Beating,
    tmp_path: Path,
    *,
    name: str = "host:1",
    concurrency: int = 1,
    poll_interval: float = 0.1,
    active_hours: str = "",
    time_of_day: Callable[[], TimeOfDay] | None = None,
    listen: bool = False,
) -> Worker:
    history = AttemptLog(repo.engine)
    log = get_logger("test.fleet")

    def attempt(lease: Lease, abort: AbortSignal) -> Outcome:
        return run_attempt(
            lease, abort, queue=repo, pipeline=pipeline, policy=POLICY, log=log, history=history
        )

    config = WorkerConfig(
        name=name,
        concurrency=concurrency,
        poll_interval=poll_interval,
        reap_interval=60,
        stale_timeout=60,
        shutdown_grace=5,
        work_dir=tmp_path / name.replace(":", "-"),
        active_hours=parse_active_hours(active_hours),
    )
    extra = {} if time_of_day is None else {"time_of_day": time_of_day}
    listener = JobListener(_url(repo), reconnect_s=0.2) if listen else None
    return Worker(repo, attempt, config, listen=listener, **extra)


def _url(repo: JobRepository) -> str:
    return repo.engine.url.render_as_string(hide_password=False)


@contextmanager
def running(*workers: Worker) -> Iterator[None]:
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for worker in workers:
            worker.request_stop()
        for thread in threads:
            thread.join(timeout=15)
        assert not any(t.is_alive() for t in threads)


def status(repo: JobRepository, item: str) -> str:
    return repo.latest_for_item(item).status


def outcomes(repo: JobRepository, job_id: uuid.UUID) -> list[str | None]:
    return [a.outcome for a in AttemptLog(repo.engine).attempts_of(job_id)]


def pause(repo: JobRepository, mode: FleetMode = FleetMode.PAUSED) -> None:
    repo.set_fleet_mode(mode, changed_by="test@host", reason="maintenance")


# -- the statements -----------------------------------------------------------------------


def test_claim_refuses_while_paused_or_draining_and_resume_lets_claims_go(
    repo: JobRepository,
) -> None:
    repo.enqueue([ITEMS[0]])
    pause(repo)
    assert repo.claim_next("w:1:0") is None
    pause(repo, FleetMode.DRAINING)
    assert repo.claim_next("w:1:0") is None
    change = repo.set_fleet_mode(FleetMode.RUNNING, changed_by="test@host")
    assert change.changed and change.before is FleetMode.DRAINING
    lease = repo.claim_next("w:1:0")
    assert lease is not None and lease.job.item_id == ITEMS[0]


def test_heartbeat_is_written_and_answers_paused_only_while_paused(repo: JobRepository) -> None:
    repo.enqueue([ITEMS[0]])
    lease = repo.claim_next("w:1:0")
    assert lease is not None
    assert repo.heartbeat(lease.job_id, lease.token, None) is Fence.OK
    pause(repo, FleetMode.DRAINING)
    assert repo.heartbeat(lease.job_id, lease.token, None) is Fence.OK
    pause(repo)
    assert repo.heartbeat(lease.job_id, lease.token, {"phase": "upload"}) is Fence.PAUSED
    assert repo.latest_for_item(ITEMS[0]).heartbeat_data == {"phase": "upload"}  # written
    assert repo.heartbeat(lease.job_id, uuid.uuid4(), None) is Fence.LEASE_LOST  # fence first
    repo.cancel(lease.job_id)
    assert repo.heartbeat(lease.job_id, lease.token, None) is Fence.CANCELLED


def test_pausing_twice_keeps_the_first_record_and_counts_the_jobs(repo: JobRepository) -> None:
    repo.enqueue(list(ITEMS))
    assert repo.claim_next("w:1:0") is not None
    first = repo.set_fleet_mode(FleetMode.PAUSED, changed_by="alice@a", reason="disk swap")
    again = repo.set_fleet_mode(FleetMode.PAUSED, changed_by="bob@b", reason="other")
    assert first.changed and not again.changed
    state = repo.fleet_state()
    assert (state.mode, state.changed_by, state.reason) == (
        FleetMode.PAUSED,
        "alice@a",
        "disk swap",
    )
    assert state.changed_at == first.state.changed_at is not None
    assert (state.running, state.queued) == (1, 1)
    resumed = repo.set_fleet_mode(FleetMode.RUNNING, changed_by="bob@b")
    assert resumed.state.changed_by == "bob@b" and resumed.state.reason is None


# -- workers ------------------------------------------------------------------------------


def test_pause_releases_a_running_job_without_using_an_attempt_and_resume_finishes_it(
    repo: JobRepository, tmp_path: Path
) -> None:
    job_id = repo.enqueue([ITEMS[0]])[0].job.id
    pipeline = Beating()
    with running(make_worker(repo, pipeline, tmp_path)):
        wait_for(lambda: status(repo, ITEMS[0]) == "processing", "the claim")
        pause(repo)
        wait_for(lambda: status(repo, ITEMS[0]) == "new", "the release")  # beats every 0.1 s
        job = repo.get(job_id)
        assert (job.attempts, job.worker_id, job.lease_token) == (0, None, None)
        # The attempt's row is written after the job's release, in its own transaction.
        wait_for(lambda: outcomes(repo, job_id) == ["released"], "the attempt's outcome")
        time.sleep(0.5)  # five polls of the worker: it must not claim while paused
        assert status(repo, ITEMS[0]) == "new" and len(pipeline.started) == 1

        pipeline.finish.set()
        repo.set_fleet_mode(FleetMode.RUNNING, changed_by="test@host")
        wait_for(lambda: status(repo, ITEMS[0]) == "done", "the resumed job")
    assert repo.get(job_id).attempts == 1  # the released attempt was not counted
    assert outcomes(repo, job_id) == ["released", "done"]


def test_drain_lets_the_running_job_finish_and_claims_nothing_more(
    repo: JobRepository, tmp_path: Path
) -> None:
    first, second = ITEMS
    repo.enqueue([first])
    pipeline = Beating()
    with running(make_worker(repo, pipeline, tmp_path)):
        wait_for(lambda: status(repo, first) == "processing", "the claim")
        pause(repo, FleetMode.DRAINING)
        repo.enqueue([second])
        time.sleep(0.5)  # several heartbeats and polls
        assert status(repo, first) == "processing"  # not released
        pipeline.finish.set()
        wait_for(lambda: status(repo, first) == "done", "the drained job")
        time.sleep(0.3)
        assert status(repo, second) == "new"
        repo.set_fleet_mode(FleetMode.RUNNING, changed_by="test@host")
        wait_for(lambda: status(repo, second) == "done", "the job after the resume")
    assert [repo.latest_for_item(i).attempts for i in ITEMS] == [1, 1]


def test_two_workers_both_release_on_pause_and_both_claim_after_resume(
    repo: JobRepository, tmp_path: Path
) -> None:
    repo.enqueue(list(ITEMS))
    pipeline = Beating()
    one = make_worker(repo, pipeline, tmp_path, name="host-a:1")
    two = make_worker(repo, pipeline, tmp_path, name="host-b:2")
    with running(one, two):
        wait_for(lambda: all(status(repo, i) == "processing" for i in ITEMS), "both claims")
        workers = {repo.latest_for_item(i).worker_id.split(":")[0] for i in ITEMS}  # type: ignore[union-attr]
        assert workers == {"host-a", "host-b"}
        pause(repo)
        wait_for(lambda: all(status(repo, i) == "new" for i in ITEMS), "both releases")
        time.sleep(0.5)
        assert all(status(repo, i) == "new" for i in ITEMS)
        assert [repo.latest_for_item(i).attempts for i in ITEMS] == [0, 0]
        pipeline.finish.set()
        repo.set_fleet_mode(FleetMode.RUNNING, changed_by="test@host")
        wait_for(lambda: all(status(repo, i) == "done" for i in ITEMS), "both jobs done")


def test_resume_wakes_an_idle_worker_at_once_not_at_its_next_poll(
    repo: JobRepository, tmp_path: Path
) -> None:
    pipeline = Beating()
    pipeline.finish.set()
    worker = make_worker(repo, pipeline, tmp_path, poll_interval=30, listen=True)
    with running(worker):
        time.sleep(0.5)  # the listener is up; the loop sleeps its 30 s poll
        pause(repo)
        repo.enqueue([ITEMS[0]])  # its NOTIFY wakes the loop, whose claim is refused
        time.sleep(0.5)
        assert status(repo, ITEMS[0]) == "new"
        resumed = time.monotonic()
        repo.set_fleet_mode(FleetMode.RUNNING, changed_by="test@host")
        wait_for(lambda: status(repo, ITEMS[0]) == "done", "the claim after the resume")
        assert time.monotonic() - resumed < 10  # not the 30 s poll


# -- MIRROR_ACTIVE_HOURS ------------------------------------------------------------------


class Clock:
    """The worker's local time of day, set by the test."""

    def __init__(self, hour: int, minute: int = 0) -> None:
        self.now = TimeOfDay(hour, minute)

    def set(self, hour: int, minute: int = 0) -> None:
        self.now = TimeOfDay(hour, minute)

    def __call__(self) -> TimeOfDay:
        return self.now


@pytest.mark.parametrize(
    ("hours", "closed", "open_"),
    [("01:00-07:00", (12, 0), (6, 59)), ("22:00-06:00", (6, 0), (0, 30))],
    ids=["same day", "over midnight"],
)
def test_a_burst_worker_claims_nothing_outside_its_active_hours(
    repo: JobRepository,
    tmp_path: Path,
    hours: str,
    closed: tuple[int, int],
    open_: tuple[int, int],
) -> None:
    repo.enqueue([ITEMS[0]])
    pipeline = Beating()
    pipeline.finish.set()
    for at, expected in ((closed, "new"), (open_, "done")):
        clock = Clock(*at)
        worker = make_worker(repo, pipeline, tmp_path, active_hours=hours, time_of_day=clock)
        worker.run(burst=True)  # a burst run ends once it claims nothing
        assert status(repo, ITEMS[0]) == expected, at


def test_a_running_job_finishes_when_the_active_hours_close(
    repo: JobRepository, tmp_path: Path
) -> None:
    first, second = ITEMS
    repo.enqueue([first])
    pipeline = Beating()
    clock = Clock(5, 59)
    worker = make_worker(repo, pipeline, tmp_path, active_hours="22:00-06:00", time_of_day=clock)
    with running(worker):
        wait_for(lambda: status(repo, first) == "processing", "the claim at 05:59")
        clock.set(6, 0)  # the window closes: a drain for this worker
        repo.enqueue([second])
        time.sleep(0.5)
        assert status(repo, first) == "processing" and status(repo, second) == "new"
        pipeline.finish.set()
        wait_for(lambda: status(repo, first) == "done", "the running job")
        time.sleep(0.3)
        assert status(repo, second) == "new"
        clock.set(22, 0)
        wait_for(lambda: status(repo, second) == "done", "the claim at 22:00")
