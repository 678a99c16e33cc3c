"""`mirror sync`'s tables name touched and renamed items."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from mirror.cli.sync_views import sync_details, sync_table
from mirror.converge.sync import SyncClass, SyncReport


def rendered(table: object) -> str:
    out = StringIO()
    Console(file=out, width=200).print(table)
    return out.getvalue()


def test_touched_and_renamed_items_are_shown() -> None:
    report = SyncReport()
    report.add(SyncClass.NEW, "b" * 32)
    report.add(SyncClass.UNCHANGED, "c" * 32)
    report.touched.append("c" * 32)
    report.renamed["b" * 32] = "a" * 32
    table = rendered(sync_table(report, "library 'Movies'"))
    assert "new time, same content: kept" in table and "mirror copied in S3" in table
    assert f"renamed: mirror copied from {'a' * 32}" in rendered(sync_details(report))
