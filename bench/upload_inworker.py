"""Where the in-worker upload loses time: the same outputs uploaded three ways, alternated.

Inputs:
- one item: the whole-job benchmark's remux item (bench/job.py; 30 s 1080p noise, about
  300 MB; quick mode: 5 s), served by a loopback nginx as Jellyfin; SeaweedFS's S3 server; a
  scratch Postgres database;
- running: a `mirror worker` already running (INFO log) mirrors the item; the upload is
  timed inside it from its own log lines, "uploading N files" to "uploaded N files"
  (millisecond timestamps), i.e. `S3Storage.upload_files` alone;
- burst: the same with a one-shot `mirror worker --burst`;
- bare: a fresh `python` process builds `S3Storage` from the same MIRROR_* settings and
  uploads the same outputs (made once here with run_transcode, same plan) with a real
  Heartbeat on an in-memory store, timed around `upload_files`;
- rounds alternate the three (order rotated); BENCH_UPLOAD_ROUNDS sets how many (5).

Extra variables for the worker runs come from BENCH_WORKER_ENV ("A=1 B=2"), to vary one
thing at a time. Prints each variant's median and spread.
Usage: python bench/upload_inworker.py [--quick]
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import harness
from harness import MB, say
from job import ITEM_ID, item_json, running_worker, wait_until_done, worker_env

from mirror.db.engine import make_engine
from mirror.db.repository import JobRepository
from mirror.domain.progress import AbortSignal
from mirror.transcode import plan_transcode, run_transcode

BARE = """
import json, sys, time
sys.path.append({bench!r})
import harness
from mirror.domain.objects import Upload
from mirror.settings import Settings
from mirror.wiring import s3_storage
files = json.loads(sys.argv[1])
storage = s3_storage(Settings())
uploads = [Upload(__import__('pathlib').Path(p), k, 'video/mp4') for p, k in files]
beat = harness.offline_heartbeat()
with beat:
    began = time.perf_counter()
    storage.upload_files(uploads, on_progress=beat, abort=beat.abort)
    print(time.perf_counter() - began)
"""

STAMP = re.compile(r"^(\S+)Z .* (uploading \d+ files|uploaded \d+ files|attempt ended)")
TAILS: list[float] = []  # "uploaded" to "attempt ended": manifest, clean-up, done


def upload_seconds(log: str) -> float:
    """Seconds between the last 'uploading' line and the 'uploaded' line after it."""
    stamps: dict[str, datetime] = {}
    for line in log.splitlines():
        match = STAMP.match(line)
        if match:
            stamps[match.group(2).split()[0]] = datetime.fromisoformat(match.group(1))
    TAILS.append((stamps["attempt"] - stamps["uploaded"]).total_seconds())
    return (stamps["uploaded"] - stamps["uploading"]).total_seconds()


def main() -> None:
    quick = harness.quick_mode()
    ffmpeg = harness.ffmpeg_binary()
    seconds = 5 if quick else 30
    rounds = int(os.environ.get("BENCH_UPLOAD_ROUNDS", "5"))
    extra = dict(pair.split("=", 1) for pair in os.environ.get("BENCH_WORKER_ENV", "").split())
    sample = harness.cached_sample(
        "job", f"noise-1080p-{seconds}s.mkv", ffmpeg, seconds, noise=True
    )
    work = harness.data_dir("upload_inworker")
    shutil.rmtree(work, ignore_errors=True)
    item = sample.to_item(ITEM_ID)
    plan = plan_transcode(item, work / "bare" / "out", sample.path)
    run_transcode(plan, ffmpeg, lambda progress: None, AbortSignal())
    files = [(str(o.path), f"bare/{o.path.name}") for o in plan.outputs]
    size = sum(o.path.stat().st_size for o in plan.outputs)
    times: dict[str, list[float]] = {"running": [], "burst": [], "bare": []}

    with tempfile.TemporaryDirectory(prefix="mirror-bench-upw-") as scratch_dir:
        scratch = Path(scratch_dir)
        items = item_json(sample, harness.data_dir("job") / "items.json")
        served = {"/Items": items, f"/Items/{ITEM_ID}/Download": sample.path}
        with (
            harness.nginx_serving(served) as jellyfin_url,
            harness.s3_server(scratch / "seaweedfs") as endpoint,
            harness.scratch_database() as db_url,
            harness.scratch_database() as burst_db_url,
        ):
            bucket = harness.create_bucket(endpoint)
            repo = JobRepository(make_engine(db_url, pool_size=2))
            # The one-shot worker has a database of its own: the running one would claim
            # its job otherwise, and so the three can alternate.
            burst_repo = JobRepository(make_engine(burst_db_url, pool_size=2))
            env = {**worker_env(db_url, jellyfin_url, endpoint, bucket, work / "w"), **extra}
            burst_env = {
                **worker_env(burst_db_url, jellyfin_url, endpoint, bucket, work / "b"),
                **extra,
                "MIRROR_LOG_LEVEL": "INFO",
            }
            running_log = scratch / "worker.log"

            def running() -> float:
                before = running_log.read_text()
                (job,) = repo.enqueue([ITEM_ID])
                wait_until_done(repo, job.job.id, work / "w" / ITEM_ID)
                time.sleep(0.2)
                return upload_seconds(running_log.read_text()[len(before) :])

            def burst() -> float:
                burst_repo.enqueue([ITEM_ID])
                out = subprocess.run(
                    [sys.executable, "-m", "mirror.cli", "worker", "--burst"],
                    env=burst_env,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                return upload_seconds(out.stdout + out.stderr)

            def bare() -> float:
                code = BARE.format(bench=str(harness.BENCH_DIR))
                out = subprocess.run(
                    [sys.executable, "-c", code, json.dumps(files)],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                return float(out.stdout.strip().splitlines()[-1])

            variants = {"running": running, "burst": burst, "bare": bare}
            with running_worker(env, running_log):
                for warm in variants.values():  # page cache, S3's first writes, imports
                    warm()
                TAILS.clear()
                for index in range(rounds):
                    names = list(variants)
                    names = names[index % 3 :] + names[: index % 3]
                    for name in names:
                        seconds_taken = variants[name]()
                        times[name].append(seconds_taken)
                        say(f"round {index + 1} {name}: {seconds_taken:.3f} s")
            repo.engine.dispose()
            burst_repo.engine.dispose()
    shutil.rmtree(work, ignore_errors=True)
    load = harness.machine_load()
    print(f"outputs: {size / MB:.0f} MB in {len(files)} files; env {extra}; load {load}")
    for name, values in times.items():
        if values:
            print(
                f"{name}: median {harness.median(values):.3f} s "
                f"({size / MB / harness.median(values):.0f} MB/s), "
                f"min {min(values):.3f} max {max(values):.3f} n={len(values)}"
            )
    print(f"after the upload until the attempt ended (running, burst): {TAILS}")


if __name__ == "__main__":
    main()
