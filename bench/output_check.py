"""What reading every output back costs: probe + verify against the whole job (target < 2 %).

Inputs:
- one item: a 1080p H.264/AAC MKV with picture noise, two AAC tracks and a subtitle,
  about 1 GB (100 s; quick mode: 10 s, ~100 MB), generated once into bench/data/verify/;
- the whole job: `python -m mirror.cli.commands worker --burst` against the Jellyfin stand-in
  (in this process, real HTTP on loopback), SeaweedFS's S3 server and a scratch Postgres
  database; codecs auto, so the streams are copied (a remux, the cheapest job and so
  the one where verification weighs most); its attempt time and phases are read from
  the attempt history;
- the added steps, timed in this process on the same file and the same outputs (made
  once with run_transcode): the quick `probe_file` of the source (the mapping after
  the download; the full probe runs only before a failure) and `verify_outputs` of the
  plan (one `ffmpeg` run reading every output), each 5 times.

Prints the medians, then the share of the job as the LAST line. Target: < 2 %.
Usage: python bench/output_check.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from harness import MB, say
from job import ITEM_ID, latest_attempt, worker_env

from mirror.db.engine import make_engine
from mirror.db.repository import JobRepository
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.progress import AbortSignal
from mirror.transcode import plan_transcode, probe_file, run_transcode, verify_outputs

ROUNDS = 5


def timed_call(function: object) -> float:
    started = time.perf_counter()
    function()  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> None:
    quick = harness.quick_mode()
    ffmpeg = harness.ffmpeg_binary()
    seconds = 10 if quick else 100
    sample = harness.cached_sample(
        "verify", f"noise-1080p-{seconds}s.mkv", ffmpeg, seconds, noise=True
    )
    say(f"item: {sample.duration_s:.0f} s 1080p h264/aac x2 (remux), {sample.size / MB:.0f} MB")
    work = harness.data_dir("verify", "work")
    shutil.rmtree(work, ignore_errors=True)

    # The added steps on the same file and outputs the job makes.
    item = sample.to_item(ITEM_ID)
    probe = probe_file(sample.path, ffmpeg)
    plan = plan_transcode(item, work / "out", sample.path, probe=probe)
    assert plan.video.codec == "copy"
    transcode_s = timed_call(
        lambda: run_transcode(plan, ffmpeg, lambda progress: None, AbortSignal())
    )
    probe_runs = [
        timed_call(lambda: probe_file(sample.path, ffmpeg, quick=True)) for _ in range(ROUNDS)
    ]
    verify_runs = [timed_call(lambda: verify_outputs(plan, ffmpeg)) for _ in range(ROUNDS)]
    shutil.rmtree(work, ignore_errors=True)

    with (
        tempfile.TemporaryDirectory(prefix="mirror-bench-verify-") as scratch,
        JellyfinStandIn(api_key="bench-key") as jellyfin,
        harness.s3_server(Path(scratch) / "seaweedfs") as endpoint,
        harness.scratch_database() as db_url,
    ):
        jellyfin.add_item(
            sample.path, name="Bench Noise", streams=sample.streams,
            duration_s=sample.duration_s, item_id=ITEM_ID,
        )  # fmt: skip
        bucket = harness.create_bucket(endpoint)
        repo = JobRepository(make_engine(db_url, pool_size=2))
        env = worker_env(db_url, jellyfin.url, endpoint, bucket, work / "ours")
        repo.enqueue([ITEM_ID])
        subprocess.run(
            [sys.executable, "-m", "mirror.cli", "worker", "--burst"], env=env, check=True
        )
        attempt = latest_attempt(repo)
        job = repo.latest_for_item(ITEM_ID)
        assert job.status == "done", job.error
        repo.engine.dispose()
    shutil.rmtree(work, ignore_errors=True)

    probe_s = harness.median(probe_runs)
    verify_s = harness.median(verify_runs)
    job_s = float(attempt["attempt_s"])
    say(
        f"job attempt {job_s:.2f} s (download {attempt['download_s']:.2f} s, transcode "
        f"{attempt['transcode_s']:.2f} s, upload {attempt['upload_s']:.2f} s); "
        f"bare remux in-process {transcode_s:.2f} s"
    )
    say(
        f"probe of the source {probe_s * 1000:.0f} ms, verify of {len(plan.outputs)} outputs "
        f"{verify_s * 1000:.0f} ms (medians of {ROUNDS}; load: {harness.machine_load()})"
    )
    say(f"verify alone: {100 * verify_s / job_s:.2f} % of the job")
    share = (probe_s + verify_s) / job_s
    print(harness.ratio_line("probe + verify / whole job", share, "< 0.02", share < 0.02))


if __name__ == "__main__":
    main()
