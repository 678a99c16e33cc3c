"""Whole-job benchmarks (issue 14): a running `mirror worker` against the bare tools.

Scenarios, each measured side by side in one run, each printing one verdict line:
- remux: one ~1 GB item (100 s 1920x1080 H.264/AAC MKV with picture noise, two AAC
  tracks and a subtitle; quick: 5 s, ~50 MB) mirrored by a running worker (codecs auto:
  streams copied), against curl + the same ffmpeg argv mirror builds + `aws s3 cp
  --recursive` run one after another on the same item. Target <= 0.75x. During the
  worker's jobs a sampler polls every 50 ms: bytes under MIRROR_WORK_DIR (as `du`;
  target peak <= 1.3x the item's size) and the worker process's RSS (children such as
  ffmpeg excluded; target < 150 MB, read as the kernel's VmHWM of the worker after its
  1 GB jobs, the sampled peak printed beside it). One one-shot `mirror worker --burst`
  run is printed for information;
- reencode: the 60 s 1080p sample of bench/transcode.py (quick: 10 s) with
  MIRROR_VIDEO_CODEC=libx264 and MIRROR_AUDIO_CODEC=aac, against the same chain with the
  same forced codecs. Target <= 0.9x;
- throttled: the remux item with Jellyfin behind a proxy that passes 100 MB/s towards
  the worker and S3 behind one that passes 50 MB/s towards S3 (bench/throttle.py, one
  budget for all connections of a direction); the worker's job time against max(curl
  download alone, `aws s3 cp --recursive` of the outputs alone) through the same proxies.
  Target <= 1.15x.

Shared set-up: Jellyfin is a loopback nginx (Debian's nginx-light) serving the item's JSON
(as the Jellyfin stand-in answers GET /Items for it) and the file, one nginx per item;
S3 is SeaweedFS (`weed mini`), one bucket; Postgres is a scratch `mirror_bench_*` database. The
worker is `python -m mirror.cli worker`, configured with MIRROR_* variables only, timed
from the enqueue (NOTIFY wakes it) until the job reads `done`; only its public surface
(CLI, environment, job table, S3) is used, so the figures stay comparable whatever the
pipeline does inside. Each scenario: a warm-up of each side (not for reencode), then
rounds alternating which side goes first (full: 3, quick: 3, reencode: 2 / 1).

Select scenarios with BENCH_JOB_ONLY=remux,throttled (default: all). `--smoke` runs
every code path on a tiny 320x240 item, one round (tests/e2e/test_bench_smoke.py).
Usage: python bench/job.py [--quick|--smoke]   (or BENCH_QUICK=1)
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness import MB
from samplers import PeakSampler, peak_hwm
from sqlalchemy import text
from throttle import RateLimitedProxy

from mirror.db.engine import make_engine
from mirror.db.repository import JobRepository
from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.transcode import TranscodePlan, build_command, plan_transcode

ITEM_ID = "3c9d2e1f0a7b4c6d8e9f0a1b2c3d4e5f"
REENCODE_ITEM_ID = "4d0e3f2a1b8c5d7e9f0a1b2c3d4e5f60"
DOWNLOAD_RATE = 100 * MB  # bytes/s towards the worker (a LAN Jellyfin)
UPLOAD_RATE = 50 * MB  # bytes/s towards S3 (an internet uplink)


@dataclass(frozen=True)
class Scale:
    remux_s: int
    reencode_s: int
    width: int
    height: int
    rounds: int
    reencode_rounds: int
    warmup: bool


FULL = Scale(remux_s=100, reencode_s=60, width=1920, height=1080, rounds=3,
             reencode_rounds=2, warmup=True)  # fmt: skip
QUICK = Scale(remux_s=5, reencode_s=10, width=1920, height=1080, rounds=3,
              reencode_rounds=1, warmup=True)  # fmt: skip
SMOKE = Scale(remux_s=2, reencode_s=2, width=320, height=240, rounds=1,
              reencode_rounds=1, warmup=False)  # fmt: skip


def item_json(sample: SampleMedia, dest: Path, item_id: str = ITEM_ID) -> Path:
    """GET /Items for the item exactly as the Jellyfin stand-in answers it."""
    import httpx

    from mirror.jellyfin.client import ITEM_FIELDS, authorization_header

    with JellyfinStandIn() as standin:
        standin.add_item(
            sample.path,
            name="Bench Noise",
            streams=sample.streams,
            duration_s=sample.duration_s,
            item_id=item_id,
        )
        response = httpx.get(
            f"{standin.url}/Items",
            params={"ids": item_id, "fields": ITEM_FIELDS},
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
            # The peers make no thumbnails: the same work on both sides (their own cost
            # is bench/thumbnails.py's figure).
            "MIRROR_THUMBNAILS": "false",
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
def running_worker(env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
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
        yield process
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


def wait_until_done(repo: JobRepository, job_id: uuid.UUID, work_dir: Path) -> float:
    """When the job read `done` (perf_counter); returns once its attempt is closed too.

    While the work directory exists the job is running: only that is checked (a stat
    every 10 ms), so the poll takes no CPU from the job; Postgres is asked otherwise.
    The clean-up after `done` (work directory, attempt row) is waited for, not timed.
    """
    deadline = time.monotonic() + 900
    done_at: float | None = None
    while True:
        time.sleep(0.01)
        if done_at is None and work_dir.exists():
            continue
        job = repo.get(job_id)
        if job.status == "done":
            done_at = done_at or time.perf_counter()
            if attempt_closed(repo, job_id) and not work_dir.exists():
                return done_at
        elif job.status in ("failed", "cancelled") or time.monotonic() > deadline:
            raise RuntimeError(f"job {job_id} ended {job.status}: {job.error}")


# --- the pieces a scenario is made of ---------------------------------------------------


@dataclass
class Stack:
    """What every scenario shares: SeaweedFS, one bucket, a scratch database, the tools."""

    scratch: Path
    work: Path
    endpoint: str
    bucket: str
    db_url: str
    repo: JobRepository
    ffmpeg: str
    curl: str
    aws: str
    scale: Scale

    def upload_argv(self, endpoint: str) -> list[str]:
        return [self.aws, "s3", "cp", "--recursive", "--only-show-errors", "--no-progress",
                "--endpoint-url", endpoint]  # fmt: skip

    def aws_env(self) -> dict[str, str]:
        return harness.aws_env(self.scratch)


@dataclass
class ChainTimes:
    download: float
    transcode: float
    upload: float

    @property
    def total(self) -> float:
        return self.download + self.transcode + self.upload


def run_chain(
    stack: Stack, plan: TranscodePlan, jellyfin_url: str, endpoint: str, item_id: str
) -> ChainTimes:
    """curl, then the ffmpeg argv mirror builds, then `aws s3 cp --recursive`."""
    peer_dir = plan.source.parent
    harness.fresh_file(peer_dir)
    for output in plan.outputs:
        output.path.parent.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    url = f"{jellyfin_url}/Items/{item_id}/Download"
    subprocess.run([stack.curl, "-s", "-f", "-o", str(plan.source), url], check=True)
    downloaded = time.perf_counter()
    subprocess.run(
        build_command(plan, stack.ffmpeg),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    transcoded = time.perf_counter()
    destination = f"s3://{stack.bucket}/peer/{item_id}/"
    subprocess.run(
        [*stack.upload_argv(endpoint), str(plan.output_dir), destination],
        check=True,
        env=stack.aws_env(),
    )
    ended = time.perf_counter()
    return ChainTimes(downloaded - began, transcoded - downloaded, ended - transcoded)


@dataclass
class WorkerRun:
    """One running worker on one item: timed jobs with peak sampling."""

    stack: Stack
    process: subprocess.Popen[bytes]
    work_dir: Path
    item_id: str
    peak_dir_bytes: int = 0
    peak_rss_bytes: int = 0

    def job(self) -> float:
        began = time.perf_counter()
        (job,) = self.stack.repo.enqueue([self.item_id])
        with PeakSampler(self.work_dir, self.process.pid) as sampler:
            done_at = wait_until_done(self.stack.repo, job.job.id, self.work_dir / self.item_id)
        self.peak_dir_bytes = max(self.peak_dir_bytes, sampler.peak_dir_bytes)
        self.peak_rss_bytes = max(self.peak_rss_bytes, sampler.peak_rss_bytes)
        return done_at - began


@contextlib.contextmanager
def serving(stack: Stack, sample: SampleMedia, item_id: str) -> Iterator[str]:
    """nginx answering as Jellyfin for one item; yields its URL."""
    items = item_json(sample, harness.data_dir("job") / f"items-{item_id}.json", item_id)
    files = {"/Items": items, f"/Items/{item_id}/Download": sample.path}
    with harness.nginx_serving(files) as url:
        yield url


@contextlib.contextmanager
def worker_for(
    stack: Stack, name: str, jellyfin_url: str, endpoint: str, item_id: str, **extra: str
) -> Iterator[WorkerRun]:
    work_dir = stack.work / f"ours-{name}"
    env = worker_env(stack.db_url, jellyfin_url, endpoint, stack.bucket, work_dir)
    with running_worker({**env, **extra}, stack.scratch / f"worker-{name}.log") as process:
        yield WorkerRun(stack, process, work_dir, item_id)


def phase_split(repo: JobRepository) -> str:
    a = latest_attempt(repo)
    return (
        f"attempt {float(a['attempt_s']):.2f} s = download {float(a['download_s'] or 0):.2f} "
        f"+ transcode {float(a['transcode_s'] or 0):.2f} + upload {float(a['upload_s'] or 0):.2f}"
    )


def spread(values: list[float]) -> str:
    return f"{harness.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"


# --- scenarios --------------------------------------------------------------------------


def remux(stack: Stack, sample: SampleMedia) -> None:
    scale = stack.scale
    plan = plan_transcode(
        sample.to_item(ITEM_ID), stack.work / "peer" / "out", stack.work / "peer" / "source.mkv"
    )
    assert plan.video.codec == "copy"
    with serving(stack, sample, ITEM_ID) as jellyfin_url:

        def peer() -> float:
            times = run_chain(stack, plan, jellyfin_url, stack.endpoint, ITEM_ID)
            chain.append(times)
            return times.total

        chain: list[ChainTimes] = []
        with worker_for(stack, "remux", jellyfin_url, stack.endpoint, ITEM_ID) as worker:
            result = harness.alternate(
                worker.job, peer, rounds=scale.rounds, warmup=scale.warmup, label="remux"
            )
            split = phase_split(stack.repo)
            hwm = peak_hwm(worker.process.pid)
        harness.fresh_file(plan.source.parent)
        env = worker_env(
            stack.db_url, jellyfin_url, stack.endpoint, stack.bucket, stack.work / "burst"
        )
        stack.repo.enqueue([ITEM_ID])
        began = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "mirror.cli", "worker", "--burst"], env=env, check=True
        )
        burst = time.perf_counter() - began
    ours, peer_s = harness.median(result.ours), harness.median(result.peer)
    c = chain[-len(result.peer) :]
    print(
        f"remux item: {sample.duration_s:.0f} s {scale.width}x{scale.height} h264/aac x2, "
        f"{sample.size / MB:.0f} MB; load {harness.machine_load()}"
    )
    print(f"  ours (running worker, enqueue to done): {spread(result.ours)}; last {split}")
    print(
        f"  peer (curl + ffmpeg + aws s3 cp): {spread(result.peer)} = "
        f"{harness.median([t.download for t in c]):.2f} + "
        f"{harness.median([t.transcode for t in c]):.2f} + "
        f"{harness.median([t.upload for t in c]):.2f} s"
    )
    print(f"  one-shot mirror worker --burst (start-up and exit included): {burst:.2f} s "
          f"= {burst / peer_s:.3f}x the peer")  # fmt: skip
    ratio = ours / peer_s
    print(harness.ratio_line("whole job remux ours/peer", ratio, "<= 0.75x", ratio <= 0.75))
    disk = worker.peak_dir_bytes / sample.size
    print(
        f"peak work dir / item: {disk:.3f}x ({worker.peak_dir_bytes / MB:.0f} MB sampled "
        f"every 50 ms, item {sample.size / MB:.0f} MB) (target <= 1.3x) "
        f"{'PASS' if disk <= 1.3 else 'MISS'}"
    )
    print(
        f"worker peak RSS: {hwm / MB:.0f} MB (VmHWM of the worker process, children "
        f"excluded; sampled peak {worker.peak_rss_bytes / MB:.0f} MB) (target < 150 MB) "
        f"{'PASS' if hwm < 150 * MB else 'MISS'}"
    )


def reencode(stack: Stack, sample: SampleMedia) -> None:
    scale = stack.scale
    item = sample.to_item(REENCODE_ITEM_ID)
    peer_dir = stack.work / "peer-reencode"
    plan = plan_transcode(
        item, peer_dir / "out", peer_dir / "source.mkv", video_codec="libx264", audio_codec="aac"
    )
    chain: list[ChainTimes] = []
    with serving(stack, sample, REENCODE_ITEM_ID) as jellyfin_url:

        def peer() -> float:
            times = run_chain(stack, plan, jellyfin_url, stack.endpoint, REENCODE_ITEM_ID)
            chain.append(times)
            return times.total

        codecs = {"MIRROR_VIDEO_CODEC": "libx264", "MIRROR_AUDIO_CODEC": "aac"}
        with worker_for(
            stack, "reencode", jellyfin_url, stack.endpoint, REENCODE_ITEM_ID, **codecs
        ) as worker:
            result = harness.alternate(
                worker.job, peer, rounds=scale.reencode_rounds, warmup=False, label="reencode"
            )
            split = phase_split(stack.repo)
    harness.fresh_file(peer_dir)
    ours, peer_s = harness.median(result.ours), harness.median(result.peer)
    c = chain[-len(result.peer) :]
    print(
        f"re-encode item: {sample.duration_s:.0f} s {scale.width}x{scale.height} "
        f"(libx264 veryfast + aac x2), {sample.size / MB:.0f} MB; load {harness.machine_load()}"
    )
    print(f"  ours (running worker): {spread(result.ours)}; last {split}")
    print(
        f"  peer (curl + ffmpeg + aws s3 cp): {spread(result.peer)} = "
        f"{harness.median([t.download for t in c]):.2f} + "
        f"{harness.median([t.transcode for t in c]):.2f} + "
        f"{harness.median([t.upload for t in c]):.2f} s"
    )
    ratio = ours / peer_s
    print(harness.ratio_line("whole job re-encode ours/peer", ratio, "<= 0.9x", ratio <= 0.9))


def throttled(stack: Stack, sample: SampleMedia) -> None:
    scale = stack.scale
    peer_dir = stack.work / "peer-throttled"
    plan = plan_transcode(sample.to_item(ITEM_ID), peer_dir / "out", peer_dir / "source.mkv")
    with (
        serving(stack, sample, ITEM_ID) as nginx_url,
        RateLimitedProxy.for_url(nginx_url, downstream_rate=DOWNLOAD_RATE) as jellyfin,
        RateLimitedProxy.for_url(stack.endpoint, upstream_rate=UPLOAD_RATE) as s3,
    ):
        # The outputs the upload-alone peer sends: made once, unthrottled.
        run_chain(stack, plan, nginx_url, stack.endpoint, ITEM_ID)
        url = f"{jellyfin.url}/Items/{ITEM_ID}/Download"
        destination = f"s3://{stack.bucket}/peer-throttled/{ITEM_ID}/"
        alone = stack.scratch / "download-alone"
        downloads: list[float] = []
        uploads: list[float] = []

        def apart() -> float:
            download = harness.timed([stack.curl, "-s", "-f", "-o", str(alone), url])
            alone.unlink()
            upload = harness.timed(
                [*stack.upload_argv(s3.url), str(plan.output_dir), destination],
                env=stack.aws_env(),
            )
            downloads.append(download)
            uploads.append(upload)
            return max(download, upload)

        with worker_for(stack, "throttled", jellyfin.url, s3.url, ITEM_ID) as worker:
            result = harness.alternate(
                worker.job, apart, rounds=scale.rounds, warmup=scale.warmup, label="throttled"
            )
            split = phase_split(stack.repo)
    outputs = sum(o.path.stat().st_size for o in plan.outputs if o.path.exists())
    harness.fresh_file(peer_dir)
    ours, bound = harness.median(result.ours), harness.median(result.peer)
    print(
        f"throttled: download {DOWNLOAD_RATE / MB:.0f} MB/s, upload {UPLOAD_RATE / MB:.0f} MB/s "
        f"(shared by all connections), item {sample.size / MB:.0f} MB; "
        f"load {harness.machine_load()}"
    )
    print(f"  ours (running worker): {spread(result.ours)}; last {split}")
    print(
        f"  alone: curl download {spread(downloads[-len(result.peer) :])}, "
        f"aws s3 cp upload {spread(uploads[-len(result.peer) :])}"
    )
    floor = max(sample.size / DOWNLOAD_RATE, outputs / UPLOAD_RATE)
    print(f"  link floor max(item / 100 MB/s, outputs / 50 MB/s): {floor:.2f} s; "
          f"ours = {ours / floor:.3f}x the floor (informative)")  # fmt: skip
    ratio = ours / bound
    print(
        harness.ratio_line(
            "throttled job / max(download, upload)", ratio, "<= 1.15x", ratio <= 1.15
        )
    )


SCENARIOS = {"remux": remux, "reencode": reencode, "throttled": throttled}


def main() -> None:
    smoke = "--smoke" in sys.argv[1:]
    scale = SMOKE if smoke else QUICK if harness.quick_mode() else FULL
    wanted = os.environ.get("BENCH_JOB_ONLY", ",".join(SCENARIOS)).split(",")
    unknown = set(wanted) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"BENCH_JOB_ONLY: unknown scenario(s) {sorted(unknown)}")
    ffmpeg = harness.ffmpeg_binary()
    size = (
        "1080p" if (scale.width, scale.height) == (1920, 1080) else f"{scale.width}x{scale.height}"
    )
    remux_sample = harness.cached_sample(
        "job", f"noise-{size}-{scale.remux_s}s.mkv", ffmpeg, scale.remux_s, noise=True,
        width=scale.width, height=scale.height,
    )  # fmt: skip
    work = harness.data_dir("job", "work")
    harness.fresh_file(work)
    with tempfile.TemporaryDirectory(prefix="mirror-bench-job-") as scratch_dir:
        scratch = Path(scratch_dir)
        with (
            harness.s3_server(scratch / "seaweedfs") as endpoint,
            harness.scratch_database() as db_url,
        ):
            engine = make_engine(db_url, pool_size=2)
            stack = Stack(
                scratch=scratch,
                work=work,
                endpoint=endpoint,
                bucket=harness.create_bucket(endpoint),
                db_url=db_url,
                repo=JobRepository(engine),
                ffmpeg=ffmpeg,
                curl=harness.apt_binary("curl", "curl"),
                aws=harness.awscli(),
                scale=scale,
            )
            try:
                for name in wanted:
                    if name == "reencode":
                        sample = harness.cached_sample(
                            "transcode", f"sample-{size}-{scale.reencode_s}s.mkv",
                            ffmpeg, scale.reencode_s, noise=False,
                            width=scale.width, height=scale.height,
                        )  # fmt: skip
                    else:
                        sample = remux_sample
                    SCENARIOS[name](stack, sample)
                    sys.stdout.flush()
            finally:
                engine.dispose()
    harness.fresh_file(work)


if __name__ == "__main__":
    main()
