"""The library page's columns are sync's classes: every class a listing meets has one."""

from __future__ import annotations

from mirror.converge.library_status import COLUMNS, LibraryCounts
from mirror.converge.sync import SyncClass


def test_every_class_a_listing_meets_has_a_column_and_items_add_up() -> None:
    listed = set(SyncClass) - {SyncClass.REMOVED}  # removed items are, by definition, unlisted
    assert set(COLUMNS) == listed
    counts = LibraryCounts()
    for kind in sorted(listed):
        counts.add(kind)
    columns = ("mirrored", "changed", "queued", "failed", "not_mirrored", "skipped")
    assert counts.items == len(listed) == sum(getattr(counts, c) for c in columns)
    assert (counts.mirrored, counts.the_rest) == (2, 2)  # unchanged + restored; new + changed
