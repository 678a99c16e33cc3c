"""`mirror sync`'s tables: counts per class with what was done, then the items."""

from __future__ import annotations

from rich.table import Table

from mirror.converge.sync import SyncClass, SyncReport
from mirror.domain.durations import format_duration

DETAIL_ROWS = 50  # item lines printed under a table; --json has them all


_SYNC_ACTIONS = {
    SyncClass.NEW: ("queued", "would be queued"),
    SyncClass.CHANGED: ("queued for a re-mirror", "would be queued for a re-mirror"),
    SyncClass.UNCHANGED: ("", ""),
    SyncClass.FAILED: ("not queued: see `mirror jobs --status failed`", ""),
    SyncClass.SKIPPED: ("not a media file (.strm, disc, folder): never queued", ""),
    SyncClass.QUEUED: ("already queued or running", ""),
    SyncClass.RESTORED: (
        "back in Jellyfin before the grace ran out: mirror kept",
        "would keep its mirror (back before the grace ran out)",
    ),
}


def sync_table(report: SyncReport, label: str) -> Table:
    """One row per class: how many items and what sync did about them."""
    title = f"mirror sync: {label}" + (" (dry run)" if report.dry_run else "")
    table = Table(title=title, title_justify="left")
    table.add_column("class")
    table.add_column("items", justify="right")
    table.add_column("action")
    for kind in SyncClass:
        count = len(report.items[kind])
        if kind is SyncClass.RESTORED and not count:
            continue
        if kind is SyncClass.REMOVED:
            action = _removed_action(report)
        else:
            done, dry = _SYNC_ACTIONS[kind]
            action = (dry or done) if report.dry_run else done
        table.add_row(kind.value, str(count), action if count else "")
    if report.delete and (report.purged or report.held_back is None):
        done = (
            "would be deleted" if report.dry_run else f"{report.deleted_objects} object(s) deleted"
        )
        grace = format_duration(report.grace_s)
        purge = f"{done}: gone for MIRROR_DELETE_GRACE ({grace}) or more" if report.purged else ""
        table.add_row("purged", str(len(report.purged)), purge)
    if report.touched:
        table.add_row("touched", str(len(report.touched)), "new time, same content: kept")
    if report.renamed:
        table.add_row("renamed", str(len(report.renamed)), "mirror copied in S3 from the old id")
    return table


def _removed_action(report: SyncReport) -> str:
    """What became of the removed items: reported, marked, or held back (and why)."""
    if not report.items[SyncClass.REMOVED]:
        return ""
    if not report.delete:
        return "reported only (--delete marks them; objects go after MIRROR_DELETE_GRACE)"
    if report.held_back is not None:
        return f"held back, nothing removed: {report.held_back}"
    marked = "would be marked removed" if report.dry_run else "marked removed"
    if not report.grace_s:
        return f"{marked}; objects deleted now (MIRROR_DELETE_GRACE=0)"
    grace = format_duration(report.grace_s)
    return f"{marked}; objects deleted by a sync --delete once gone for {grace}"


def sync_details(report: SyncReport) -> Table:
    """The items that need attention: new, changed (and how), removed, failed."""
    table = Table(show_header=True)
    for name in ("item", "name", "class", "detail"):
        table.add_column(name)
    shown = (
        SyncClass.NEW, SyncClass.CHANGED, SyncClass.REMOVED, SyncClass.FAILED, SyncClass.SKIPPED
    )  # fmt: skip
    rows = [(kind, item) for kind in shown for item in sorted(report.items[kind])]
    for kind, item in rows[:DETAIL_ROWS]:
        detail = "; ".join(report.changes.get(item, [])) or report.skipped_kinds.get(item, "")
        if item in report.renamed:
            detail = f"renamed: mirror copied from {report.renamed[item]}"
        table.add_row(item, report.names.get(item, ""), kind.value, detail)
    if len(rows) > DETAIL_ROWS:
        table.caption = f"first {DETAIL_ROWS} of {len(rows)}; --json lists all"
    return table
