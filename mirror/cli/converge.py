"""The commands that make the mirror converge: `sync`, `verify`, `db import-manifests`.

Registered onto the app of `mirror.cli.commands` by `register`. They take their
settings and adapters from the `Context` it passes and never import it: run as
`python -m mirror.cli.commands`, that module is `__main__`, and a second import would
register these on an app nobody runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from mirror import wiring
from mirror.cli.sync_views import DETAIL_ROWS, sync_details, sync_table
from mirror.converge.delete_guard import (
    DEFAULT_LIMIT,
    EMPTY_LISTING,
    NO_LIMIT,
    DeleteLimit,
    parse_max_delete,
)
from mirror.converge.renames import MirrorCopier
from mirror.converge.sync import Deletion, sync_library
from mirror.converge.verify import Verdict, VerifyReport, verify_jobs
from mirror.db.sync_jobs import SyncJobStore
from mirror.domain.item import normalize_item_id
from mirror.domain.jobs import ValuesRefused
from mirror.domain.manifest import ManifestError, decode_manifest, restored_job
from mirror.domain.objects import item_prefix
from mirror.files.content_probe import content_probe_of_item
from mirror.jellyfin.kinds import check_item_kinds
from mirror.settings import Settings

VERIFY_THREADS = 16


@dataclass(frozen=True)
class Context:
    """What mirror.cli.commands lends these commands."""

    settings: Callable[[], Settings]
    database: Callable[[], wiring.Database]
    usage_error: Callable[[str], Exception]
    stdout: Console


def register(app: typer.Typer, db_app: typer.Typer, ctx: Context) -> None:
    """Add `sync`, `verify` and `db import-manifests` to the `mirror` command."""

    @app.command()
    def sync(
        library: Annotated[str | None, typer.Option("--library", help="Library name.")] = None,
        parent_id: Annotated[
            str | None, typer.Option("--parent-id", help="Everything under this item id.")
        ] = None,
        item_types: Annotated[
            str, typer.Option("--type", help="Item types, comma separated.")
        ] = "Movie,Episode",
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Report only.")] = False,
        delete: Annotated[
            bool,
            typer.Option(
                "--delete",
                help="Mark removed items `removed`; delete the objects of those still gone "
                "after MIRROR_DELETE_GRACE.",
            ),
        ] = False,
        max_delete: Annotated[
            str | None,
            typer.Option(
                "--max-delete",
                metavar="N|P%",
                help="With --delete: remove at most N items or P% of the mirrored items "
                "(default: 50 and 10%).",
            ),
        ] = None,
        force: Annotated[
            bool,
            typer.Option("--force", help="With --delete: no limit (not for an empty listing)."),
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """New / changed / removed / unchanged against the library; queues new and changed.

        Removed items (mirrored, gone from Jellyfin) are only reported unless --delete:
        then their jobs get status `removed`, and the S3 objects of items still gone
        MIRROR_DELETE_GRACE (default 7d) after that are deleted. An item listed again
        before then keeps its mirror (class `restored`). A run that would remove more than
        50 items or 10% of the mirrored items, or whose library listing is empty, removes
        nothing and exits 1 saying why (--max-delete N|P% or --force to go ahead; never
        for an empty listing). Exit codes: 0 ok, 1 removals held back or a runtime
        failure, 2 bad usage.
        """
        if (library is None) == (parent_id is None):
            raise ctx.usage_error("give --library NAME or --parent-id ID (exactly one)")
        limit = _delete_limit(ctx, delete=delete, max_delete=max_delete, force=force)
        try:
            types = list(check_item_kinds(t for t in item_types.split(",") if t.strip()))
        except ValueError as error:
            raise ctx.usage_error(f"--type: {error}") from None
        if not types:
            raise ctx.usage_error("--type needs at least one item type, e.g. Movie,Episode")
        config = ctx.settings()
        db = ctx.database()
        jobs = SyncJobStore(db.mirrored, db.removals, db.jobs, config.max_attempts)
        bucket = wiring.bucket(config) if not dry_run else None
        # A renamed file's mirror is copied inside S3 rather than transcoded again.
        copier = MirrorCopier(bucket, db.mirrored, config.s3_prefix) if bucket else None

        def delete_item(item_id: str) -> int:
            assert bucket is not None
            return bucket.delete_prefix(item_prefix(config.s3_prefix, item_id))

        deletion = (
            Deletion(delete_item, db.removals, limit=limit, grace_s=config.delete_grace)
            if delete
            else None
        )

        with wiring.jellyfin_client(config) as client:
            library_name: str | None = None
            if library is not None:
                found = client.find_library(library)
                parent, label, library_name = found.item_id, f"library {found.name!r}", found.name
            else:
                parent, label = _item_id(ctx, parent_id or ""), f"parent {parent_id}"
            with _bar(f"syncing {label}") as (bar, task):
                report = sync_library(
                    client,
                    jobs,
                    parent,
                    item_types=types,
                    dry_run=dry_run,
                    deletion=deletion,
                    on_page=lambda done, total: bar.update(task, completed=done, total=total),
                    library_name=library_name,
                    probe=partial(content_probe_of_item, client),
                    copy_mirror=copier.copy if copier is not None else None,
                )
        if as_json:
            _print_json({"scope": label, **report.to_json()})
        else:
            ctx.stdout.print(sync_table(report, label))
            details = sync_details(report)
            if details.row_count:
                ctx.stdout.print(details)
        if report.held_back is not None:
            typer.echo(f"mirror sync: nothing removed: {report.held_back}", err=True)
            if report.held_back != EMPTY_LISTING:
                typer.echo(
                    "check MIRROR_JELLYFIN_URL, the API key's user and the library's "
                    "storage; if the items really left Jellyfin, run again with "
                    "--max-delete N|P% or --force",
                    err=True,
                )
            raise typer.Exit(1)

    @app.command()
    def verify(
        item_ids: Annotated[
            list[str] | None, typer.Argument(help="Item ids to verify (or --all).")
        ] = None,
        all_items: Annotated[bool, typer.Option("--all", help="Every mirrored item.")] = False,
        deep: Annotated[
            bool, typer.Option("--deep", help="Download every object and recompute SHA-256.")
        ] = False,
        requeue: Annotated[
            bool, typer.Option("--requeue", help="Queue a re-mirror of every bad item.")
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """Objects vs the row and the manifest; exit 1 when anything is missing or differs."""
        if bool(item_ids) == all_items:
            raise ctx.usage_error("give ITEM_IDs or --all (exactly one)")
        ids = [_item_id(ctx, raw) for raw in item_ids or []]
        config = ctx.settings()
        db = ctx.database()
        bucket = wiring.bucket(config, threads=VERIFY_THREADS)
        mirrored = db.mirrored
        prefix = config.s3_prefix
        # Everything: one listing of the whole prefix beats a listing per item.
        sizes = bucket.sizes(_root(prefix)) if all_items else None
        jobs = list(mirrored.done_jobs(None if all_items else ids))
        with _bar("verifying", total=len(jobs), in_bytes=False) as (bar, task):
            report = verify_jobs(
                jobs,
                bucket,
                sizes=sizes,
                item_prefix=lambda item_id: item_prefix(prefix, item_id),
                deep=deep,
                threads=VERIFY_THREADS,
                on_item=lambda: bar.advance(task),
            )
        unknown = sorted(set(ids) - report.items.keys())
        if requeue and report.bad_items():
            created = db.jobs.enqueue(report.bad_items(), max_attempts=config.max_attempts)
            report.requeued = [result.job.item_id for result in created]
        if as_json:
            _print_json({**report.to_json(), "not_mirrored": unknown})
        else:
            ctx.stdout.print(verify_table(report))
            problems = verify_details(report)
            if problems.row_count:
                ctx.stdout.print(problems)
            for item_id in unknown:
                typer.echo(f"{item_id}: no done job to verify", err=True)
            if report.requeued:
                typer.echo(f"queued a re-mirror of {len(report.requeued)} item(s)")
        if not report.ok or unknown:
            raise typer.Exit(1)

    @db_app.command("import-manifests")
    def import_manifests(
        prefix: Annotated[
            str | None, typer.Option("--prefix", help="Key prefix (default MIRROR_S3_PREFIX).")
        ] = None,
    ) -> None:
        """Rebuild done job rows from the manifests in the bucket (after losing Postgres)."""
        config = ctx.settings()
        db = ctx.database()
        bucket = wiring.bucket(config, threads=VERIFY_THREADS)
        mirrored = db.mirrored
        root = _root(config.s3_prefix if prefix is None else prefix)
        keys = [k for k, _ in bucket.iter_objects(root) if _is_manifest_key(k, root)]
        restored = skipped = 0
        unreadable: list[str] = []

        def one(key: str) -> bool | str:
            try:
                body = bucket.get_bytes(key)
                if body is None:
                    return f"{key}: deleted while importing"
                job = restored_job(decode_manifest(body), key)
            except ManifestError as error:
                return f"{key}: {error}"
            except (TypeError, ValueError, KeyError) as error:  # a shape decode let through
                return f"{key}: not a manifest: {type(error).__name__}"
            try:
                return mirrored.restore(job)
            except ValuesRefused as error:  # e.g. a \u0000 in a string, which jsonb refuses
                return f"{key}: Postgres refused its values: {error.detail}"

        with (
            ThreadPoolExecutor(max_workers=8) as pool,
            _bar("importing manifests", total=len(keys), in_bytes=False) as (bar, task),
        ):
            for outcome in pool.map(one, keys):
                bar.advance(task)
                if isinstance(outcome, str):
                    unreadable.append(outcome)
                elif outcome:
                    restored += 1
                else:
                    skipped += 1
        for line in unreadable:
            typer.echo(f"unreadable manifest {line}", err=True)
        typer.echo(
            f"{len(keys)} manifest(s) under s3://{bucket.name}/{root}: {restored} job(s) "
            f"restored, {skipped} skipped (item already has a job), {len(unreadable)} unreadable"
        )
        if unreadable:
            raise typer.Exit(1)


def _delete_limit(
    ctx: Context, *, delete: bool, max_delete: str | None, force: bool
) -> DeleteLimit:
    if (max_delete is not None or force) and not delete:
        raise ctx.usage_error("--max-delete and --force only go with --delete")
    if max_delete is not None and force:
        raise ctx.usage_error("give --max-delete or --force, not both")
    if force:
        return NO_LIMIT
    if max_delete is None:
        return DEFAULT_LIMIT
    try:
        return parse_max_delete(max_delete)
    except ValueError as error:
        raise ctx.usage_error(f"--max-delete: {error}") from None


def verify_table(report: VerifyReport) -> Table:
    """Items by their worst object, and objects, per verdict."""
    mode = "deep: every object read back" if report.deep else "sizes and manifests"
    table = Table(title=f"mirror verify ({mode})", title_justify="left")
    table.add_column("result")
    table.add_column("items", justify="right")
    table.add_column("objects", justify="right")
    counts = report.counts()
    for verdict in (Verdict.MISSING, Verdict.SIZE_MISMATCH, Verdict.CHECKSUM_MISMATCH,
                    Verdict.MANIFEST_MISMATCH, Verdict.OK):  # fmt: skip
        row = counts[verdict.value]
        table.add_row(verdict.value, str(row["items"]), str(row["objects"]))
    return table


def verify_details(report: VerifyReport) -> Table:
    table = Table(show_header=True)
    for name in ("item", "key", "problem", "detail"):
        table.add_column(name)
    bad = [check for check in report.checks if check.verdict is not Verdict.OK]
    for check in bad[:DETAIL_ROWS]:
        table.add_row(check.item_id, check.key, check.verdict.value, check.detail)
    if len(bad) > DETAIL_ROWS:
        table.caption = f"first {DETAIL_ROWS} of {len(bad)}; --json lists all"
    return table


class _bar:
    """A progress bar on stderr, drawn only on a terminal (scripts get the result alone)."""

    def __init__(self, label: str, total: int | None = None, *, in_bytes: bool = False) -> None:
        console = Console(stderr=True)
        counter = DownloadColumn() if in_bytes else MofNCompleteColumn()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            counter,
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,
        )
        self.task = self.progress.add_task(label, total=total)

    def __enter__(self) -> tuple[Progress, Any]:
        self.progress.__enter__()
        return self.progress, self.task

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)


def _root(prefix: str) -> str:
    """`a/b/` for the prefix `a/b` (or `/a/b/`); empty for no prefix, like the key layout."""
    clean = "/".join(segment for segment in prefix.split("/") if segment)
    return f"{clean}/" if clean else ""


def _is_manifest_key(key: str, root: str) -> bool:
    """`<root><item_id>/manifest.json` exactly (not a manifest.json deeper down)."""
    rest = key[len(root) :]
    item, _, name = rest.partition("/")
    if name != "manifest.json":
        return False
    try:
        return normalize_item_id(item) == item
    except ValueError:
        return False


def _item_id(ctx: Context, raw: str) -> str:
    try:
        return normalize_item_id(raw)
    except ValueError as error:
        raise ctx.usage_error(str(error)) from None


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
