"""Shapes every real Jellyfin library holds, through a real `mirror worker` (issue 9).

Each test runs the whole stack (Postgres, the Jellyfin stand-in, moto's S3, ffmpeg) and
reads the outputs back from S3 with ffmpeg. Each fails on the code before issue 9:
Jellyfin's Index was taken as ffmpeg's (sidecars shifted every map), 10-bit H.264 was
copied, nothing was skipped or verified, and a short output was marked done.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mirror.db.repository import JobRecord
from mirror.demo.media import SampleMedia
from mirror.item import MediaStream
from mirror.testing.library_samples import ShapeKind, sidecar_layout
from mirror.transcode.probe import ProbedFile, probe_file
from tests.fixtures.stack import Stack, mirrored_keys

Shapes = Callable[[ShapeKind], SampleMedia]


def mirror_one(
    stack: Stack, sample: SampleMedia, streams: tuple[MediaStream, ...] | None = None
) -> tuple[str, JobRecord]:
    """Serve `sample` (with Jellyfin's list, or `streams`), run one burst worker, return the job."""
    item = stack.jellyfin.add_item(
        sample.path,
        name=sample.path.stem,
        streams=sample.streams if streams is None else streams,
        duration_s=sample.duration_s,
    )
    assert stack.mirror("enqueue", item).returncode == 0
    result = stack.mirror("worker", "--burst")
    assert result.returncode == 0, result.stderr[-3000:]
    assert list(stack.work_dir.iterdir()) == []
    return item, stack.job(item)


def read_back(stack: Stack, key: str, tmp_path: Path, ffmpeg_path: str) -> ProbedFile:
    local = stack.download_object(key, tmp_path / "s3" / key)
    return probe_file(local, ffmpeg_path)


def test_sidecars_listed_first_do_not_shift_the_files_streams(
    stack: Stack, sample_h264_aac: SampleMedia, ffmpeg_path: str, tmp_path: Path
) -> None:
    layout = sidecar_layout(tmp_path / "library" / "Movie", sample_h264_aac)

    item, job = mirror_one(stack, layout.sample)

    assert job.status == "done", job.error
    video = read_back(stack, f"mirror/{item}/video.mp4", tmp_path, ffmpeg_path)
    assert [(s.type, s.codec, s.width) for s in video.streams] == [("Video", "h264", 320)]
    assert job.audio_keys is not None
    assert [(e["key"], e["stream_index"], e["title"]) for e in job.audio_keys] == [
        (f"mirror/{item}/audio/1-eng.m4a", 1, "English Stereo"),
        (f"mirror/{item}/audio/2-fra.m4a", 2, "Français \u2013 commentaire"),
    ]
    for entry, channels in zip(job.audio_keys, (2, 1), strict=True):
        audio = read_back(stack, entry["key"], tmp_path, ffmpeg_path)
        assert [(s.type, s.codec, s.channels) for s in audio.streams] == [
            ("Audio", "aac", channels)
        ]
    # Text subtitles are mirrored: the file's own (its index 3) and the sidecar .srt,
    # fetched as WebVTT from Jellyfin by Jellyfin's Index (0); the .mka sidecar is skipped.
    assert [(e["key"], e["external"]) for e in job.subtitle_keys or []] == [
        (f"mirror/{item}/subtitles/3-eng.vtt", False),
        (f"mirror/{item}/subtitles/0-eng.vtt", True),
    ]
    sidecar = read_object(stack, f"mirror/{item}/subtitles/0-eng.vtt")
    assert sidecar.startswith(b"WEBVTT") and b"Sidecar subtitle" in sidecar
    skipped = {(s["index"], s["kind"], s.get("path")) for s in job.skipped_streams or []}
    assert skipped == {(1, "Audio", str(layout.sidecars[1]))}
    assert all(
        s["reason"].startswith("external file") for s in job.skipped_streams or [] if "path" in s
    )
    assert stack.object_keys() == mirrored_keys(job)


def read_object(stack: Stack, key: str) -> bytes:
    body: bytes = stack.s3.client.get_object(Bucket=stack.s3.bucket, Key=key)["Body"].read()
    return body


def test_cover_art_is_skipped_and_the_real_video_is_mirrored(
    stack: Stack, library_shape: Shapes, ffmpeg_path: str, tmp_path: Path
) -> None:
    item, job = mirror_one(stack, library_shape("cover_art_mp4"))

    assert job.status == "done", job.error
    video = read_back(stack, f"mirror/{item}/video.mp4", tmp_path, ffmpeg_path)
    assert [(s.codec, s.width, s.attached_pic) for s in video.streams] == [("h264", 320, False)]
    assert job.video is not None
    assert {k: job.video[k] for k in ("key", "codec", "width", "height")} == {
        "key": f"mirror/{item}/video.mp4",
        "codec": "h264",
        "width": 320,
        "height": 240,
    }
    assert job.video["duration_s"] == pytest.approx(3.0, abs=0.1)
    assert job.skipped_streams == [
        {
            "index": 2,
            "kind": "EmbeddedImage",
            "codec": "png",
            "language": None,
            "reason": "embedded cover art (png), not the video",
        }
    ]


@pytest.mark.parametrize("kind", ["hevc", "h264_10bit"])
def test_video_that_does_not_play_everywhere_becomes_8bit_h264(
    kind: ShapeKind, stack: Stack, library_shape: Shapes, ffmpeg_path: str, tmp_path: Path
) -> None:
    item, job = mirror_one(stack, library_shape(kind))

    assert job.status == "done", job.error
    (video,) = read_back(stack, f"mirror/{item}/video.mp4", tmp_path, ffmpeg_path).streams
    assert (video.codec, video.pixel_format, video.bit_depth) == ("h264", "yuv420p", 8)
    assert video.profile in ("High", "Main", "Constrained Baseline")
    assert job.video is not None and job.video["codec"] == "h264"


def test_surround_ac3_becomes_six_channel_aac(
    stack: Stack, library_shape: Shapes, ffmpeg_path: str, tmp_path: Path
) -> None:
    item, job = mirror_one(stack, library_shape("ac3_51"))

    assert job.status == "done", job.error
    assert job.audio_keys is not None
    [entry] = job.audio_keys
    assert (entry["key"], entry["codec"]) == (f"mirror/{item}/audio/1-eng.m4a", "aac")
    assert entry["duration_s"] == pytest.approx(3.0, abs=0.2)
    (audio,) = read_back(stack, entry["key"], tmp_path, ffmpeg_path).streams
    assert (audio.codec, audio.channels) == ("aac", 6)


def test_item_without_audio_is_done_with_no_audio_keys(stack: Stack, library_shape: Shapes) -> None:
    _, job = mirror_one(stack, library_shape("no_audio"))

    assert job.status == "done", job.error
    assert job.audio_keys == []
    assert job.video is not None and job.video["codec"] == "h264"
    assert stack.object_keys() == mirrored_keys(job)
    assert not [key for key in stack.object_keys() if "/audio/" in key]


def test_jellyfin_listing_more_audio_than_the_file_has_fails_naming_both(
    stack: Stack, library_shape: Shapes
) -> None:
    sample = library_shape("ac3_51")
    phantom = MediaStream(index=2, type="Audio", codec="aac", language="fra", channels=2)

    _, job = mirror_one(stack, sample, streams=(*sample.streams, phantom))

    assert job.status == "failed"
    assert (
        job.error == "Jellyfin lists 2 audio streams, the file has 1: rescan the item in Jellyfin"
    )
    assert job.attempts == 1
    assert stack.object_keys() == []


def test_output_that_fails_verification_is_never_uploaded(
    stack: Stack, library_shape: Shapes
) -> None:
    # The audio track ends after 0.75 s of a 3 s video: ffmpeg writes a short .m4a happily.
    _, job = mirror_one(stack, library_shape("short_audio"))

    assert job.status == "failed"
    assert job.error is not None
    assert job.error.startswith("verify: audio/1-eng.m4a lasts 0.")
    assert "the source 3.0" in job.error
    assert job.attempts == 1
    assert stack.object_keys() == []
    # The outputs' multipart uploads, begun before ffmpeg ran, were aborted.
    assert stack.s3.multipart_uploads() == []
