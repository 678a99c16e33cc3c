"""The whole-job benchmarks keep working: `bench/job.py --smoke` on a tiny item.

`make bench` takes many minutes on gigabyte items, so nothing would notice if the
pipeline changed under it; this runs every scenario's code path (running worker, peer
chain, rate-limiting proxies, work-dir and RSS sampling) on a 2 s 320x240 item. Like
`make bench`, it installs its peers when missing (Debian's nginx-light and curl, the AWS
CLI into bench/.peers). The proxy's shared rate limit is checked on its own, with figures.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

# `make bench` runs these first (they install the peers), `make test` leaves them out.
pytestmark = pytest.mark.bench

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench_modules() -> None:
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))


def test_job_bench_prints_a_verdict_line_per_target(database_url: str) -> None:
    # database_url: Postgres is up; the bench makes its own scratch database.
    run = subprocess.run(
        [sys.executable, str(BENCH / "job.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    verdicts = [line for line in run.stdout.splitlines() if re.search(r"\b(PASS|MISS)$", line)]
    names = [line.split(":")[0] for line in verdicts]
    assert names == [
        "whole job remux ours/peer",
        "peak work dir / item",
        "worker peak RSS",
        "whole job re-encode ours/peer",
        "throttled job / max(download, upload)",
    ], run.stdout
    # Real figures, not zeros: the sampler saw the work dir and the worker's memory.
    disk = re.search(r"peak work dir / item: ([\d.]+)x", run.stdout)
    rss = re.search(r"worker peak RSS: (\d+) MB", run.stdout)
    assert disk and float(disk.group(1)) > 0.5, run.stdout
    assert rss and int(rss.group(1)) > 20, run.stdout


def _echo_server() -> tuple[socket.socket, threading.Thread]:
    """A sink that reads everything and answers with as many bytes (for the other way)."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=drain, args=(conn,), daemon=True).start()

    def drain(conn: socket.socket) -> None:
        with conn:
            while conn.recv(1 << 16):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


def test_proxy_rate_is_shared_by_all_connections(bench_modules: None) -> None:
    from throttle import RateLimitedProxy

    server, _ = _echo_server()
    rate = 20_000_000  # bytes/s for all connections together
    each = 4_000_000
    try:
        with RateLimitedProxy("127.0.0.1", server.getsockname()[1], upstream_rate=rate) as proxy:

            def send() -> None:
                with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
                    sock.sendall(b"x" * each)
                    sock.shutdown(socket.SHUT_WR)
                    sock.recv(1)  # the proxy closes once the sink has everything

            began = time.monotonic()
            senders = [threading.Thread(target=send) for _ in range(3)]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join(timeout=30)
            took = time.monotonic() - began
    finally:
        server.close()
    # 12 MB at 20 MB/s: 0.6 s if the budget is shared; per-connection pacing took 0.2 s.
    assert took >= 0.5, took
    assert took < 5, took


def test_fleet_bench_reports_every_figure_with_and_without_pgbouncer(database_url: str) -> None:
    # Two and three worker processes, three tiny jobs each, directly and through PgBouncer.
    run = subprocess.run(
        [sys.executable, str(BENCH / "fleet.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line for line in run.stdout.splitlines() if re.match(r"(direct|pgbouncer) +N=", line)]
    assert [row.split(":")[0].split() for row in rows] == [
        ["direct", "N=", "2"],
        ["direct", "N=", "3"],
        ["pgbouncer", "N=", "2"],
        ["pgbouncer", "N=", "3"],
    ], run.stdout
    for row in rows:
        claims = re.search(r"([\d.]+) claims/s", row)
        beats = re.search(r"heartbeat writes +([\d.]+)/s", row)
        connections = re.search(r"most Postgres connections +(\d+)", row)
        assert claims and float(claims.group(1)) > 0, row
        assert beats and float(beats.group(1)) > 0, row
        assert connections and int(connections.group(1)) >= 1, row
        assert re.search(r"p99 claim +[\d.]+ ms", row), row
    assert re.search(r"^pgbouncer: (saturates by|no saturation)", run.stdout, re.M), run.stdout
    assert re.search(r"claims/s / ideal: [\d.]+x .* (PASS|MISS)$", run.stdout), run.stdout
