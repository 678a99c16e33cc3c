from __future__ import annotations

from pathlib import Path

import pytest

from mirror.domain.errors import PermanentError
from mirror.domain.item import MediaItem, MediaStream
from mirror.domain.naming import sanitize_language
from mirror.transcode import plan_transcode
from mirror.transcode.plan import count_frames

WORK = Path("/work/item")
SOURCE = WORK / "source.mkv"


def make_item(*streams: MediaStream, duration_s: float | None = 120.0) -> MediaItem:
    return MediaItem(
        id="a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21",
        name="Big Buck Bunny",
        type="Movie",
        container="mkv",
        size=1000,
        duration_s=duration_s,
        streams=streams,
    )


def video(index: int = 0, codec: str = "h264", fps: float | None = 25.0) -> MediaStream:
    return MediaStream(index=index, type="Video", codec=codec, frame_rate=fps)


def audio(index: int, codec: str = "aac", language: str | None = "eng") -> MediaStream:
    return MediaStream(index=index, type="Audio", codec=codec, language=language, title="T")


def test_auto_copies_h264_video_and_aac_audio() -> None:
    plan = plan_transcode(make_item(video(codec="h264"), audio(1, "aac")), WORK, SOURCE)

    assert plan.video.codec == "copy"
    assert (plan.video.preset, plan.video.crf) == (None, None)
    assert [(a.codec, a.bitrate) for a in plan.audio] == [("copy", None)]


def test_auto_reencodes_other_codecs_with_configured_quality() -> None:
    item = make_item(video(codec="mpeg4"), audio(1, "mp3"), audio(2, "eac3"))

    plan = plan_transcode(item, WORK, SOURCE, x264_preset="slow", x264_crf=20, audio_bitrate="192k")

    assert (plan.video.codec, plan.video.preset, plan.video.crf) == ("libx264", "slow", 20)
    assert [(a.codec, a.bitrate, a.source_codec) for a in plan.audio] == [
        ("aac", "192k", "mp3"),
        ("aac", "192k", "eac3"),
    ]


def test_codec_names_match_case_insensitively() -> None:
    plan = plan_transcode(make_item(video(codec="H264"), audio(1, "AAC")), WORK, SOURCE)

    assert plan.video.codec == "copy"
    assert plan.audio[0].codec == "copy"


def test_copy_setting_copies_whatever_the_source_codec() -> None:
    item = make_item(video(codec="mpeg4"), audio(1, "mp3"))

    plan = plan_transcode(item, WORK, SOURCE, video_codec="copy", audio_codec="copy")

    assert plan.video.codec == "copy"
    assert plan.audio[0].codec == "copy"


def test_explicit_encoders_reencode_even_fitting_sources() -> None:
    item = make_item(video(codec="h264"), audio(1, "aac"))

    plan = plan_transcode(item, WORK, SOURCE, video_codec="libx264", audio_codec="aac")

    assert (plan.video.codec, plan.video.preset, plan.video.crf) == ("libx264", "veryfast", 23)
    assert (plan.audio[0].codec, plan.audio[0].bitrate) == ("aac", "160k")


def test_outputs_are_named_by_index_and_language() -> None:
    item = make_item(
        video(index=0),
        audio(1, language="eng"),
        audio(2, language=None),
        audio(3, language="pt-BR"),
        audio(4, language="eng"),
    )

    plan = plan_transcode(item, WORK, SOURCE)

    assert plan.video.relative_path == "video.mp4"
    assert plan.video.path == WORK / "video.mp4"
    assert [a.relative_path for a in plan.audio] == [
        "audio/1-eng.m4a",
        "audio/2-und.m4a",
        "audio/3-ptbr.m4a",
        "audio/4-eng.m4a",
    ]
    assert [a.path for a in plan.audio] == [WORK / a.relative_path for a in plan.audio]


def test_audio_keeps_language_and_title_for_the_file_metadata() -> None:
    stream = MediaStream(
        index=2, type="Audio", codec="aac", language="fre", title="Français stéréo"
    )

    plan = plan_transcode(make_item(video(), stream), WORK, SOURCE)

    assert (plan.audio[0].language, plan.audio[0].title) == ("fre", "Français stéréo")
    assert plan.audio[0].stream_index == 2


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, "und"), ("", "und"), ("ENG", "eng"), ("zh-Hant", "zhhant"), ("../..", "und")],
)
def test_language_is_sanitized_for_file_names(raw: str | None, expected: str) -> None:
    assert sanitize_language(raw) == expected


def test_item_without_video_is_permanent_error() -> None:
    with pytest.raises(PermanentError, match="no video stream"):
        plan_transcode(make_item(audio(0)), WORK, SOURCE)


def test_item_without_audio_plans_video_only() -> None:
    plan = plan_transcode(make_item(video()), WORK, SOURCE)

    assert plan.audio == ()
    assert plan.outputs == (plan.video,)


def test_first_video_stream_is_used_and_subtitles_dropped() -> None:
    item = make_item(
        MediaStream(index=0, type="Subtitle", codec="subrip"),
        audio(1),
        video(index=2, codec="h264"),
        video(index=3, codec="mjpeg"),
        MediaStream(index=4, type="Data", codec="bin_data"),
    )

    plan = plan_transcode(item, WORK, SOURCE)

    assert plan.video.stream_index == 2
    assert [o.stream_index for o in plan.outputs] == [2, 1]


def test_frames_total_comes_from_duration_and_frame_rate() -> None:
    plan = plan_transcode(make_item(video(fps=23.976025), duration_s=5965.0), WORK, SOURCE)

    assert plan.frames_total == 143017
    assert plan.duration_s == 5965.0


def test_frames_total_unknown_without_frame_rate_or_duration() -> None:
    assert plan_transcode(make_item(video(fps=None)), WORK, SOURCE).frames_total is None
    assert plan_transcode(make_item(video(), duration_s=None), WORK, SOURCE).frames_total is None
    assert count_frames(0.0, 25.0) is None


def test_content_types() -> None:
    plan = plan_transcode(make_item(video(), audio(1)), WORK, SOURCE)

    assert plan.video.content_type == "video/mp4"
    assert plan.audio[0].content_type == "audio/mp4"


@pytest.mark.parametrize(
    ("codec", "pixel_format", "profile", "bit_depth", "copied"),
    [
        ("h264", "yuv420p", "High", 8, True),
        ("h264", "yuvj420p", "Main", 8, True),
        ("h264", "yuv420p", "Constrained Baseline", None, True),
        ("h264", None, None, None, True),  # nothing known against it
        ("h264", "yuv420p10le", "High 10", 10, False),
        ("h264", "yuv422p", "High 4:2:2", 8, False),
        ("h264", "yuv444p", "High 4:4:4 Predictive", 8, False),
        ("h264", None, None, 10, False),
        ("hevc", "yuv420p", "Main", 8, False),
        ("av1", "yuv420p", "Main", 8, False),
        ("vc1", "yuv420p", "Advanced", 8, False),
        ("mpeg2video", "yuv420p", "Main", 8, False),
    ],
)
def test_auto_copies_only_h264_that_plays_everywhere(
    codec: str, pixel_format: str | None, profile: str | None, bit_depth: int | None, copied: bool
) -> None:
    stream = MediaStream(
        index=0, type="Video", codec=codec, pixel_format=pixel_format, profile=profile,
        bit_depth=bit_depth,
    )  # fmt: skip

    plan = plan_transcode(make_item(stream), WORK, SOURCE)

    assert plan.video.codec == ("copy" if copied else "libx264")
    assert plan.video.expected_codec == (codec if copied else "h264")


@pytest.mark.parametrize(
    ("codec", "channels", "expected"),
    [
        ("aac", 2, ("copy", None)),
        ("aac", 6, ("aac", None)),  # 5.1 AAC may be configuration 0 + PCE: re-encoded
        ("aac", 8, ("aac", 6)),
        ("ac3", 6, ("aac", None)),
        ("eac3", 8, ("aac", 6)),
        ("dts", 8, ("aac", 6)),
        ("truehd", 8, ("aac", 6)),
        ("flac", 2, ("aac", None)),
        ("opus", 1, ("aac", None)),  # never upmixed
        ("mp3", 2, ("aac", None)),
    ],
)
def test_auto_audio_becomes_aac_with_at_most_six_channels(
    codec: str, channels: int, expected: tuple[str, int | None]
) -> None:
    stream = MediaStream(index=1, type="Audio", codec=codec, channels=channels)

    (track,) = plan_transcode(make_item(video(), stream), WORK, SOURCE).audio

    assert (track.codec, track.channels) == expected
    assert track.expected_codec == (codec if expected[0] == "copy" else "aac")
