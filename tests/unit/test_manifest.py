"""manifest.json: built from the row's outputs, read back, compared with a row."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from mirror.domain.manifest import (
    ManifestError,
    build_manifest,
    decode_manifest,
    encode_manifest,
    manifest_differences,
    restored_job,
)

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
JOB = uuid.UUID("3b1f0c2e-0000-4000-8000-000000000001")
VIDEO = {
    "key": f"p/{ITEM}/video.mp4",
    "size": 1000,
    "sha256": "aa" * 32,
    "codec": "h264",
    "width": 1920,
    "height": 1080,
    "duration_s": 4.0,
}
AUDIO = [
    {
        "key": f"p/{ITEM}/audio/1-eng.m4a",
        "stream_index": 1,
        "language": "eng",
        "title": "English",
        "codec": "aac",
        "size": 200,
        "sha256": "bb" * 32,
        "duration_s": 4.0,
    }
]
SOURCE = {"media_source_id": ITEM, "path": "/m/a.mkv", "size": 5000, "container": "mkv"}


def _manifest() -> dict[str, object]:
    return build_manifest(
        item_id=ITEM,
        name="Big Buck Bunny",
        source=SOURCE,
        video=VIDEO,
        audio=AUDIO,
        job_id=JOB,
        attempt=2,
        mirrored_at=datetime(2026, 12, 4, 10, 0, tzinfo=UTC),
        mirror_version="0.1.0",
        ffmpeg_version="7.0.2-static",
    )


def test_manifest_lists_every_output_with_kind_size_checksum_and_stream_facts() -> None:
    manifest = _manifest()
    assert manifest["item"] == {"id": ITEM, "name": "Big Buck Bunny"}
    assert manifest["job"] == {"id": str(JOB), "attempt": 2}
    assert manifest["mirrored_at"] == "2026-12-04T10:00:00+00:00"
    assert manifest["source"] == SOURCE
    video, audio = manifest["outputs"]  # type: ignore[misc]
    assert video["kind"] == "video" and video["width"] == 1920 and video["sha256"] == "aa" * 32
    assert audio == {
        "key": f"p/{ITEM}/audio/1-eng.m4a",
        "kind": "audio",
        "size": 200,
        "sha256": "bb" * 32,
        "codec": "aac",
        "language": "eng",
        "title": "English",
        "stream_index": 1,
        "duration_s": 4.0,
    }


def test_encoding_is_stable_and_round_trips() -> None:
    body = encode_manifest(_manifest())
    assert body == encode_manifest(_manifest())
    assert decode_manifest(body) == _manifest()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"manifest_version": 9}', "unknown manifest_version"),
        (b'{"manifest_version": 1, "item": {}, "outputs": []}', "item.id"),
        (b'{"manifest_version": 1, "item": {"id": "x"}, "outputs": []}', "not a Jellyfin"),
    ],
)
def test_unreadable_manifests_say_why(body: bytes, reason: str) -> None:
    with pytest.raises(ManifestError, match=reason):
        decode_manifest(body)


def test_manifest_agrees_with_its_row() -> None:
    assert manifest_differences(_manifest(), item_id=ITEM, video=VIDEO, audio=AUDIO) == []


def test_differences_name_the_key_and_the_fact() -> None:
    changed = [{**AUDIO[0], "size": 201}]
    problems = manifest_differences(_manifest(), item_id=ITEM, video=VIDEO, audio=changed)
    assert problems == [f"p/{ITEM}/audio/1-eng.m4a: size 200 in the manifest, 201 in the row"]
    missing = manifest_differences(_manifest(), item_id=ITEM, video=VIDEO, audio=[])
    assert missing == [f"p/{ITEM}/audio/1-eng.m4a: in the manifest, not in the row"]


def test_a_row_without_checksums_still_agrees_on_keys() -> None:
    bare_video = {"key": VIDEO["key"]}
    bare_audio = [{"key": AUDIO[0]["key"], "stream_index": 1}]
    assert manifest_differences(_manifest(), item_id=ITEM, video=bare_video, audio=bare_audio) == []


def test_restored_job_keeps_id_attempt_outputs_and_source() -> None:
    restored = restored_job(_manifest(), f"p/{ITEM}/manifest.json")
    assert restored.job_id == JOB
    assert restored.item_id == ITEM
    assert restored.attempts == 2
    assert restored.video_key == VIDEO["key"]
    assert restored.video == VIDEO
    assert restored.audio_keys == AUDIO
    assert restored.source == SOURCE
    assert restored.finished_at == datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
