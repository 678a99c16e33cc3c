"""Shapes every real Jellyfin library holds, through the worker in this process (issue 9).

Worker + run_attempt + MirrorPipeline with real ffmpeg; Jellyfin, S3 and the queue are
the in-memory fakes (checked against the real adapters in test_fake_conformance.py).
The outputs are read back from the store with ffmpeg. Moved from tests/e2e (same
assertions, without starting `mirror` processes).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia
from mirror.domain.item import MediaStream
from mirror.domain.jobs import JobRecord
from mirror.testing.library_samples import ShapeKind, sidecar_layout
from tests.fixtures.inprocess import InProcess
from tests.fixtures.stack import mirrored_keys

Shapes = Callable[[ShapeKind], SampleMedia]


def mirror_one(
    inproc: InProcess, sample: SampleMedia, streams: tuple[MediaStream, ...] | None = None
) -> tuple[str, JobRecord]:
    """Serve `sample` (with Jellyfin's list, or `streams`), run one burst, return the job."""
    item = inproc.add(
        sample, sample.path.stem, streams=sample.streams if streams is None else streams
    )
    inproc.enqueue(item)
    inproc.run_burst()
    assert list(inproc.work_dir.iterdir()) == []
    return item, inproc.job(item)


def test_sidecars_listed_first_do_not_shift_the_files_streams(
    inproc: InProcess, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    layout = sidecar_layout(tmp_path / "library" / "Movie", sample_h264_aac)

    item, job = mirror_one(inproc, layout.sample)

    assert job.status == "done", job.error
    video = inproc.read_back(f"mirror/{item}/video.mp4", tmp_path)
    assert [(s.type, s.codec, s.width) for s in video.streams] == [("Video", "h264", 320)]
    assert job.audio_keys is not None
    assert [(e["key"], e["stream_index"], e["title"]) for e in job.audio_keys] == [
        (f"mirror/{item}/audio/1-eng.m4a", 1, "English Stereo"),
        (f"mirror/{item}/audio/2-fra.m4a", 2, "Français \u2013 commentaire"),
    ]
    for entry, channels in zip(job.audio_keys, (2, 1), strict=True):
        audio = inproc.read_back(entry["key"], tmp_path)
        assert [(s.type, s.codec, s.channels) for s in audio.streams] == [
            ("Audio", "aac", channels)
        ]
    # Text subtitles are mirrored: the file's own (its index 3) and the sidecar .srt,
    # fetched as WebVTT from Jellyfin by Jellyfin's Index (0); the .mka sidecar is skipped.
    assert [(e["key"], e["external"]) for e in job.subtitle_keys or []] == [
        (f"mirror/{item}/subtitles/3-eng.vtt", False),
        (f"mirror/{item}/subtitles/0-eng.vtt", True),
    ]
    sidecar = inproc.fake_store.body(f"mirror/{item}/subtitles/0-eng.vtt")
    assert sidecar.startswith(b"WEBVTT") and b"Sidecar subtitle" in sidecar
    skipped = {(s["index"], s["kind"], s.get("path")) for s in job.skipped_streams or []}
    assert skipped == {(1, "Audio", str(layout.sidecars[1]))}
    assert all(
        s["reason"].startswith("external file") for s in job.skipped_streams or [] if "path" in s
    )
    assert inproc.fake_store.object_keys() == mirrored_keys(job)


def test_cover_art_is_skipped_and_the_real_video_is_mirrored(
    inproc: InProcess, library_shape: Shapes, tmp_path: Path
) -> None:
    item, job = mirror_one(inproc, library_shape("cover_art_mp4"))

    assert job.status == "done", job.error
    video = inproc.read_back(f"mirror/{item}/video.mp4", tmp_path)
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
    kind: ShapeKind, inproc: InProcess, library_shape: Shapes, tmp_path: Path
) -> None:
    item, job = mirror_one(inproc, library_shape(kind))

    assert job.status == "done", job.error
    (video,) = inproc.read_back(f"mirror/{item}/video.mp4", tmp_path).streams
    assert (video.codec, video.pixel_format, video.bit_depth) == ("h264", "yuv420p", 8)
    assert video.profile in ("High", "Main", "Constrained Baseline")
    assert job.video is not None and job.video["codec"] == "h264"


def test_surround_ac3_becomes_six_channel_aac(
    inproc: InProcess, library_shape: Shapes, tmp_path: Path
) -> None:
    item, job = mirror_one(inproc, library_shape("ac3_51"))

    assert job.status == "done", job.error
    assert job.audio_keys is not None
    entry, stereo = job.audio_keys  # the 5.1 track, then the stereo track made beside it
    assert (entry["key"], entry["codec"]) == (f"mirror/{item}/audio/1-eng.m4a", "aac")
    assert (stereo["key"], stereo["codec"], stereo["stream_index"]) == (
        f"mirror/{item}/audio/1-eng-stereo.m4a",
        "aac",
        1,
    )
    for track, channels in ((entry, 6), (stereo, 2)):
        assert track["duration_s"] == pytest.approx(3.0, abs=0.2)
        (audio,) = inproc.read_back(track["key"], tmp_path).streams
        assert (audio.codec, audio.channels) == ("aac", channels)


def test_item_without_audio_is_done_with_no_audio_keys(
    inproc: InProcess, library_shape: Shapes
) -> None:
    _, job = mirror_one(inproc, library_shape("no_audio"))

    assert job.status == "done", job.error
    assert job.audio_keys == []
    assert job.video is not None and job.video["codec"] == "h264"
    assert inproc.fake_store.object_keys() == mirrored_keys(job)
    assert not [key for key in inproc.fake_store.object_keys() if "/audio/" in key]


def test_jellyfin_listing_more_audio_than_the_file_has_fails_naming_both(
    inproc: InProcess, library_shape: Shapes
) -> None:
    sample = library_shape("ac3_51")
    phantom = MediaStream(index=2, type="Audio", codec="aac", language="fra", channels=2)

    _, job = mirror_one(inproc, sample, streams=(*sample.streams, phantom))

    assert job.status == "failed"
    assert (
        job.error == "Jellyfin lists 2 audio streams, the file has 1: rescan the item in Jellyfin"
    )
    assert job.attempts == 1
    assert inproc.fake_store.object_keys() == []


def test_output_that_fails_verification_is_never_uploaded(
    inproc: InProcess, library_shape: Shapes
) -> None:
    # The audio track ends after 0.75 s of a 3 s video: ffmpeg writes a short .m4a happily.
    _, job = mirror_one(inproc, library_shape("short_audio"))

    assert job.status == "failed"
    assert job.error is not None
    assert job.error.startswith("verify: audio/1-eng.m4a lasts 0.")
    assert "the source 3.0" in job.error
    assert job.attempts == 1
    assert inproc.fake_store.object_keys() == []
