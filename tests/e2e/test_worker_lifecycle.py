"""The worker process: LISTEN/NOTIFY wake-up, its reaper, concurrency, graceful SIGTERM."""

from __future__ import annotations

import json
import signal
import time

from sqlalchemy import text

from mirror.demo.media import SampleMedia
from tests.fixtures.stack import Stack


def _host() -> str:
    import socket

    return socket.gethostname()


def test_enqueue_wakes_an_idle_worker_through_notify(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item = stack.add_sample(sample_h264_aac)
    worker = stack.start_worker(MIRROR_POLL_INTERVAL="60s")
    stack.wait_for(lambda: "started" in stack.log_of(), 30, "worker start")
    time.sleep(1.0)  # let it finish its first (empty) claim and go to sleep on LISTEN
    enqueued_at = time.monotonic()
    stack.mirror_here("enqueue", item)
    stack.wait_for(lambda: stack.job(item).status == "done", 30, "the job to finish")
    assert time.monotonic() - enqueued_at < 20  # far less than the 60 s poll interval
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0


def test_worker_reaper_returns_a_dead_workers_job_and_finishes_it(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item = stack.add_sample(sample_h264_aac)
    stack.repo.enqueue([item])
    dead = stack.repo.claim_next("dead-host:1:0")
    assert dead is not None
    with stack.repo.engine.begin() as conn:
        conn.execute(text("UPDATE media_mirror.jobs SET heartbeat_at = now() - interval '1 h'"))
    result = stack.mirror(
        "worker", "--burst", MIRROR_STALE_TIMEOUT="3s", MIRROR_HEARTBEAT_INTERVAL="500ms"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    job = stack.job(item)
    assert (job.status, job.attempts) == ("done", 2)
    assert "stale job of worker dead-host:1:0" in result.stderr
    shown = stack.mirror_here("show", item, "--json")
    history = json.loads(shown.stdout)["attempt_history"]
    assert [(a["worker_id"], a["outcome"]) for a in history] == [
        ("dead-host:1:0", "stale"),
        (job.worker_id, "done"),
    ]
    table = stack.mirror_here("show", str(job.id)).stdout
    assert "attempts" in table and "stale" in table and "dead-host:1:0" in table
