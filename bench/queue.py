"""Queue benchmark: claim latency vs table size, parallel claims, heartbeat write rate.

Inputs (Postgres from MIRROR_BENCH_ADMIN_URL, default the local trust-auth server; every
database is a scratch `mirror_bench_*`, migrated with mirror's migrations, dropped after):
1. Claim latency: the job table holds 1,000 finished (`done`) rows, then 1,000,000
   (quick mode: 100,000), inserted with one INSERT ... SELECT generate_series each and
   ANALYZEd; at each size 200 `new` jobs are added and claimed one by one with
   JobRepository.claim_next (each claim also writes its job_attempts row); the median
   claim latency at both sizes and their ratio (target: within 2x).
2. Parallel claims: 2,000 no-op jobs, 8 worker processes (quick: 4 processes, 500 jobs)
   each looping claim_next + mark_done until nothing is left, started together after
   connecting; claims/s over the whole run, and a check that no job was claimed twice:
   exactly one job_attempts row per job, every job done once.
3. Heartbeat writes: a real Heartbeat (interval 0.5 s, keep-alive thread running) on a
   claimed job, fed by a tight loop of progress callbacks for 4 s (quick: 2 s); every
   statement it sends is counted; target: writes <= intervals + 1 at >= 100k callbacks/s.

Prints the figures and, as the LAST line, the claim latency ratio (1M rows / 1k rows).
Usage: python bench/queue.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
from typing import Any

import harness
from harness import say
from sqlalchemy import Engine, text

from mirror.db.engine import make_engine
from mirror.db.repository import JobRepository
from mirror.domain.jobs import Fence, Mirrored
from mirror.domain.progress import Progress
from mirror.runner.heartbeat import Heartbeat

CLAIMS_PER_SIZE = 200


def insert_jobs(engine: Engine, first: int, count: int, status: str) -> None:
    """`count` jobs with item ids md5(first..first+count-1), in one statement."""
    finished = "now()" if status != "new" else "NULL"
    with engine.begin() as conn:
        conn.execute(
            text(
                f"""
                INSERT INTO media_mirror.jobs
                    (item_id, status, attempts, video_key, finished_at, created_at)
                SELECT md5(n::text), :status, CASE WHEN :status = 'new' THEN 0 ELSE 1 END,
                       CASE WHEN :status = 'done' THEN 'mirror/' || md5(n::text) || '/video.mp4'
                       END,
                       {finished}, now() - interval '1 day'
                FROM generate_series(CAST(:first AS bigint), :last) AS n
                """
            ),
            {"status": status, "first": first, "last": first + count - 1},
        )
        conn.execute(text("ANALYZE media_mirror.jobs"))


def claim_latencies(repo: JobRepository, first_item: int) -> list[float]:
    insert_jobs(repo.engine, first_item, CLAIMS_PER_SIZE, "new")
    latencies = []
    for _ in range(CLAIMS_PER_SIZE):
        began = time.perf_counter()
        lease = repo.claim_next("bench:latency")
        latencies.append(time.perf_counter() - began)
        assert lease is not None
        repo.mark_done(lease.job_id, lease.token, Mirrored(video_key="noop", audio_keys=[]))
    assert repo.claim_next("bench:latency") is None
    return latencies


def bench_claim_latency(big: int) -> tuple[float, float]:
    with harness.scratch_database() as url:
        engine = make_engine(url, pool_size=2)
        repo = JobRepository(engine)
        insert_jobs(engine, 1, 1_000, "done")
        for _ in range(20):  # warm-up: connection, plans, caches
            repo.claim_next("bench:warmup")
        small_ms = harness.median(claim_latencies(repo, 10_000_000)) * 1000
        say(f"claim latency with 1,000 finished rows: {small_ms:.2f} ms; inserting up to {big:,}")
        began = time.perf_counter()
        insert_jobs(engine, 1_001, big - 1_000, "done")
        say(f"inserted {big - 1_000:,} rows in {time.perf_counter() - began:.1f} s")
        big_ms = harness.median(claim_latencies(repo, 20_000_000)) * 1000
        engine.dispose()
    return small_ms, big_ms


def claimer(url: str, name: str, ready: Any, go: Any, results: Any) -> None:
    """One worker process: connect, wait for the start, claim + mark done until empty."""
    engine = make_engine(url, pool_size=1)
    repo = JobRepository(engine)
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
    ready.release()
    go.wait()
    claimed = 0
    while (lease := repo.claim_next(name)) is not None:
        fence = repo.mark_done(lease.job_id, lease.token, Mirrored(video_key="noop", audio_keys=[]))
        assert fence is Fence.OK
        claimed += 1
    results.put((name, claimed, time.perf_counter()))
    engine.dispose()


def bench_parallel_claims(processes: int, jobs: int) -> tuple[float, dict[str, int]]:
    context = multiprocessing.get_context("spawn")
    with harness.scratch_database() as url:
        engine = make_engine(url, pool_size=2)
        insert_jobs(engine, 1, jobs, "new")
        ready, go, results = context.Semaphore(0), context.Event(), context.Queue()
        workers = [
            context.Process(target=claimer, args=(url, f"bench:{n}", ready, go, results))
            for n in range(processes)
        ]
        for worker in workers:
            worker.start()
        for _ in workers:
            ready.acquire()
        began = time.perf_counter()
        go.set()
        finished = [results.get(timeout=300) for _ in workers]
        for worker in workers:
            worker.join()
            assert worker.exitcode == 0
        elapsed = max(ended for _, _, ended in finished) - began
        counts = {name: claimed for name, claimed, _ in finished}
        with engine.connect() as conn:
            check = conn.execute(
                text(
                    """
                    SELECT
                      (SELECT count(*) FROM media_mirror.jobs) AS jobs,
                      (SELECT count(*) FROM media_mirror.jobs
                        WHERE status = 'done' AND attempts = 1) AS done_once,
                      (SELECT count(*) FROM media_mirror.job_attempts) AS attempts,
                      (SELECT count(*) FROM (SELECT job_id FROM media_mirror.job_attempts
                        GROUP BY job_id HAVING count(*) > 1) AS twice) AS claimed_twice
                    """
                )
            ).one()
        engine.dispose()
    totals = {
        "jobs": check.jobs,
        "done_once": check.done_once,
        "attempt_rows": check.attempts,
        "claimed_twice": check.claimed_twice,
        "claimed_by_workers": sum(counts.values()),
    }
    return jobs / elapsed, totals


class CountingStore:
    """JobRepository.heartbeat with every statement counted."""

    def __init__(self, repo: JobRepository) -> None:
        self.repo = repo
        self.statements = 0

    def heartbeat(
        self, job_id: uuid.UUID, token: uuid.UUID, progress: dict[str, Any] | None
    ) -> Fence:
        self.statements += 1
        return self.repo.heartbeat(job_id, token, progress)


def bench_heartbeat(seconds: float, interval: float) -> tuple[int, float, int, float]:
    with harness.scratch_database() as url:
        engine = make_engine(url, pool_size=3)
        repo = JobRepository(engine)
        repo.enqueue([uuid.uuid4().hex])
        lease = repo.claim_next("bench:heartbeat")
        assert lease is not None
        store = CountingStore(repo)
        beat = Heartbeat(
            store,
            lease.job_id,
            lease.token,
            interval=interval,
            stall_timeout=600,
            lease_timeout=1800,
        )
        # Distinct reports made up front: the loop measures the heartbeat, not the
        # construction of frozen dataclasses (which costs as much as the call itself).
        total = 10**12
        reports = [
            Progress("download", bytes_done=n * 65536, bytes_total=total) for n in range(100_000)
        ]
        calls = 0
        with beat:
            began = time.perf_counter()
            deadline = began + seconds
            while time.perf_counter() < deadline:
                start = calls % len(reports)
                for report in reports[start : start + 1000]:
                    beat(report)
                calls += 1000
            elapsed = time.perf_counter() - began
        stored = repo.get(lease.job_id).heartbeat_data
        engine.dispose()
    assert stored is not None and stored["phase"] == "download"
    return calls, elapsed, store.statements, elapsed / interval


def main() -> None:
    quick = harness.quick_mode()
    big = 100_000 if quick else 1_000_000
    processes, jobs = (4, 500) if quick else (8, 2_000)

    small_ms, big_ms = bench_claim_latency(big)
    claims_per_s, totals = bench_parallel_claims(processes, jobs)
    calls, elapsed, writes, intervals = bench_heartbeat(2.0 if quick else 4.0, 0.5)

    once = (
        totals["claimed_twice"] == 0
        and totals["attempt_rows"] == jobs
        and totals["done_once"] == jobs
        and totals["claimed_by_workers"] == jobs
    )
    print(f"load: {harness.machine_load()}")
    print(
        f"claim latency (median of {CLAIMS_PER_SIZE}): {small_ms:.2f} ms with 1,000 finished "
        f"rows, {big_ms:.2f} ms with {big:,}"
    )
    print(
        f"parallel claims: {processes} processes x {jobs:,} no-op jobs: {claims_per_s:.0f} "
        f"claims/s; {totals}; claimed twice: {'none' if once else 'YES'} "
        f"{'PASS' if once else 'FAIL'}"
    )
    rate = calls / elapsed
    ok_beats = writes <= intervals + 1 and rate >= 100_000
    print(
        f"heartbeat: {calls:,} callbacks in {elapsed:.1f} s ({rate / 1000:.0f}k/s), "
        f"{writes} writes for {intervals:.1f} intervals of 0.5 s (target <= intervals+1) "
        f"{'PASS' if ok_beats else 'MISS'}"
    )
    ratio = big_ms / small_ms
    print(harness.ratio_line(f"claim latency {big:,}/1,000 rows", ratio, "<= 2x", ratio <= 2))


if __name__ == "__main__":
    main()
