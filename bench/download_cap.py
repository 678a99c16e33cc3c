"""Gentle on Jellyfin: 4 `mirror worker` processes, MIRROR_JELLYFIN_MAX_DOWNLOADS=2, 8 items.

Inputs:
- one 640x480 noisy H.264/AAC MKV (4 s, about 6 MB; quick mode: 2 s), generated into
  bench/data/download_cap/, served as 8 different items by the Jellyfin stand-in
  (in this process) with each download body throttled to 4 MB/s, so downloads last
  long enough to overlap;
- S3: SeaweedFS's S3 server (a process of its own); Postgres: a scratch `mirror_bench_*` database;
- 4 `python -m mirror.cli worker --burst` processes started together, once with
  MIRROR_JELLYFIN_MAX_DOWNLOADS=2 and once without a cap (for comparison), timed from
  the start of the workers to the exit of the last one.

Downloads at once are counted from the stand-in's own start and end time of every
download body (server side). Prints, per run, the most downloads at once, the number
of download requests and the total time; the LAST line is the capped run's maximum.
Target: never more than 2 at once, every item downloaded once.
Usage: python bench/download_cap.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from harness import MB, say

from mirror.db.engine import make_engine
from mirror.db.repository import JobRepository
from mirror.demo.media import SampleMedia, generate_sample
from mirror.demo.stand_in.server import JellyfinStandIn, most_at_once

WORKERS = 4
ITEMS = 8
CAP = 2
THROTTLE_BPS = 4 * MB


def sample(quick: bool, ffmpeg: str) -> SampleMedia:
    seconds = 2 if quick else 4
    path = harness.data_dir("download_cap") / f"noise-480p-{seconds}s.mkv"
    say(f"generating {path.name}")
    return generate_sample(
        harness.fresh_file(path),
        "h264_aac",
        duration_s=seconds,
        width=640,
        height=480,
        ffmpeg_path=ffmpeg,
        noise=True,
    )


def worker_env(
    standin: JellyfinStandIn, db_url: str, endpoint: str, bucket: str, work: Path, cap: int | None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIRROR_", "AWS_"))}
    env.update(
        {
            "MIRROR_DATABASE_URL": db_url,
            "MIRROR_JELLYFIN_URL": standin.url,
            "MIRROR_JELLYFIN_API_KEY": standin.api_key,
            "MIRROR_S3_BUCKET": bucket,
            "MIRROR_S3_ENDPOINT_URL": endpoint,
            "MIRROR_S3_ACCESS_KEY_ID": harness.DUMMY_KEY,
            "MIRROR_S3_SECRET_ACCESS_KEY": harness.DUMMY_KEY,
            "MIRROR_WORK_DIR": str(work),
            "MIRROR_POLL_INTERVAL": "200ms",
            "MIRROR_HEARTBEAT_INTERVAL": "1s",
            "MIRROR_LOG_LEVEL": "WARNING",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    if cap is not None:
        env["MIRROR_JELLYFIN_MAX_DOWNLOADS"] = str(cap)
    return env


def run(
    standin: JellyfinStandIn,
    media: SampleMedia,
    db_url: str,
    endpoint: str,
    work: Path,
    cap: int | None,
) -> tuple[int, int, float]:
    """One run on 8 fresh items: (most downloads at once, download requests, seconds)."""
    items = [
        standin.add_item(
            media.path, name=f"Item {n}", streams=media.streams, duration_s=media.duration_s
        )
        for n in range(ITEMS)
    ]
    bucket = harness.create_bucket(endpoint)
    engine = make_engine(db_url, pool_size=1)
    repo = JobRepository(engine)
    repo.enqueue(items)
    standin.clear_request_log()
    env = worker_env(standin, db_url, endpoint, bucket, harness.fresh_file(work), cap)
    began = time.perf_counter()
    workers = [
        subprocess.Popen([sys.executable, "-m", "mirror.cli", "worker", "--burst"], env=env)
        for _ in range(WORKERS)
    ]
    codes = [worker.wait(timeout=600) for worker in workers]
    took = time.perf_counter() - began
    statuses = [repo.latest_for_item(item).status for item in items]
    engine.dispose()
    if codes != [0] * WORKERS or statuses != ["done"] * ITEMS:
        raise RuntimeError(f"workers exited {codes}; jobs {statuses}")
    spans = standin.download_spans()
    return most_at_once(spans), len(spans), took


def main() -> None:
    quick = harness.quick_mode()
    media = sample(quick, harness.ffmpeg_binary())
    say(
        f"{ITEMS} items of {media.size / MB:.1f} MB, downloads throttled to "
        f"{THROTTLE_BPS / MB:.0f} MB/s each by the stand-in, {WORKERS} workers"
    )
    results: dict[str, tuple[int, int, float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="mirror-bench-cap-") as scratch,
        JellyfinStandIn() as standin,
        harness.s3_server(Path(scratch) / "seaweedfs") as endpoint,
        harness.scratch_database() as db_url,
    ):
        standin.throttle(THROTTLE_BPS)
        work = Path(scratch) / "work"
        for label, cap in (("no cap", None), (f"MIRROR_JELLYFIN_MAX_DOWNLOADS={CAP}", CAP)):
            results[label] = run(standin, media, db_url, endpoint, work, cap)
            most, requests, took = results[label]
            say(
                f"{label}: at most {most} downloads at once, {requests} download requests, "
                f"{took:.1f} s for {ITEMS} items"
            )
    print(f"machine load: {harness.machine_load()}")
    for label, (most, requests, took) in results.items():
        print(f"{label:<34} most at once {most}  downloads {requests}  total {took:6.1f} s")
    most, requests, _ = results[f"MIRROR_JELLYFIN_MAX_DOWNLOADS={CAP}"]
    ok = most <= CAP and requests == ITEMS
    print(
        f"max concurrent downloads with MIRROR_JELLYFIN_MAX_DOWNLOADS={CAP}: {most} "
        f"({requests} downloads for {ITEMS} items) (target <= {CAP}) {'PASS' if ok else 'MISS'}"
    )


if __name__ == "__main__":
    main()
