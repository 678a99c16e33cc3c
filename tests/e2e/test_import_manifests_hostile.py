"""`mirror db import-manifests` over a bucket holding hostile manifests beside good ones:
each unreadable one is named and skipped, the good ones are imported, exit 1."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from mirror.domain.manifest import build_manifest, encode_manifest
from tests.fixtures.stack import Stack

GOOD = ["a" * 32, "b" * 32]
DEEP = "c" * 32  # 10,000 arrays deep: past the JSON parser's recursion limit
HUGE = "d" * 32  # a 5,000-digit number: past Python's int conversion limit
NUL = "e" * 32  # a \u0000 in its source: valid JSON that Postgres' jsonb refuses


def _put(stack: Stack, item_id: str, body: bytes) -> None:
    key = f"mirror/{item_id}/manifest.json"
    stack.s3.client.put_object(Bucket=stack.s3.bucket, Key=key, Body=body)


def _good(item_id: str, source: dict[str, object] | None = None) -> bytes:
    manifest = build_manifest(
        item_id=item_id,
        name="Good",
        source=source or {"size": 10},
        video={"key": f"mirror/{item_id}/video.mp4", "size": 5, "sha256": "0" * 64},
        audio=[],
        job_id=uuid.uuid4(),
        attempt=1,
        mirrored_at=datetime.now(UTC),
        mirror_version="test",
        ffmpeg_version=None,
    )
    return encode_manifest(manifest)


def test_hostile_manifests_are_named_and_skipped_and_the_good_ones_imported(
    stack: Stack,
) -> None:
    for item_id in GOOD:
        _put(stack, item_id, _good(item_id))
    _put(stack, DEEP, b"[" * 10_000 + b"]" * 10_000)
    huge = b'{"manifest_version": 1, "item": {"id": "%s"}, "outputs": [], "n": %s}' % (
        HUGE.encode(),
        b"9" * 5000,
    )
    _put(stack, HUGE, huge)
    _put(stack, NUL, _good(NUL, {"size": 10, "Path": "a\u0000b"}))

    result = stack.mirror_here("db", "import-manifests")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "unexpected error" not in result.stderr and "Traceback" not in result.stderr
    assert f"mirror/{DEEP}/manifest.json: not a manifest: JSON nested too deeply" in result.stderr
    assert f"mirror/{HUGE}/manifest.json: not a manifest: Exceeds the limit" in result.stderr
    assert f"mirror/{NUL}/manifest.json: Postgres refused its values: " in result.stderr
    assert "5 manifest(s)" in result.stdout
    assert "2 job(s) restored, 0 skipped (item already has a job), 3 unreadable" in result.stdout
    for item_id in GOOD:
        assert stack.job(item_id).status == "done"
