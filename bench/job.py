"""Whole-job benchmark: `mirror worker --burst` vs curl + bare ffmpeg + `aws s3 cp`.

Inputs:
- one item: a 30 s 1920x1080 H.264/AAC MKV with picture noise (hard to compress, so
  about 300 MB) and two AAC audio tracks plus a subtitle (quick mode: 5 s, ~50 MB);
  generated once into bench/data/job/ and kept;
- Jellyfin is a loopback nginx (Debian's nginx-light) serving the item's JSON (as the
  Jellyfin stand-in in mirror.testing answers GET /Items for it) at `/Items` and the
  file at `/Items/<id>/Download`: one source, the same bytes for both sides;
- S3: moto's server (a process of its own), one bucket; Postgres: a scratch database
  `mirror_bench_*`, dropped afterwards;
- ours, as deployed: a `python -m mirror.cli.commands worker` already running (a subprocess,
  configured with MIRROR_* variables only; defaults otherwise: codecs auto, so the
  streams are copied; part size, heartbeat and poll intervals as shipped); timed from
  the enqueue (NOTIFY wakes the worker) until the job reads `done` (outputs uploaded,
  keys recorded; polled with a stat of its work directory every 10 ms, then Postgres);
  the clean-up after that is waited for before the next run, not timed;
- ours, one-shot: the item enqueued, then `python -m mirror.cli.commands worker --burst` timed
  from start to exit, process start-up and imports included (printed, not the target);
- peer, one after another on the same item: `curl -s -f -o source.mkv URL`, the same
  ffmpeg argv mirror builds for the item (build_command of the same plan), then
  `aws s3 cp --recursive OUTDIR s3://bucket/peer/ID/` (awscli from PyPI, in
  bench/.peers/awscli); timed from the first start to the last exit;
- a warm-up of each, then 5 rounds (quick: 3) alternating which goes first (the
  running worker vs the peer), then 3 one-shot runs.

Prints median wall times, our phase split from the attempt history, and the ratio
ours (running worker) / peer as the LAST line. Target: <= 1.05x.
Usage: python bench/job.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
from harness import MB, say
from sqlalchemy import text

from mirror.db.engine import make_engine
from mirror.db.repository import JobRepository
from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.transcode import build_command, plan_transcode

ITEM_ID = "3c9d2e1f0a7b4c6d8e9f0a1b2c3d4e5f"


def item_json(sample: SampleMedia, dest: Path) -> Path:
    """GET /Items for the item exactly as the Jellyfin stand-in answers it."""
    import httpx

    from mirror.jellyfin import authorization_header
    from mirror.jellyfin.client import ITEM_FIELDS

    with JellyfinStandIn() as standin:
        standin.add_item(
            sample.path,
            name="Bench Noise",
            streams=sample.streams,
            duration_s=sample.duration_s,
            item_id=ITEM_ID,
        )
        response = httpx.get(
            f"{standin.url}/Items",
            params={"ids": ITEM_ID, "fields": ITEM_FIELDS},
            headers={"Authorization": authorization_header(standin.api_key)},
        )
        response.raise_for_status()
    dest.write_bytes(response.content)
    return dest


def worker_env(
    db_url: str, jellyfin_url: str, endpoint: str, bucket: str, work: Path
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIRROR_", "AWS_"))}
    env.update(
        {
            "MIRROR_DATABASE_URL": db_url,
            "MIRROR_JELLYFIN_URL": jellyfin_url,
            "MIRROR_JELLYFIN_API_KEY": "bench-key",
            "MIRROR_S3_BUCKET": bucket,
            "MIRROR_S3_PREFIX": "mirror",
            "MIRROR_S3_ENDPOINT_URL": endpoint,
            "MIRROR_S3_ACCESS_KEY_ID": harness.DUMMY_KEY,
            "MIRROR_S3_SECRET_ACCESS_KEY": harness.DUMMY_KEY,
            "MIRROR_WORK_DIR": str(work),
            "MIRROR_LOG_LEVEL": "WARNING",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    return env


def latest_attempt(repo: JobRepository) -> dict[str, Any]:
    with repo.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT outcome, download_s, transcode_s, upload_s, "
                "extract(epoch FROM ended_at - claimed_at) AS attempt_s "
                "FROM media_mirror.job_attempts ORDER BY claimed_at DESC LIMIT 1"
            )
        ).one()
    return dict(row._mapping)


@contextlib.contextmanager
def running_worker(env: dict[str, str], log_path: Path) -> Iterator[None]:
    """`mirror worker` in the background, idle and listening before this yields."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mirror.cli", "worker"],
            env={**env, "MIRROR_LOG_LEVEL": "INFO"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while b" started: " not in log_path.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start:\n{log_path.read_text()[-2000:]}")
            time.sleep(0.05)
        time.sleep(0.5)  # the listener connects right after the "started" line
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def attempt_closed(repo: JobRepository, job_id: uuid.UUID) -> bool:
    with repo.engine.connect() as conn:
        ended = conn.execute(
            text(
                "SELECT bool_and(ended_at IS NOT NULL) FROM media_mirror.job_attempts "
                "WHERE job_id = :id"
            ),
            {"id": job_id},
        ).scalar()
    return bool(ended)


PEAK_WORK_DIR: list[int] = []


def allocated_bytes(root: Path) -> int:
    """Disk blocks in use under `root` (files vanish while it is walked: skipped)."""
    total = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(folder, name)).st_blocks * 512
    return total


def wait_until_done(repo: JobRepository, job_id: uuid.UUID, work_dir: Path) -> float:
    """When the job read `done` (perf_counter); returns once its attempt is closed too.

    While the work directory exists the job is running: only that is checked (a stat
    every 10 ms), so the poll takes no CPU from the job; Postgres is asked otherwise.
    The clean-up after `done` (work directory, attempt row) is waited for, not timed.
    """
    deadline = time.monotonic() + 300
    done_at: float | None = None
    peak, polls = 0, 0
    while True:
        time.sleep(0.01)
        polls += 1
        if done_at is None and work_dir.exists():
            if polls % 5 == 0:  # every 50 ms: bytes the work directory holds on disk
                peak = max(peak, allocated_bytes(work_dir))
            continue
        if peak:
            PEAK_WORK_DIR.append(peak)
            peak = 0
        status = repo.get(job_id).status
        if status == "done":
            done_at = done_at or time.perf_counter()
            if attempt_closed(repo, job_id) and not work_dir.exists():
                return done_at
        elif status in ("failed", "cancelled") or time.monotonic() > deadline:
            raise RuntimeError(f"job {job_id} ended {status}: {repo.get(job_id).error}")


def main() -> None:
    quick = harness.quick_mode()
    ffmpeg = harness.ffmpeg_binary()
    curl = harness.apt_binary("curl", "curl")
    aws = harness.awscli()
    seconds = 5 if quick else 30
    sample = harness.cached_sample(
        "job", f"noise-1080p-{seconds}s.mkv", ffmpeg, seconds, noise=True
    )
    work = harness.data_dir("job", "work")
    attempts: list[dict[str, Any]] = []
    peer_phases: list[tuple[float, float, float]] = []

    with tempfile.TemporaryDirectory(prefix="mirror-bench-job-") as scratch_dir:
        scratch = Path(scratch_dir)
        # nginx workers run unprivileged: the JSON goes where they can read it.
        items = item_json(sample, harness.data_dir("job") / "items.json")
        files = {"/Items": items, f"/Items/{ITEM_ID}/Download": sample.path}
        with (
            harness.nginx_serving(files) as jellyfin_url,
            harness.moto_server(scratch / "moto.log") as endpoint,
            harness.scratch_database() as db_url,
        ):
            bucket = harness.create_bucket(endpoint)
            engine = make_engine(db_url, pool_size=2)
            repo = JobRepository(engine)
            env = worker_env(db_url, jellyfin_url, endpoint, bucket, work / "ours")
            aws_env = harness.aws_env(scratch)
            peer_dir = work / "peer"
            item = sample.to_item(ITEM_ID)
            plan = plan_transcode(item, peer_dir / "out", peer_dir / "source.mkv")
            assert plan.video.codec == "copy"
            upload = [aws, "s3", "cp", "--recursive", "--only-show-errors", "--no-progress"]
            upload += ["--endpoint-url", endpoint]

            def ours_burst() -> float:
                (job,) = repo.enqueue([ITEM_ID])
                began = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "mirror.cli", "worker", "--burst"], env=env, check=True
                )
                seconds = time.perf_counter() - began
                status = repo.get(job.job.id).status
                assert status == "done", status
                return seconds

            def ours_running() -> float:
                began = time.perf_counter()
                (job,) = repo.enqueue([ITEM_ID])
                seconds = wait_until_done(repo, job.job.id, work / "ours" / ITEM_ID) - began
                attempts.append(latest_attempt(repo))
                return seconds

            def peer() -> float:
                harness.fresh_file(peer_dir)
                for output in plan.outputs:
                    output.path.parent.mkdir(parents=True, exist_ok=True)
                url = f"{jellyfin_url}/Items/{ITEM_ID}/Download"
                argv = build_command(plan, ffmpeg)
                destination = f"s3://{bucket}/peer/{ITEM_ID}/"
                began = time.perf_counter()
                subprocess.run([curl, "-s", "-f", "-o", str(plan.source), url], check=True)
                downloaded = time.perf_counter()
                subprocess.run(
                    argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
                transcoded = time.perf_counter()
                subprocess.run(
                    [*upload, str(plan.output_dir), destination], check=True, env=aws_env
                )
                ended = time.perf_counter()
                peer_phases.append(
                    (downloaded - began, transcoded - downloaded, ended - transcoded)
                )
                return ended - began

            with running_worker(env, scratch / "worker.log"):
                result = harness.alternate(
                    ours_running, peer, rounds=3 if quick else 5, label="job"
                )
            burst = [ours_burst() for _ in range(3)]
            say(f"one-shot runs: {', '.join(f'{b:.3f} s' for b in burst)}")
            engine.dispose()
    harness.fresh_file(work)

    ours_s, peer_s = harness.median(result.ours), harness.median(result.peer)
    ratio = ours_s / peer_s
    measured = attempts[-len(result.ours) :]

    def mid(key: str) -> float:
        return harness.median([float(a[key] or 0.0) for a in measured])

    phases = list(zip(*peer_phases[-len(result.peer) :], strict=True))
    print(
        f"item: {sample.duration_s:.0f} s 1080p h264/aac x2 (remux), {sample.size / MB:.0f} MB; "
        f"load: {harness.machine_load()}"
    )
    print(
        f"ours (running mirror worker, enqueue to done): {ours_s:.2f} s median; attempt "
        f"{mid('attempt_s'):.2f} s = download {mid('download_s'):.2f} + transcode "
        f"{mid('transcode_s'):.2f} + upload {mid('upload_s'):.2f} s (phase clocks)"
    )
    burst_s = harness.median(burst)
    print(
        f"ours one-shot (mirror worker --burst, start-up and exit included): {burst_s:.2f} s "
        f"median = {burst_s / peer_s:.3f}x the peer"
    )
    peak = max(PEAK_WORK_DIR[-len(result.ours) :], default=0)
    print(f"peak work dir: {peak / MB:.0f} MB = {peak / sample.size:.2f}x the item (max of runs)")
    print(
        f"peer (curl + ffmpeg + aws s3 cp --recursive): {peer_s:.2f} s median = "
        f"{harness.median(phases[0]):.2f} + {harness.median(phases[1]):.2f} + "
        f"{harness.median(phases[2]):.2f} s"
    )
    print(harness.ratio_line("whole job ours/peer wall time", ratio, "<= 1.05x", ratio <= 1.05))


if __name__ == "__main__":
    main()
