"""Dashboard benchmark: request times of the page, the API and /metrics at a million jobs.

Inputs (Postgres from MIRROR_BENCH_ADMIN_URL, default the local trust-auth server; a
scratch `mirror_bench_*` database, migrated, dropped after): 1,000,000 `done` jobs
(quick mode: 100,000) with one ended attempt each (bytes, phase seconds, ended over the
last 30 days), 1,000 `failed` ones, and 200 `processing` jobs with progress and an open
attempt, inserted with INSERT ... SELECT generate_series and ANALYZEd. `mirror serve`'s
app (a password set, logged in) runs in waitress on 127.0.0.1; each endpoint is asked
20 times over HTTP with httpx and the median is printed.

"Before" is what a scrape cost until migration 0005: the two full scans the old
/metrics ran (counts per status over jobs, totals and histograms over job_attempts),
timed on the same data. Target: every request under 100 ms.
Usage: python bench/dashboard.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import threading
import time

import harness
import httpx
from harness import say
from sqlalchemy import Engine, text
from waitress import wasyncore
from waitress.server import create_server

from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import DashboardQueries
from mirror.db.engine import make_engine
from mirror.db.repository import JobRepository
from mirror.db.stats import QueueStats
from mirror.web.api import DashboardApi
from mirror.web.auth import UiAuth
from mirror.web.serve import MirrorWeb, WebhookPolicy

REQUESTS = 20
PASSWORD = "bench-password"
OLD_SCAN = [
    "SELECT status, count(*) FROM media_mirror.jobs GROUP BY status",
    """SELECT outcome, count(*), sum(heartbeat_writes), sum(bytes_downloaded),
       sum(bytes_uploaded), count(download_s), sum(download_s), count(transcode_s),
       sum(transcode_s), count(upload_s), sum(upload_s),
       count(*) FILTER (WHERE download_s <= 60), count(*) FILTER (WHERE transcode_s <= 60),
       count(*) FILTER (WHERE upload_s <= 60)
       FROM media_mirror.job_attempts GROUP BY outcome""",
]


def fill(engine: Engine, done: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                """
                INSERT INTO media_mirror.jobs (item_id, status, attempts, video_key,
                    created_at, finished_at, taken_at, worker_id)
                SELECT md5(n::text), 'done', 1, 'mirror/' || md5(n::text) || '/video.mp4',
                       now() - make_interval(secs => n * 2.5) - interval '10 minutes',
                       now() - make_interval(secs => n * 2.5), now(), 'bench:1:0'
                FROM generate_series(1, :done) AS n
                """
            ),
            {"done": done},
        )
        conn.execute(
            text(
                """
                INSERT INTO media_mirror.job_attempts (lease_token, job_id, attempt, worker_id,
                    claimed_at, ended_at, outcome, heartbeat_writes, bytes_downloaded,
                    bytes_uploaded, download_s, transcode_s, upload_s)
                SELECT gen_random_uuid(), id, 1, 'bench:1:0', finished_at - interval '10 min',
                       finished_at, 'done', 60, 4000000000, 1500000000, 120, 400, 60
                FROM media_mirror.jobs
                """
            )
        )
        conn.execute(
            text(
                """
                INSERT INTO media_mirror.jobs (item_id, status, attempts, error, finished_at)
                SELECT md5('f' || n), 'failed', 3, 'ffmpeg exited with 1: Invalid data', now()
                FROM generate_series(1, 1000) AS n
                """
            )
        )
        conn.execute(
            text(
                """
                WITH running AS (
                    INSERT INTO media_mirror.jobs (item_id, status, attempts, worker_id,
                        lease_token, taken_at, heartbeat_at, heartbeat_data)
                    SELECT md5('r' || n), 'processing', 1, 'bench-' || n,
                           gen_random_uuid(), now() - interval '5 min', now(),
                           jsonb_build_object('phase', 'download', 'bytes_done', n * 1000000,
                               'bytes_total', 400000000, 'percent', n / 2.0,
                               'speed_bps', 40000000)
                    FROM generate_series(1, 200) AS n
                    RETURNING id, lease_token, worker_id, taken_at
                )
                INSERT INTO media_mirror.job_attempts
                    (lease_token, job_id, attempt, worker_id, claimed_at)
                SELECT lease_token, id, 1, worker_id, taken_at FROM running
                """
            )
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE media_mirror.jobs"))
        conn.execute(text("VACUUM ANALYZE media_mirror.job_attempts"))


def old_scrape_s(engine: Engine) -> float:
    times = []
    for _ in range(5):
        began = time.perf_counter()
        with engine.connect() as conn:
            for statement in OLD_SCAN:
                conn.execute(text(statement)).all()
        times.append(time.perf_counter() - began)
    return harness.median(times)


def serve(engine: Engine) -> tuple[str, threading.Event]:
    repo = JobRepository(engine)
    api = DashboardApi(
        repo, DashboardQueries(engine), AttemptLog(engine), UiAuth(PASSWORD), stale_timeout_s=1800
    )
    web = MirrorWeb(repo, QueueStats(engine), WebhookPolicy("bench", ("Movie",)), None, api)
    sockets: dict[int, object] = {}
    server = create_server(web, map=sockets, host="127.0.0.1", port=0, threads=2)
    stopping = threading.Event()

    def loop() -> None:
        while not stopping.is_set():
            wasyncore.loop(timeout=0.05, map=sockets, count=1)

    threading.Thread(target=loop, daemon=True).start()
    return f"http://127.0.0.1:{server.effective_port}", stopping  # type: ignore[union-attr]


def main() -> None:
    quick = harness.quick_mode()
    done = 100_000 if quick else 1_000_000
    with harness.scratch_database() as url:
        engine = make_engine(url, pool_size=4)
        say(f"filling: {done:,} done jobs + attempts, 1,000 failed, 200 processing")
        began = time.perf_counter()
        fill(engine, done)
        say(f"filled in {time.perf_counter() - began:.1f}s; machine load {harness.machine_load()}")
        before = old_scrape_s(engine)
        base, stopping = serve(engine)
        try:
            with httpx.Client(base_url=base, timeout=30) as client:
                client.post("/api/login", json={"password": PASSWORD}).raise_for_status()
                first = client.get("/api/jobs?status=done&limit=50").json()
                paths = {
                    "GET / (dashboard page)": "/",
                    "GET /api/overview": "/api/overview",
                    "GET /api/jobs?limit=50": "/api/jobs?limit=50",
                    "GET /api/jobs?status=done&cursor= (page 2)": "/api/jobs?status=done&limit=50"
                    f"&cursor={first['next_cursor']}",
                    "GET /api/jobs/<id>": f"/api/jobs/{first['jobs'][0]['id']}",
                    "GET /api/search?q=<item id prefix>": "/api/search?q="
                    + first["jobs"][0]["item_id"][:8],
                    "GET /metrics": "/metrics",
                }
                figures = {}
                for name, path in paths.items():
                    client.get(path).raise_for_status()  # warm
                    times = []
                    for _ in range(REQUESTS):
                        start = time.perf_counter()
                        client.get(path).raise_for_status()
                        times.append(time.perf_counter() - start)
                    figures[name] = harness.median(times)
        finally:
            stopping.set()
            engine.dispose()
    rows = f"{done:,} done"
    say(f"before (0004): the scans of one /metrics scrape at {rows}: {before * 1000:.0f} ms")
    for name, seconds in figures.items():
        say(f"after: {name:<45} median {seconds * 1000:6.1f} ms")
    worst = max(figures.values())
    verdict = "PASS" if worst < 0.1 else "MISS"
    print(
        f"slowest request at {rows} + 200 running: {worst * 1000:.1f} ms (target < 100) {verdict}"
    )


if __name__ == "__main__":
    main()
