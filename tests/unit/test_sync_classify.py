"""`mirror sync`'s classification: a pure function of the listing and the job history."""

from __future__ import annotations

from typing import Any

import pytest

from mirror.converge.fingerprints import fingerprint_changes, only_time_changed
from mirror.converge.sync import SyncClass, classify
from mirror.domain.jobs import ItemHistory

ITEM = "a" * 32
SOURCE = {"media_source_id": ITEM, "path": "/m/a.mkv", "size": 100, "etag": "e1"}


def history(status: str, source: dict[str, Any] | None = SOURCE) -> ItemHistory:
    return ItemHistory(ITEM, status, source if status == "done" else None, status == "done")


def test_never_mirrored_is_new() -> None:
    assert classify({"path": "/m/a.mkv"}, None) == (SyncClass.NEW, [])


def test_removed_earlier_and_back_in_the_library_is_new() -> None:
    assert classify({"path": "/m/a.mkv"}, history("removed"))[0] is SyncClass.NEW


def test_marked_removed_and_back_before_its_objects_went_is_restored() -> None:
    marked = ItemHistory(ITEM, "removed", None, False, pending_removal=True)
    assert classify({"path": "/m/a.mkv"}, marked) == (SyncClass.RESTORED, [])


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("new", SyncClass.QUEUED),
        ("processing", SyncClass.QUEUED),
        ("failed", SyncClass.FAILED),
        ("cancelled", SyncClass.FAILED),
    ],
)
def test_active_and_unfinished_jobs(status: str, expected: SyncClass) -> None:
    assert classify({"path": "/m/a.mkv", "size": 999}, history(status))[0] is expected


def test_same_fingerprint_is_unchanged() -> None:
    assert classify({"path": "/m/a.mkv", "size": 100, "etag": "e1"}, history("done")) == (
        SyncClass.UNCHANGED,
        [],
    )


@pytest.mark.parametrize(
    ("current", "change"),
    [
        ({"media_source_id": "b" * 32, "size": 100}, f"media_source_id {ITEM} -> {'b' * 32}"),
        ({"path": "/m/a.mkv", "size": 200, "etag": "e1"}, "size 100 -> 200"),
        ({"path": "/m/a.mkv", "size": 100, "etag": "e2"}, "etag e1 -> e2"),
    ],
)
def test_source_id_size_or_etag_difference_is_changed(current: dict[str, Any], change: str) -> None:
    assert classify(current, history("done")) == (SyncClass.CHANGED, [change])


def test_a_path_alone_is_not_a_change() -> None:
    # 10.11.3+: the row recorded the media source's Path (a symlink's target), the
    # listing may carry the item's Path (the link): one file, two spellings.
    assert classify({"path": "/links/a.mkv", "size": 100, "etag": "e1"}, history("done")) == (
        SyncClass.UNCHANGED,
        [],
    )


def test_facts_missing_on_either_side_are_not_compared() -> None:
    # Jellyfin left Size out of the listing; the row has no ETag.
    assert fingerprint_changes({"path": "/m/a.mkv", "size": 100}, {"path": "/m/a.mkv"}) == []
    assert fingerprint_changes({"size": 100}, {"size": 100, "etag": "new"}) == []


def test_done_job_without_fingerprint_counts_as_unchanged() -> None:
    assert classify({"path": "/m/x.mkv", "size": 1}, history("done", None))[0] is (
        SyncClass.UNCHANGED
    )


def test_only_a_new_etag_at_the_same_size_with_a_recorded_probe_can_be_probed() -> None:
    recorded = {**SOURCE, "content_probe": "sha256:x"}
    assert only_time_changed(recorded, {"media_source_id": ITEM, "size": 100, "etag": "e2"})
    assert not only_time_changed(recorded, {"size": 200, "etag": "e2"})  # new size
    assert not only_time_changed(SOURCE, {"size": 100, "etag": "e2"})  # nothing to compare
    assert not only_time_changed(recorded, {"size": 100, "etag": "e1"})  # nothing changed
    other_source = {"media_source_id": "b" * 32, "size": 100, "etag": "e2"}
    assert not only_time_changed(recorded, other_source)
