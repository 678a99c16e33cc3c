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
    stack.mirror("enqueue", item)
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
    shown = stack.mirror("show", item, "--json")
    history = json.loads(shown.stdout)["attempt_history"]
    assert [(a["worker_id"], a["outcome"]) for a in history] == [
        ("dead-host:1:0", "stale"),
        (job.worker_id, "done"),
    ]
    table = stack.mirror("show", str(job.id)).stdout
    assert "attempts" in table and "stale" in table and "dead-host:1:0" in table


def test_concurrency_runs_jobs_side_by_side(stack: Stack, sample_h264_aac: SampleMedia) -> None:
    items = [stack.add_sample(sample_h264_aac, f"Item {n}") for n in range(2)]
    stack.jellyfin.throttle(sample_h264_aac.size // 3)  # each download takes ~3 s
    stack.mirror("enqueue", *items)
    worker = stack.start_worker("--burst", "--concurrency", "2")
    stack.wait_for(
        lambda: all(stack.job(i).status == "processing" for i in items), 30, "both running"
    )
    assert worker.wait(timeout=120) == 0, stack.log_of()[-2000:]
    assert all(stack.job(i).status == "done" for i in items)
    slots = sorted(str(stack.job(i).worker_id) for i in items)  # done rows keep the holder
    assert [s.rsplit(":", 1)[0] for s in slots] == [f"{_host()}:{worker.pid}"] * 2
    assert [s.rsplit(":", 1)[1] for s in slots] == ["0", "1"]  # one process, two slots
