"""Download benchmark: our JellyfinClient.download vs `curl -o`, same file, same server.

Inputs:
- a 2 GB file of random bytes (quick mode: 200 MB), generated once into
  bench/data/download/ and kept for later runs;
- served by a loopback nginx (Debian's nginx-light, installed with apt-get if missing)
  at `/Items/<id>/Download`, Range on, config written to a temp prefix;
- ours: `JellyfinClient.download` in a subprocess of its own, with a real `Heartbeat`
  (interval 1 s, keep-alive thread running) on a real claimed job in a scratch
  Postgres database `mirror_bench_*` (dropped afterwards); the subprocess reports the
  seconds the download call took and its peak RSS (ru_maxrss and VmHWM);
- peer: Debian's `curl -s -o FILE URL` (whole process wall time);
- both write to bench/data/download/ on the same disk; a warm-up of each, then
  5 rounds (quick: 3) alternating which goes first.

Prints MB/s medians, peak RSS, heartbeat writes, and the ratio ours/curl as the LAST
line. Targets: >= 0.8x curl, peak RSS < 100 MB.
Usage: python bench/download.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path

import harness
from harness import MB

ITEM_ID = "0b5e2c7d9f8a4e6b8c1d2e3f4a5b6c7d"


def run_child(base_url: str, dest: Path, db_url: str, size: int) -> None:
    """Ours, in this (fresh) process: one download with a heartbeat on a claimed job."""
    from mirror.db.engine import make_engine
    from mirror.db.repository import JobRepository
    from mirror.jellyfin.client import JellyfinClient
    from mirror.runner.heartbeat import Heartbeat

    engine = make_engine(db_url, pool_size=2)
    repo = JobRepository(engine)
    repo.enqueue([uuid.uuid4().hex])
    lease = repo.claim_next("bench-download")
    assert lease is not None
    heartbeat = Heartbeat(
        repo, lease.job_id, lease.token, interval=1.0, stall_timeout=600, lease_timeout=1800
    )
    with heartbeat, JellyfinClient(base_url, "bench-key") as client:
        began = time.perf_counter()
        got = client.download(
            ITEM_ID, dest, expected_size=size, on_progress=heartbeat, abort=heartbeat.abort
        )
        heartbeat.flush()
        seconds = time.perf_counter() - began
    assert got == size, (got, size)
    engine.dispose()
    status = Path("/proc/self/status").read_text()
    hwm = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    print(
        json.dumps(
            {
                "seconds": seconds,
                "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                "vmhwm_kb": int(hwm.split()[1]),
                "writes": heartbeat.writes,
            }
        )
    )


def main() -> None:
    quick = harness.quick_mode()
    size = 200 * MB if quick else 2000 * MB
    rounds = 3 if quick else 5
    curl = harness.apt_binary("curl", "curl")
    source = harness.random_file("download", size)
    out_dir = harness.data_dir("download")
    ours_dest = out_dir / "ours.bin"
    peer_dest = out_dir / "curl.bin"
    children: list[dict[str, float]] = []

    with (
        harness.nginx_serving({f"/Items/{ITEM_ID}/Download": source}) as base_url,
        harness.scratch_database() as db_url,
    ):
        url = f"{base_url}/Items/{ITEM_ID}/Download"

        def ours() -> float:
            harness.fresh_file(ours_dest)
            harness.fresh_file(ours_dest.with_name(ours_dest.name + ".last-modified"))
            output = subprocess.run(
                [sys.executable, __file__, "--child", base_url, str(ours_dest), db_url, str(size)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            child = json.loads(output.strip().splitlines()[-1])
            assert ours_dest.stat().st_size == size
            children.append(child)
            return float(child["seconds"])

        def peer() -> float:
            harness.fresh_file(peer_dest)
            seconds = harness.timed([curl, "-s", "-f", "-o", str(peer_dest), url])
            assert peer_dest.stat().st_size == size
            return seconds

        result = harness.alternate(ours, peer, rounds=rounds, label="download")
    harness.fresh_file(ours_dest)
    harness.fresh_file(peer_dest)

    ours_mbs = size / MB / harness.median(result.ours)
    peer_mbs = size / MB / harness.median(result.peer)
    peak_mb = max(max(c["maxrss_kb"], c["vmhwm_kb"]) for c in children) / 1024
    writes = [int(c["writes"]) for c in children]
    ratio = ours_mbs / peer_mbs
    print(f"file: {size / MB:.0f} MB, rounds: {rounds}, load: {harness.machine_load()}")
    print(f"ours (JellyfinClient.download + Heartbeat): {ours_mbs:.0f} MB/s median")
    print(f"curl -o: {peer_mbs:.0f} MB/s median")
    print(f"ours peak RSS: {peak_mb:.1f} MB (target < 100 MB)")
    print(f"heartbeat writes per download (1 s interval): {writes}")
    ok = ratio >= 0.8 and peak_mb < 100
    print(harness.ratio_line("download ours/curl throughput", ratio, ">= 0.8x", ok))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        run_child(sys.argv[2], Path(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    else:
        main()
