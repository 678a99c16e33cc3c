"""`mirror verify`: the objects in the bucket against the rows and the manifests."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from mirror import wiring
from mirror.cli.context import Context, print_json
from mirror.cli.progress_bar import ProgressBar
from mirror.cli.sync_views import DETAIL_ROWS
from mirror.converge.verify import Verdict, VerifyReport, verify_jobs
from mirror.domain.objects import item_prefix, prefix_root

VERIFY_THREADS = 16


def register(app: typer.Typer, ctx: Context) -> None:
    """Add `verify` to the `mirror` command."""

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
        ids = [ctx.item_id(raw) for raw in item_ids or []]
        report = run_verify(ctx, None if all_items else ids, deep=deep)
        unknown = sorted(set(ids) - report.items.keys())
        if requeue and report.bad_items():
            config = ctx.settings()
            created = ctx.database().jobs.enqueue(
                report.bad_items(), max_attempts=config.max_attempts
            )
            report.requeued = [result.job.item_id for result in created]
        _print_report(ctx, report, unknown, as_json=as_json)
        if not report.ok or unknown:
            raise typer.Exit(1)


def run_verify(ctx: Context, item_ids: list[str] | None, *, deep: bool) -> VerifyReport:
    """Check the done jobs of `item_ids` (None: every mirrored item) against the bucket."""
    config = ctx.settings()
    mirrored = ctx.database().mirrored
    bucket = wiring.bucket(config, threads=VERIFY_THREADS)
    prefix = config.s3_prefix
    # Everything: one listing of the whole prefix beats a listing per item.
    sizes = bucket.sizes(prefix_root(prefix)) if item_ids is None else None
    jobs = list(mirrored.done_jobs(item_ids))
    with ProgressBar("verifying", total=len(jobs), in_bytes=False) as (bar, task):
        return verify_jobs(
            jobs,
            bucket,
            sizes=sizes,
            item_prefix=lambda item_id: item_prefix(prefix, item_id),
            deep=deep,
            threads=VERIFY_THREADS,
            on_item=lambda: bar.advance(task),
        )


def _print_report(ctx: Context, report: VerifyReport, unknown: list[str], *, as_json: bool) -> None:
    if as_json:
        print_json({**report.to_json(), "not_mirrored": unknown})
        return
    ctx.stdout.print(verify_table(report))
    problems = verify_details(report)
    if problems.row_count:
        ctx.stdout.print(problems)
    for item_id in unknown:
        typer.echo(f"{item_id}: no done job to verify", err=True)
    if report.requeued:
        typer.echo(f"queued a re-mirror of {len(report.requeued)} item(s)")


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
