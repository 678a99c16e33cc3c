"""Fleet benchmark: N worker processes on one Postgres, directly and through PgBouncer.

Inputs (Postgres from MIRROR_BENCH_ADMIN_URL, default the local trust-auth server; a
scratch `mirror_bench_*` database per run, migrated with mirror's migrations, dropped):
- N = 10, 25, 50 worker processes (quick: 3, 6; `--smoke`: 2, 3), each the real
  `Worker` loop (claim, reaper, burst exit) with `--concurrency 1`, its engine and
  LISTEN built as `mirror worker` builds them (mirror.wiring.database_engine), the
  real `run_attempt` (heartbeat thread, fenced done, the attempt history row);
- JOBS_PER_WORKER = 10 jobs per worker (quick 5, smoke 3) queued up front; each job is
  a tiny item whose pipeline is a stand-in: it reports progress every 10 ms for
  WORK_S = 0.5 s (smoke 0.2 s) and returns its keys. No media moves: ffmpeg in 50
  processes on this machine's 2 cores would measure the CPU, not the queue;
- MIRROR_HEARTBEAT_INTERVAL = 0.1 s, so each job beats about 5 times: the fleet writes
  heartbeats at N/0.1 per second, what 100 x N workers write at the default 10 s;
- direct: MIRROR_PGBOUNCER unset, every worker connected to Postgres itself; run only
  while its worst case, N x (2c+2) connections, fits what the server has free (this
  Postgres is shared; the skip is itself the finding at fleet size);
- PgBouncer: Debian's `pgbouncer` (installed with apt-get when missing) in front, in
  transaction mode with default_pool_size = 20, and MIRROR_PGBOUNCER=transaction.

Each run starts the N processes (fork), waits until every one is connected, then
releases them together. Measured: claims/s (jobs / time to the last exit), the ideal
N/WORK_S beside it, heartbeat writes/s (statements counted in every process), p99 claim
latency (every claim that returned a job), the most Postgres connections of the run's
database (pg_stat_activity sampled every 50 ms), and the machine's CPU busy share.
Saturation: the first N where claims/s falls below 80% of the ideal.
Prints a table, and as the LAST line the largest N's claims/s through PgBouncer / ideal.
Usage: python bench/fleet.py [--quick | --smoke]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness import say
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from mirror import wiring
from mirror.db.attempt_log import AttemptLog
from mirror.db.listen import JobListener
from mirror.db.repository import JobRepository
from mirror.domain.jobs import Fence, Lease, Mirrored
from mirror.domain.progress import Progress
from mirror.runner.assembly import assemble_worker
from mirror.runner.attempt import AttemptPolicy
from mirror.runner.heartbeat import Heartbeat
from mirror.runner.worker import WorkerConfig
from mirror.settings import load_settings

HEARTBEAT_INTERVAL = 0.1
BOUNCER_POOL = 20  # PgBouncer's default_pool_size (also its own default)
EFFICIENT = 0.8  # claims/s at or above this share of the ideal: not saturated


@dataclass(frozen=True)
class Plan:
    fleet_sizes: tuple[int, ...]
    jobs_per_worker: int
    work_s: float


@dataclass
class Run:
    mode: str  # "direct" or "pgbouncer"
    workers: int
    jobs: int = 0
    seconds: float = 0.0
    heartbeat_writes: int = 0
    claim_latencies: list[float] | None = None
    most_connections: int = 0
    cpu_busy: float = 0.0
    postgres_cpu_s: float = 0.0
    skipped: str | None = None

    @property
    def claims_per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0

    @property
    def p99_ms(self) -> float:
        values = sorted(self.claim_latencies or [0.0])
        return values[min(len(values) - 1, int(len(values) * 0.99))] * 1000


# --- one worker process --------------------------------------------------------------


class CountingQueue:
    """The worker's JobRepository with claim latencies and heartbeat writes recorded."""

    def __init__(self, repo: JobRepository) -> None:
        self.repo = repo
        self.claims: list[float] = []
        self.beats = 0
        self._lock = threading.Lock()

    def claim_next(self, worker_id: str) -> Lease | None:
        began = time.perf_counter()
        lease = self.repo.claim_next(worker_id)
        if lease is not None:
            self.claims.append(time.perf_counter() - began)
        return lease

    def heartbeat(self, job_id: uuid.UUID, token: uuid.UUID, progress: Any) -> Fence:
        with self._lock:
            self.beats += 1
        return self.repo.heartbeat(job_id, token, progress)

    def __getattr__(self, name: str) -> Any:  # every other statement, unchanged
        return getattr(self.repo, name)


def stand_in_pipeline(work_s: float) -> Any:
    """A job that takes `work_s`, reporting progress every 10 ms, and moves no media."""

    def pipeline(lease: Lease, heartbeat: Heartbeat) -> Mirrored:
        ends = time.monotonic() + work_s
        done = 0
        while (left := ends - time.monotonic()) > 0:
            done += 1
            heartbeat(Progress("transcode", frames_done=done, frames_total=int(work_s * 100)))
            heartbeat.abort.wait(min(0.01, left))
        return Mirrored(video_key=f"bench/{lease.job.item_id}/video.mp4", audio_keys=[])

    return pipeline


def worker_process(url: str, mode: str, work_s: float, ready: Any, go: Any, results: Any) -> None:
    settings = load_settings(
        database_url=url,
        pgbouncer="transaction" if mode == "pgbouncer" else "off",
        heartbeat_interval=HEARTBEAT_INTERVAL,
        stale_timeout=60,
        poll_interval=0.5,
        work_dir=Path(tempfile.gettempdir()) / f"mirror-bench-fleet-{os.getpid()}",
    )
    engine = wiring.database_engine(settings, concurrency=1)
    queue = CountingQueue(JobRepository(engine))
    history = AttemptLog(engine)
    policy = AttemptPolicy(
        heartbeat_interval=settings.heartbeat_interval,
        stall_timeout=settings.stall_timeout,
        stale_timeout=settings.stale_timeout,
        retry_backoff=settings.retry_backoff,
    )
    pipeline = stand_in_pipeline(work_s)
    listen = None if settings.transaction_pooling else JobListener(url, reconnect_s=0.5)
    config = WorkerConfig(
        name=f"bench:{os.getpid()}",
        concurrency=1,
        poll_interval=settings.poll_interval,
        reap_interval=settings.effective_reap_interval,
        stale_timeout=settings.stale_timeout,
        shutdown_grace=settings.shutdown_grace,
        work_dir=settings.work_dir,
    )
    worker = assemble_worker(queue, pipeline, policy, config, history=history, listen=listen)
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
    ready.release()
    go.wait()
    worker.run(burst=True)
    results.put((queue.claims, queue.beats, time.perf_counter()))
    engine.dispose()


# --- measuring -----------------------------------------------------------------------


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds_of(pid: int) -> float | None:
    """utime + stime of a process (a Postgres backend on this machine), or None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class ConnectionSampler:
    """Every 50 ms: the connections to one database (pg_stat_activity) and the CPU time
    of their backends (/proc), so the run's Postgres CPU is known apart from the
    workers'. A backend that exits between samples loses its last 50 ms: a lower bound."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.most = 0
        self._cpu: dict[int, tuple[float, float]] = {}  # pid: (first seen, latest)
        self._stop = threading.Event()
        self._engine = create_engine(harness.ADMIN_URL, pool_size=1)
        self._thread = threading.Thread(target=self._sample, daemon=True)

    @property
    def postgres_cpu_s(self) -> float:
        return sum(latest - first for first, latest in self._cpu.values())

    def start_cpu_count(self) -> None:
        """From now on: what the backends spent before the go is not the run's."""
        self._cpu = {pid: (latest, latest) for pid, (_, latest) in self._cpu.items()}

    def _sample(self) -> None:
        query = text("SELECT pid FROM pg_stat_activity WHERE datname = :d")
        with self._engine.connect() as conn:
            while not self._stop.wait(0.05):
                pids = [int(pid) for pid in conn.execute(query, {"d": self.database}).scalars()]
                conn.rollback()
                self.most = max(self.most, len(pids))
                for pid in pids:
                    seconds = cpu_seconds_of(pid)
                    if seconds is not None:
                        first = self._cpu.get(pid, (seconds, seconds))[0]
                        self._cpu[pid] = (first, seconds)

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._engine.dispose()


def free_connections() -> int:
    """Connections the shared server can still take (less a margin for everyone else)."""
    engine = create_engine(harness.ADMIN_URL, pool_size=1)
    with engine.connect() as conn:
        limit = int(conn.execute(text("SHOW max_connections")).scalar() or 100)
        reserved = int(conn.execute(text("SHOW superuser_reserved_connections")).scalar() or 3)
        used = int(conn.execute(text("SELECT count(*) FROM pg_stat_activity")).scalar() or 0)
    engine.dispose()
    return limit - reserved - used - 10


def enqueue_tiny_items(url: str, count: int) -> None:
    engine = create_engine(url, pool_size=1)
    repo = JobRepository(engine)
    repo.enqueue([uuid.uuid4().hex for _ in range(count)])
    engine.dispose()


def run_fleet(mode: str, workers: int, plan: Plan, bouncer_port: int | None) -> Run:
    run = Run(mode=mode, workers=workers)
    worst = workers * wiring.connections_per_worker(1)
    if mode == "direct" and worst > (free := free_connections()):
        run.skipped = f"needs up to {worst} connections, the server has {free} free"
        return run
    context = multiprocessing.get_context("fork")
    jobs = workers * plan.jobs_per_worker
    with harness.scratch_database() as url:
        enqueue_tiny_items(url, jobs)
        worker_url = url
        if bouncer_port is not None:
            worker_url = make_url(url).set(host="127.0.0.1", port=bouncer_port)
            worker_url = worker_url.render_as_string(hide_password=False)
        ready, go, results = context.Semaphore(0), context.Event(), context.Queue()
        processes = [
            context.Process(
                target=worker_process, args=(worker_url, mode, plan.work_s, ready, go, results)
            )
            for _ in range(workers)
        ]
        database = make_url(url).database or ""
        with ConnectionSampler(database) as sampler:
            for process in processes:
                process.start()
            for _ in processes:
                ready.acquire()
            busy0, total0 = cpu_times()
            sampler.start_cpu_count()
            began = time.perf_counter()
            go.set()
            finished = [results.get(timeout=600) for _ in processes]
            busy1, total1 = cpu_times()
            for process in processes:
                process.join()
                assert process.exitcode == 0, f"a worker exited with {process.exitcode}"
        engine = create_engine(url, pool_size=1)
        with engine.connect() as conn:
            done = conn.execute(
                text("SELECT count(*) FROM media_mirror.jobs WHERE status = 'done'")
            ).scalar()
        engine.dispose()
    assert done == jobs, f"{done} of {jobs} jobs done"
    run.jobs = jobs
    run.seconds = max(ended for _, _, ended in finished) - began
    run.claim_latencies = [latency for claims, _, _ in finished for latency in claims]
    run.heartbeat_writes = sum(beats for _, beats, _ in finished)
    run.most_connections = sampler.most
    run.postgres_cpu_s = sampler.postgres_cpu_s
    run.cpu_busy = (busy1 - busy0) / max(1, total1 - total0)
    return run


# --- report --------------------------------------------------------------------------


def plan_of(argv: list[str]) -> Plan:
    if "--smoke" in argv:
        return Plan(fleet_sizes=(2, 3), jobs_per_worker=3, work_s=0.2)
    if harness.quick_mode(argv):
        return Plan(fleet_sizes=(3, 6), jobs_per_worker=5, work_s=0.5)
    return Plan(fleet_sizes=(10, 25, 50), jobs_per_worker=10, work_s=0.5)


def describe(run: Run, plan: Plan) -> str:
    if run.skipped:
        return f"{run.mode:9} N={run.workers:3}: skipped ({run.skipped})"
    ideal = run.workers / plan.work_s
    expected_beats = run.workers / HEARTBEAT_INTERVAL
    # What each job cost beyond its work: claim, attempt row, done, history, the wait.
    overhead_ms = (run.workers * run.seconds / run.jobs - plan.work_s) * 1000
    return (
        f"{run.mode:9} N={run.workers:3}: {run.claims_per_s:6.1f} claims/s "
        f"(ideal {ideal:.0f}, {run.claims_per_s / ideal:.2f}x; {overhead_ms:.0f} ms per job "
        f"beyond its work), heartbeat writes {run.heartbeat_writes / run.seconds:6.1f}/s "
        f"(at most N/interval = {expected_beats:.0f}), p99 claim {run.p99_ms:6.1f} ms, "
        f"most Postgres connections {run.most_connections:3}, CPU busy {run.cpu_busy:.0%}, "
        f"Postgres CPU {run.postgres_cpu_s * 1000 / run.jobs:.1f} ms per job "
        f"({run.heartbeat_writes / run.jobs:.1f} beats each), "
        f"{run.jobs} jobs in {run.seconds:.1f} s"
    )


def saturation(runs: list[Run], plan: Plan) -> str:
    measured = [r for r in runs if not r.skipped]
    for run in measured:
        if run.claims_per_s < EFFICIENT * run.workers / plan.work_s:
            return (
                f"saturates by N={run.workers}: claims/s below {EFFICIENT:.0%} of N/WORK_S "
                f"({run.claims_per_s:.0f} of {run.workers / plan.work_s:.0f})"
            )
    largest = measured[-1].workers if measured else 0
    return f"no saturation up to N={largest} (claims/s within {EFFICIENT:.0%} of N/WORK_S)"


def main() -> None:
    argv = sys.argv[1:]
    plan = plan_of(argv)
    runs: dict[str, list[Run]] = {"direct": [], "pgbouncer": []}
    with harness.pgbouncer_in_front(pool_size=BOUNCER_POOL) as port:
        for workers in plan.fleet_sizes:
            for mode in ("direct", "pgbouncer"):
                say(f"{mode}: {workers} workers x {plan.jobs_per_worker} jobs")
                run = run_fleet(mode, workers, plan, port if mode == "pgbouncer" else None)
                say(describe(run, plan))
                runs[mode].append(run)
    print(f"load: {harness.machine_load()}")
    print(
        f"inputs: concurrency 1, {plan.jobs_per_worker} jobs per worker of {plan.work_s} s "
        f"each, heartbeat interval {HEARTBEAT_INTERVAL} s, PgBouncer default_pool_size "
        f"{BOUNCER_POOL}; connections per worker at most {wiring.connections_per_worker(1)} "
        f"direct, {wiring.connections_per_worker(1, transaction_pooling=True)} to PgBouncer"
    )
    for mode in ("direct", "pgbouncer"):
        for run in runs[mode]:
            print(describe(run, plan))
        print(f"{mode}: {saturation(runs[mode], plan)}")
    last = runs["pgbouncer"][-1]
    ratio = last.claims_per_s / (last.workers / plan.work_s)
    print(
        harness.ratio_line(
            f"fleet N={last.workers} through PgBouncer claims/s / ideal",
            ratio,
            f">= {EFFICIENT}",
            ratio >= EFFICIENT,
        )
    )


if __name__ == "__main__":
    main()
