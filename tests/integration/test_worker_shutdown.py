"""The worker's shutdown on real Postgres, with an attempt that ignores its abort signal."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from mirror.db.repository import JobRepository
from mirror.domain.jobs import Lease
from mirror.domain.progress import AbortSignal
from mirror.runner.attempt import Outcome
from mirror.runner.worker import Worker, WorkerConfig

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"


def config(tmp_path: Path, **overrides: float) -> WorkerConfig:
    values: dict[str, float] = {
        "shutdown_grace": 0.2,
        "abort_wait": 0.5,
        **overrides,
    }
    return WorkerConfig(
        name="host:1",
        concurrency=1,
        poll_interval=0.1,
        reap_interval=60,
        stale_timeout=600,
        work_dir=tmp_path / "work",
        **values,
    )


def test_worker_releases_the_job_of_an_attempt_stuck_past_its_abort(
    repo: JobRepository, tmp_path: Path
) -> None:
    repo.enqueue([ITEM])
    started, unstick = threading.Event(), threading.Event()

    def stuck(lease: Lease, abort: AbortSignal) -> Outcome:
        started.set()
        unstick.wait(60)  # a call no abort reaches
        return Outcome.RELEASED

    worker = Worker(repo, stuck, config(tmp_path))
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        assert started.wait(10)
        stopped = time.monotonic()
        worker.request_stop()
        runner.join(timeout=10)
        assert not runner.is_alive()
        assert time.monotonic() - stopped < 5  # grace 0.2 s + abort wait 0.5 s
        job = repo.latest_for_item(ITEM)
        assert (job.status, job.attempts, job.worker_id, job.lease_token) == ("new", 0, None, None)
    finally:
        unstick.set()
        runner.join(timeout=10)


def test_a_second_stop_request_ends_the_grace_and_shortens_the_abort_wait(
    repo: JobRepository, tmp_path: Path
) -> None:
    repo.enqueue([ITEM])
    started, unstick = threading.Event(), threading.Event()

    def stuck(lease: Lease, abort: AbortSignal) -> Outcome:
        started.set()
        unstick.wait(60)
        return Outcome.RELEASED

    worker = Worker(repo, stuck, config(tmp_path, shutdown_grace=60, abort_wait=60))
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        assert started.wait(10)
        stopped = time.monotonic()
        worker.request_stop()
        worker.request_stop()  # abort now, and wait at most 2 s for the attempt to end
        runner.join(timeout=10)
        assert not runner.is_alive()
        assert time.monotonic() - stopped < 5  # not the 60 s grace, nor the 60 s abort wait
        assert repo.latest_for_item(ITEM).status == "new"
    finally:
        unstick.set()
        runner.join(timeout=10)
