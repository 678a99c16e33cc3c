"""MIRROR_RENDITIONS: checked names, rungs below the source, and every rendition on
the row, in the manifest and in what `mirror verify` expects."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mirror.converge.verify import expected_objects
from mirror.domain.errors import ConfigError
from mirror.domain.item import MediaItem, MediaStream
from mirror.domain.jobs import JobRecord
from mirror.domain.manifest import build_manifest, manifest_differences, restored_job
from mirror.domain.renditions import Rung, parse_renditions, rungs_below
from mirror.settings import load_settings
from mirror.transcode import build_command, plan_transcode
from mirror.transcode.encoders import VideoEncoder


def test_renditions_are_checked_with_an_example() -> None:
    assert parse_renditions(["source", " 720P", "480p"]) == ("source", "720p", "480p")
    for bad, why in [
        (["source", "720"], "not a rendition"),
        (["source", "721p"], "not a rendition"),
        (["720p", "480p"], "must include `source`"),
        (["source", "480p", "480p"], "more than once"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_renditions(bad)


def test_a_bad_setting_stops_start_up_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MIRROR_RENDITIONS", "source,720")
    with pytest.raises(ConfigError, match="MIRROR_RENDITIONS"):
        load_settings()


def test_no_rung_is_as_large_as_the_source_and_the_tallest_comes_first() -> None:
    names = ("source", "480p", "1080p", "720p")
    assert rungs_below(names, 720) == (Rung("480p", 480),)
    assert [r.name for r in rungs_below(names, 2160)] == ["1080p", "720p", "480p"]
    assert rungs_below(names, None) == ()
    assert Rung("720p", 720).maxrate_kbps == 2667


def _plan(renditions: tuple[str, ...], encoder: VideoEncoder = "libx264"):  # type: ignore[no-untyped-def]
    video = MediaStream(index=0, type="Video", codec="h264", frame_rate=25.0, height=1080)
    item = MediaItem("a" * 32, "x", "Movie", "mkv", 1, 10.0, (video,))
    return plan_transcode(item, Path("/w"), Path("/w/s.mkv"), output_format="hls",
                          renditions=renditions, video_encoder=encoder)  # fmt: skip


def test_the_default_keeps_todays_one_video_and_command() -> None:
    plan = _plan(("source",))
    assert [v.relative_path for v in plan.videos] == ["video.mp4"]
    command = build_command(plan, "ffmpeg")
    assert "-filter_complex" not in command and "-sc_threshold" not in command


def test_a_ladder_writes_each_rendition_under_video() -> None:
    plan = _plan(("source", "720p", "480p"))
    assert [v.relative_path for v in plan.videos] == [
        "video/source.mp4",
        "video/720p.mp4",
        "video/480p.mp4",
    ]
    assert [v.codec for v in plan.videos] == ["copy", "libx264", "libx264"]


def test_the_rungs_are_encoded_by_the_chosen_encoder() -> None:
    """MIRROR_VIDEO_ENCODER reaches every rung: its codec, its hand-over after the
    rung's scale (VAAPI uploads the frames, its device opened before the input), `-g`
    for every encoder and x264's scene cuts off only where x264 encodes."""
    vaapi = build_command(_plan(("source", "720p", "480p"), "h264_vaapi"), "ffmpeg")
    assert vaapi.count("h264_vaapi") == 2 and "-sc_threshold" not in vaapi
    assert vaapi.index("-vaapi_device") < vaapi.index("-i")
    graph = vaapi[vaapi.index("-filter_complex") + 1]
    assert graph.count("hwupload") == 2 and graph.index("scale") < graph.index("hwupload")
    assert vaapi.count("-g") == 2
    x264 = build_command(_plan(("source", "720p", "480p")), "ffmpeg")
    assert x264.count("-sc_threshold") == 2 and "hwupload" not in " ".join(x264)
    assert "-vaapi_device" not in x264


def _job(video: dict[str, Any]) -> JobRecord:
    now = datetime.now(UTC)
    return JobRecord(
        id=uuid.uuid4(), item_id="a" * 32, status="done", priority=0, attempts=1,
        max_attempts=3, run_after=now, worker_id=None, lease_token=None, taken_at=None,
        heartbeat_at=None, heartbeat_data=None, video_key=video["key"], audio_keys=[],
        error=None, created_at=now, updated_at=now, finished_at=now, video=video,
    )  # fmt: skip


def _facts(key: str, name: str, height: int) -> dict[str, Any]:
    return {"key": key, "rendition": name, "size": height * 10, "sha256": f"{height:064x}",
            "codec": "h264", "width": height * 16 // 9, "height": height,
            "duration_s": 4.0}  # fmt: skip


def test_every_rendition_is_in_the_manifest_the_restored_row_and_verify() -> None:
    video: dict[str, Any] = {
        **_facts("p/i/video/source.mp4", "source", 1080),
        "renditions": [_facts("p/i/video/720p.mp4", "720p", 720)],
    }
    manifest = build_manifest(
        item_id="a" * 32, name="x", source={}, video=video, audio=[], job_id=uuid.uuid4(),
        attempt=1, mirrored_at=datetime.now(UTC), mirror_version="0", ffmpeg_version=None,
    )  # fmt: skip
    outputs = [(o["kind"], o["key"], o["rendition"]) for o in manifest["outputs"]]
    assert outputs == [
        ("video", "p/i/video/source.mp4", "source"),
        ("video", "p/i/video/720p.mp4", "720p"),
    ]
    restored = restored_job(manifest, "p/i/manifest.json")
    assert restored.video == video
    assert manifest_differences(manifest, item_id="a" * 32, video=restored.video, audio=[]) == []
    job = _job(video)
    assert [e["key"] for e in expected_objects(job)] == [
        "p/i/video/source.mp4",
        "p/i/video/720p.mp4",
    ]
