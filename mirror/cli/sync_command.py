"""`mirror sync`: new / changed / removed / unchanged against the library; queues new and
changed, and with --delete removes what left Jellyfin (within the guard's limits)."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from mirror import wiring
from mirror.cli.context import Context, print_json
from mirror.cli.progress_bar import ProgressBar
from mirror.cli.sync_views import sync_details, sync_table
from mirror.converge.delete_guard import (
    DEFAULT_LIMIT,
    EMPTY_LISTING,
    NO_LIMIT,
    DeleteLimit,
    parse_max_delete,
)
from mirror.converge.renames import MirrorCopier
from mirror.converge.sync import Deletion, SyncReport, sync_library
from mirror.db.sync_jobs import SyncJobStore
from mirror.domain.objects import item_prefix
from mirror.files.content_probe import content_probe_of_item
from mirror.jellyfin.kinds import check_item_kinds


def register(app: typer.Typer, ctx: Context) -> None:
    """Add `sync` to the `mirror` command."""

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
        types = _item_types(ctx, item_types)
        label, report = run_sync(
            ctx, library, parent_id, types, dry_run=dry_run, limit=limit if delete else None
        )
        _print_report(ctx, label, report, as_json=as_json)


def run_sync(
    ctx: Context,
    library: str | None,
    parent_id: str | None,
    types: list[str],
    *,
    dry_run: bool,
    limit: DeleteLimit | None,
) -> tuple[str, SyncReport]:
    """Sync one library (or everything under a parent); `limit`: with --delete."""
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
        if limit is not None
        else None
    )
    with wiring.jellyfin_client(config) as client:
        library_name: str | None = None
        if library is not None:
            found = client.find_library(library)
            parent, label, library_name = found.item_id, f"library {found.name!r}", found.name
        else:
            parent, label = ctx.item_id(parent_id or ""), f"parent {parent_id}"
        with ProgressBar(f"syncing {label}") as (bar, task):
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
    return label, report


def _print_report(ctx: Context, label: str, report: SyncReport, *, as_json: bool) -> None:
    """The tables (or JSON); removals held back exit 1 with what to check."""
    if as_json:
        print_json({"scope": label, **report.to_json()})
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


def _item_types(ctx: Context, item_types: str) -> list[str]:
    try:
        types = list(check_item_kinds(t for t in item_types.split(",") if t.strip()))
    except ValueError as error:
        raise ctx.usage_error(f"--type: {error}") from None
    if not types:
        raise ctx.usage_error("--type needs at least one item type, e.g. Movie,Episode")
    return types


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
