"""`mirror verify`'s judgement of one object and one manifest: pure functions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from mirror.converge.verify import (
    Verdict,
    check_manifest,
    check_object,
    expected_objects,
    item_verdict,
    verify_jobs,
)
from mirror.domain.jobs import JobRecord
from mirror.domain.manifest import build_manifest, encode_manifest
from mirror.domain.thumbnails import ThumbnailGrid, thumbnails_json

ITEM = "b" * 32
EXPECTED = {"key": f"p/{ITEM}/video.mp4", "size": 10, "sha256": "ab" * 32}
NOW = datetime(2026, 12, 4, tzinfo=UTC)


def job(**changes: Any) -> JobRecord:
    fields: dict[str, Any] = {
        "id": uuid.uuid4(), "item_id": ITEM, "status": "done", "priority": 0, "attempts": 1,
        "max_attempts": 3, "run_after": NOW, "worker_id": None, "lease_token": None,
        "taken_at": None, "heartbeat_at": None, "heartbeat_data": None,
        "video_key": EXPECTED["key"], "audio_keys": [], "error": None, "created_at": NOW,
        "updated_at": NOW, "finished_at": NOW, "video": dict(EXPECTED),
        "manifest_key": f"p/{ITEM}/manifest.json",
    }  # fmt: skip
    fields.update(changes)
    return JobRecord(**fields)


def test_object_verdicts() -> None:
    assert check_object(ITEM, EXPECTED, None).verdict is Verdict.MISSING
    assert check_object(ITEM, EXPECTED, 11).verdict is Verdict.SIZE_MISMATCH
    assert check_object(ITEM, EXPECTED, 10).verdict is Verdict.OK
    assert check_object(ITEM, EXPECTED, 10, "cd" * 32).verdict is Verdict.CHECKSUM_MISMATCH
    assert check_object(ITEM, EXPECTED, 10, "ab" * 32).verdict is Verdict.OK


def test_an_unrecorded_size_or_checksum_is_not_held_against_the_object() -> None:
    assert check_object(ITEM, {"key": "k", "size": None, "sha256": None}, 5, "x").verdict is (
        Verdict.OK
    )


def test_an_item_is_as_bad_as_its_worst_object() -> None:
    checks = [check_object(ITEM, EXPECTED, 10), check_object(ITEM, EXPECTED, None)]
    assert item_verdict(checks) is Verdict.MISSING
    assert item_verdict([]) is Verdict.OK


def test_rows_without_a_video_column_fall_back_to_video_key() -> None:
    assert expected_objects(job(video=None)) == [
        {"key": EXPECTED["key"], "size": None, "sha256": None}
    ]


def test_manifest_missing_unreadable_differing_or_matching() -> None:
    record = job()
    assert check_manifest(job(manifest_key=None), None) is None
    missing = check_manifest(record, None)
    assert missing is not None and missing.verdict is Verdict.MISSING
    garbage = check_manifest(record, b"not json")
    assert garbage is not None and garbage.verdict is Verdict.MANIFEST_MISMATCH

    def manifest(video: dict[str, Any]) -> bytes:
        return encode_manifest(
            build_manifest(
                item_id=ITEM,
                name="x",
                source=None,
                video=video,
                audio=[],
                job_id=record.id,
                attempt=1,
                mirrored_at=NOW,
                mirror_version="t",
                ffmpeg_version=None,
            )
        )

    same = check_manifest(record, manifest(EXPECTED))
    assert same is not None and same.verdict is Verdict.OK
    other = check_manifest(record, manifest({**EXPECTED, "sha256": "ff" * 32}))
    assert other is not None and other.verdict is Verdict.MANIFEST_MISMATCH
    assert "sha256" in other.detail


def test_verify_checks_the_thumbnails_the_manifest_lists() -> None:
    sheet, track = f"p/{ITEM}/thumbnails/0.jpg", f"p/{ITEM}/thumbnails/thumbnails.vtt"
    grid = ThumbnailGrid(interval_s=10, width=320, height=180, count=1)
    objects = [{"key": sheet, "size": 7, "sha256": "aa" * 32}, {"key": track, "size": 3}]
    body = encode_manifest(
        build_manifest(
            item_id=ITEM, name="x", source=None, video=EXPECTED, audio=[], job_id=uuid.uuid4(),
            attempt=1, mirrored_at=NOW, mirror_version="0", ffmpeg_version=None,
            thumbnails=thumbnails_json(grid, track, "ffmpeg", objects),
        )
    )  # fmt: skip
    record = job()

    class Bucket:
        def __init__(self, sizes: dict[str, int]) -> None:
            self.sizes = sizes

        def iter_objects(self, prefix: str) -> Iterator[tuple[str, int]]:
            return iter(self.sizes.items())

        def get_bytes(self, key: str) -> bytes | None:
            return body if key == record.manifest_key else None

        def sha256_of(self, key: str, on_bytes: Any = None) -> str | None:
            return "bb" * 32 if key == sheet else EXPECTED["sha256"]

    assert record.manifest_key is not None
    whole = {EXPECTED["key"]: 10, record.manifest_key: len(body), sheet: 7, track: 3}
    prefix = lambda item: f"p/{item}/"  # noqa: E731
    report = verify_jobs([record], Bucket(whole), sizes=None, item_prefix=prefix)
    assert report.ok and {c.key for c in report.checks} >= {sheet, track}
    without_sheet = {k: v for k, v in whole.items() if k != sheet}
    report = verify_jobs([record], Bucket(without_sheet), sizes=None, item_prefix=prefix)
    assert [(c.key, c.verdict) for c in report.checks if c.verdict is not Verdict.OK] == [
        (sheet, Verdict.MISSING)
    ]
    report = verify_jobs([record], Bucket(whole), sizes=None, item_prefix=prefix, deep=True)
    assert [(c.key, c.verdict) for c in report.checks if c.verdict is not Verdict.OK] == [
        (sheet, Verdict.CHECKSUM_MISMATCH)
    ]
