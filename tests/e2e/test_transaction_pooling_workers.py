"""`mirror worker` processes behind a real PgBouncer in transaction mode, configured only
with MIRROR_PGBOUNCER=transaction: jobs done, heartbeats written, the download cap held
across workers, and a paused slot holder losing both its job and its slot."""

from __future__ import annotations

import signal
import time

from sqlalchemy import text

from mirror.db.attempt_log import AttemptLog
from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.server import most_at_once
from tests.fixtures.launcher import Launched
from tests.fixtures.pgbouncer import StartPgBouncer
from tests.fixtures.stack import FAST_FAULTS, Stack, mirrored_keys, phase_of

SERVER_POOL = 3  # PgBouncer's server connections: all the workers share these


def server_connections(stack: Stack) -> int:
    with stack.repo.engine.connect() as conn:
        count = conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
        ).scalar()
    return int(count or 0)


def test_two_workers_behind_transaction_pooling_mirror_everything_one_download_at_once(
    stack: Stack, sample_h264_aac: SampleMedia, start_pgbouncer: StartPgBouncer
) -> None:
    bouncer = start_pgbouncer(pool_mode="transaction", pool_size=SERVER_POOL)
    items = [stack.add_sample(sample_h264_aac, f"Item {n}") for n in range(4)]
    stack.jellyfin.throttle(sample_h264_aac.size * 2)  # about 0.5 s per body: they would overlap
    stack.enqueue(*items)
    env = {
        "MIRROR_DATABASE_URL": bouncer.url_for(stack.database_url),
        "MIRROR_PGBOUNCER": "transaction",
        "MIRROR_JELLYFIN_MAX_DOWNLOADS": "1",
        "MIRROR_HEARTBEAT_INTERVAL": "200ms",
    }
    workers = [stack.start_worker("--burst", name=f"w{n}", **env) for n in range(2)]
    most_servers = 0
    while any(worker.poll() is None for worker in workers):
        most_servers = max(most_servers, server_connections(stack))
        time.sleep(0.05)
    for n, worker in enumerate(workers):
        assert worker.wait(timeout=180) == 0, stack.log_of(f"w{n}")[-3000:]

    spans = stack.jellyfin.download_spans()
    assert most_at_once(spans) == 1, [(s.started, s.ended) for s in spans]
    assert sorted(span.item_id for span in spans) == sorted(items)
    history = AttemptLog(stack.repo.engine)
    for item in items:
        job = stack.job(item)
        assert (job.status, job.attempts) == ("done", 1), job.error
        (attempt,) = history.attempts_of(job.id)
        assert (attempt.heartbeat_writes or 0) >= 1, attempt
    assert stack.object_keys() == sorted(k for i in items for k in mirrored_keys(stack.job(i)))
    # Both workers worked, through at most PgBouncer's server pool, with no errors.
    logs = stack.log_of("w0") + stack.log_of("w1")
    assert "claim failed" not in logs and "prepared statement" not in logs
    assert len({str(stack.job(i).worker_id).rsplit(":", 2)[1] for i in items}) == 2
    assert 1 <= most_servers <= SERVER_POOL, most_servers
    with stack.repo.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM media_mirror.download_slots")).scalar() == 0


def stop(process: Launched) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_a_paused_slot_holder_behind_transaction_pooling_loses_its_job_and_its_slot(
    stack: Stack, sample_h264_aac: SampleMedia, start_pgbouncer: StartPgBouncer
) -> None:
    bouncer = start_pgbouncer(pool_mode="transaction", pool_size=SERVER_POOL)
    stack.settings.update(FAST_FAULTS)  # stale 3 s, heartbeat 0.5 s: the slot's lease is 3 s
    stack.settings.update(
        {
            "MIRROR_DATABASE_URL": bouncer.url_for(stack.database_url),
            "MIRROR_PGBOUNCER": "transaction",
            "MIRROR_JELLYFIN_MAX_DOWNLOADS": "1",
        }
    )
    item = stack.add_sample(sample_h264_aac)
    stack.jellyfin.throttle(sample_h264_aac.size // 3)  # about 3 s per body
    stack.enqueue(item)
    paused = stack.start_worker(name="paused")
    stack.wait_for(lambda: phase_of(stack, item) == "download", 60, "the download")
    paused.send_signal(signal.SIGSTOP)
    try:
        takeover = stack.start_worker(name="takeover")
        stack.wait_for(lambda: stack.job(item).status == "done", 120, "the takeover")
        stop(takeover)
        finished = stack.job(item)
    finally:
        paused.send_signal(signal.SIGCONT)
    stack.wait_for(
        lambda: "attempt ended: lease_lost" in stack.log_of("paused"), 30, "the lost lease"
    )
    stop(paused)
    after = stack.job(item)
    assert (after.status, after.attempts, after.worker_id) == ("done", 2, finished.worker_id)
    assert after.finished_at == finished.finished_at
    outcomes = [a.outcome for a in AttemptLog(stack.repo.engine).attempts_of(after.id)]
    assert outcomes == ["stale", "done"]
    # The paused holder's slot came back when its lease ran out, and nothing is left held.
    with stack.repo.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM media_mirror.download_slots")).scalar() == 0
