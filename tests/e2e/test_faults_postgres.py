"""Postgres going away or locked at the worst moment: outputs in S3, `done` still to write."""

from __future__ import annotations

import signal
import threading
import time

import psycopg
from sqlalchemy import create_engine, text

from mirror.db.attempt_log import AttemptLog
from mirror.demo.media import SampleMedia
from mirror.wiring import connections_per_worker
from tests.fixtures.stack import Stack, mirrored_keys, phase_of
from tests.fixtures.tcp_proxy import TcpProxy, proxied_url

OUTAGE_S = 6.0
# Long enough that every job's done, heartbeats and claims queue up behind the lock (each
# slot then holds its two connections, the claim loop one); far shorter than the lease
# (the stale timeout below, minus a beat), so the lock is ridden out, not a reaper's case.
# The stale timeout costs no time (nothing waits for it), so it keeps its margin under
# load. That a pool wait which times out counts as an outage is tested directly in
# tests/integration/test_pool_outage.py (SQLAlchemy's 30 s pool timeout is not waited
# for here).
LOCK_S = 12.0
STALE_S = 60.0


def test_postgres_down_around_the_end_of_the_upload_still_ends_in_one_done_attempt(
    stack: Stack, pg_proxy: TcpProxy, s3_proxy: TcpProxy, sample_large_h264: SampleMedia
) -> None:
    item = stack.add_sample(sample_large_h264)
    stack.enqueue(item)
    s3_proxy.throttle(2_000_000)  # an upload of a few seconds, to go down in the middle
    worker = stack.start_worker(
        "--burst",
        name="a",
        MIRROR_DATABASE_URL=proxied_url(stack.database_url, pg_proxy),
        MIRROR_S3_ENDPOINT_URL=s3_proxy.url,
        MIRROR_STALE_TIMEOUT="30s",  # the lease outlasts the outage
        MIRROR_HEARTBEAT_INTERVAL="500ms",
    )
    stack.wait_for(lambda: phase_of(stack, item) == "upload", 120, "the upload")
    pg_proxy.go_down()
    down_at = time.monotonic()
    # The outputs are sent, but complete (visible) only after the lease check, which
    # meets the outage (the retry line) and waits for Postgres instead of giving up.
    stack.wait_for(
        lambda: "heartbeat write failed" in stack.log_of("a"), 60, "the lease check meeting it"
    )
    stack.wait_for(lambda: time.monotonic() - down_at >= OUTAGE_S, 30, "the outage to last")
    assert stack.object_keys() == []
    pg_proxy.come_back()
    assert worker.wait(timeout=120) == 0, stack.log_of("a")[-3000:]
    job = stack.job(item)
    assert (job.status, job.attempts) == ("done", 1), job.error
    history = AttemptLog(stack.repo.engine).attempts_of(job.id)
    assert [attempt.outcome for attempt in history] == ["done"]
    assert stack.object_keys() == mirrored_keys(job)
    assert "Traceback" not in stack.log_of("a")


class ConnectionSampler:
    """Counts, every 0.2 s, the connections each worker process holds to the database
    (by the pid in their application_name: mirror-worker-<pid>, mirror-listen-<pid>)."""

    def __init__(self, database_url: str) -> None:
        self.engine = create_engine(database_url, isolation_level="AUTOCOMMIT", pool_size=1)
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def now(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT substring(application_name from '[0-9]+$') AS pid, count(*) AS n "
                    "FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name ~ '^mirror-(worker|listen)-[0-9]+$' GROUP BY 1"
                )
            ).all()
        return {row.pid: row.n for row in rows}

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for pid, n in self.now().items():
                self.peak[pid] = max(self.peak.get(pid, 0), n)

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.engine.dispose()


def test_three_workers_of_four_slots_ride_out_a_table_lock_within_their_pools(
    stack: Stack, s3_proxy: TcpProxy, sample_h264_aac: SampleMedia
) -> None:
    workers, slots = 3, 4
    items = [stack.add_sample(sample_h264_aac, f"Item {n:02d}") for n in range(workers * slots)]
    stack.enqueue(*items)
    s3_proxy.throttle(20_000)  # every job waits in its upload until the lock is taken
    limit = connections_per_worker(slots)
    with ConnectionSampler(stack.database_url) as sampler:
        processes = [
            stack.start_worker(
                "--concurrency",
                str(slots),
                name=f"w{n}",
                MIRROR_S3_ENDPOINT_URL=s3_proxy.url,
                MIRROR_STALE_TIMEOUT=f"{STALE_S:g}s",  # the lease outlasts the lock
                MIRROR_HEARTBEAT_INTERVAL="1s",
            )
            for n in range(workers)
        ]
        stack.wait_for(
            lambda: sum(phase_of(stack, item) == "upload" for item in items) == len(items),
            120,
            "every job in its upload",
        )
        locker = psycopg.connect(stack.database_url.replace("+psycopg", ""), autocommit=False)
        locker.execute("LOCK TABLE media_mirror.jobs IN ACCESS EXCLUSIVE MODE")
        locked_at = time.monotonic()
        s3_proxy.throttle(None)  # the uploads end under the lock: every mark_done waits
        stack.wait_for(lambda: time.monotonic() - locked_at >= LOCK_S, LOCK_S + 10, "the lock")
        locker.commit()
        locker.close()
        stack.wait_for(
            lambda: all(stack.job(item).status == "done" for item in items), 120, "every job done"
        )
        assert all(process.poll() is None for process in processes)  # nobody died
        # Back to idle: each worker keeps one pooled connection plus LISTEN.
        stack.wait_for(
            lambda: len(sampler.now()) == workers and max(sampler.now().values()) <= 2,
            30,
            "idle connections to close",
        )
        idle = sampler.now()
    for process in processes:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    history = AttemptLog(stack.repo.engine)
    for item in items:
        job = stack.job(item)
        assert (job.status, job.attempts) == ("done", 1), job.error
        assert [a.outcome for a in history.attempts_of(job.id)] == ["done"]
    print(f"connections per worker: peak {sampler.peak}, idle {idle}, formula {limit}")
    assert len(sampler.peak) == workers
    assert max(sampler.peak.values()) <= limit
    for n in range(workers):
        assert "Traceback" not in stack.log_of(f"w{n}")
