from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mirror.demo.media import (
    SampleMedia,
    corrupt_copy,
    describe_streams,
    generate_sample,
    probe_duration,
)
from mirror.testing.library_samples import ShapeKind, sidecar_layout


@pytest.mark.parametrize("fixture", ["sample_h264_aac", "sample_mpeg4_mp3"])
def test_sample_streams_are_described_exactly(
    fixture: str, request: pytest.FixtureRequest, ffmpeg_path: str
) -> None:
    sample: SampleMedia = request.getfixturevalue(fixture)

    described = [s.to_media_stream() for s in describe_streams(sample.path, ffmpeg_path)]

    assert described == list(sample.streams)
    assert sample.size == sample.path.stat().st_size
    assert sample.container == "mkv"
    assert sample.duration_s == pytest.approx(4.0, abs=0.1)


def test_samples_have_two_languages_one_non_ascii_title_and_a_subtitle(
    sample_h264_aac: SampleMedia, sample_mpeg4_mp3: SampleMedia
) -> None:
    for sample, codecs in (
        (sample_h264_aac, ("h264", "aac")),
        (sample_mpeg4_mp3, ("mpeg4", "mp3")),
    ):
        kinds = [(s.type, s.codec) for s in sample.streams]
        assert kinds == [
            ("Video", codecs[0]),
            ("Audio", codecs[1]),
            ("Audio", codecs[1]),
            ("Subtitle", "subrip"),
        ]
        first, second = (s for s in sample.streams if s.type == "Audio")
        assert first.language != second.language
        assert second.title is not None and not second.title.isascii()


def test_a_short_sample_is_fast_to_make(tmp_path: Path, ffmpeg_path: str) -> None:
    started = time.monotonic()

    sample = generate_sample(tmp_path / "quick.mkv", "h264_aac", ffmpeg_path=ffmpeg_path)

    assert time.monotonic() - started < 2.0
    assert sample.path.stat().st_size > 0


def test_custom_size_and_rate_are_reported(tmp_path: Path, ffmpeg_path: str) -> None:
    sample = generate_sample(
        tmp_path / "small.mkv", "mpeg4_mp3", duration_s=2.0, width=160, height=96, fps=10,
        ffmpeg_path=ffmpeg_path,
    )  # fmt: skip

    (video,) = (s for s in describe_streams(sample.path, ffmpeg_path) if s.type == "Video")
    assert (video.width, video.height, video.frame_rate) == (160, 96, 10.0)
    assert sample.duration_s == pytest.approx(2.0, abs=0.1)


def test_sample_becomes_the_item_jellyfin_would_describe(sample_h264_aac: SampleMedia) -> None:
    item = sample_h264_aac.to_item("a" * 32, name="Sample")

    assert item.size == sample_h264_aac.size
    assert item.duration_s == sample_h264_aac.duration_s
    assert [s.index for s in item.audio_streams] == [1, 2]


def test_corrupt_copy_has_the_same_size_and_cannot_be_opened(
    sample_h264_aac: SampleMedia, tmp_path: Path, ffmpeg_path: str
) -> None:
    broken = corrupt_copy(sample_h264_aac.path, tmp_path / "broken.mkv")

    assert broken.stat().st_size == sample_h264_aac.size
    assert describe_streams(broken, ffmpeg_path) == []
    assert probe_duration(broken, ffmpeg_path) is None
    result = subprocess.run(
        [ffmpeg_path, "-nostdin", "-v", "error", "-i", str(broken), "-f", "null", "-"],
        capture_output=True,
        check=False,
    )
    assert result.returncode != 0
    assert b"Invalid data found when processing input" in result.stderr


SHAPES = ["cover_art_mp4", "hevc", "h264_10bit", "ac3_51", "no_audio", "short_audio"]


@pytest.mark.parametrize("kind", SHAPES)
def test_library_shapes_are_listed_exactly_as_the_file_holds_them(
    kind: ShapeKind, library_shape: Callable[[ShapeKind], SampleMedia], ffmpeg_path: str
) -> None:
    sample = library_shape(kind)

    described = [s.to_media_stream() for s in describe_streams(sample.path, ffmpeg_path)]

    assert described == list(sample.streams)
    assert sample.duration_s == pytest.approx(3.0, abs=0.1)


def test_cover_art_is_an_embedded_image_after_the_tracks(
    library_shape: Callable[[ShapeKind], SampleMedia],
) -> None:
    streams = library_shape("cover_art_mp4").streams

    assert [(s.index, s.type) for s in streams] == [
        (0, "Video"),
        (1, "Audio"),
        (2, "EmbeddedImage"),
    ]


def test_sidecar_layout_lists_sidecars_first_and_shifts_the_files_streams(
    sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    layout = sidecar_layout(tmp_path / "Movie", sample_h264_aac)

    streams = layout.sample.streams
    assert [(s.index, s.type, s.is_external) for s in streams] == [
        (0, "Subtitle", True),
        (1, "Audio", True),
        (2, "Video", False),
        (3, "Audio", False),
        (4, "Audio", False),
        (5, "Subtitle", False),
    ]
    assert [Path(s.path or "").name for s in streams[:2]] == [
        "Movie.en.srt",
        "Movie.commentary.mka",
    ]
    assert all(path.parent == layout.sample.path.parent for path in layout.sidecars)
    assert layout.sample.path.name == "Movie.mkv"
