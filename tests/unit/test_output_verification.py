"""Every output is read back and checked before upload (pure part: the checks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mirror.domain.errors import PermanentError
from mirror.domain.item import MediaItem, MediaStream
from mirror.transcode import plan_transcode
from mirror.transcode.probe import ProbedFile, ProbedStream
from mirror.transcode.verify import check_output, duration_tolerance

PLAN = plan_transcode(
    MediaItem(
        id="a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21", name="Movie", type="Movie", container="mkv",
        size=1, duration_s=600.0,
        streams=(
            MediaStream(index=0, type="Video", codec="hevc"),
            MediaStream(index=1, type="Audio", codec="ac3", language="eng"),
        ),
    ),
    Path("/work/out"),
    Path("/work/source.mkv"),
)  # fmt: skip
H264 = ProbedStream(0, "Video", "h264", width=1920, height=1080)
AAC = ProbedStream(0, "Audio", "aac", channels=6)


def test_good_outputs_give_their_facts() -> None:
    video = check_output(PLAN.video, ProbedFile((H264,), 600.2), 600.0)
    audio = check_output(PLAN.audio[0], ProbedFile((AAC,), 599.9), 600.0)

    assert video.video_json("p/x/video.mp4") == {
        "key": "p/x/video.mp4", "codec": "h264", "width": 1920, "height": 1080,
        "duration_s": 600.2,
    }  # fmt: skip
    assert (audio.codec, audio.duration_s) == ("aac", 599.9)


@pytest.mark.parametrize(
    ("streams", "message"),
    [
        ((AAC,), "video.mp4 must hold exactly one video stream, it holds audio (aac)"),
        ((H264, AAC), "video.mp4 must hold exactly one video stream, it holds video (h264), audio"),
        ((), "video.mp4 must hold exactly one video stream, it holds nothing"),
        (
            (ProbedStream(0, "Video", "png", attached_pic=True),),
            "video.mp4 must hold exactly one video stream, it holds cover art (png)",
        ),
        ((ProbedStream(0, "Video", "hevc"),), "video.mp4 holds hevc video, the plan says h264"),
    ],
)
def test_a_wrong_video_output_is_named_with_what_it_holds(
    streams: tuple[ProbedStream, ...], message: str
) -> None:
    with pytest.raises(PermanentError, match=re.escape(message)):
        check_output(PLAN.video, ProbedFile(streams, 600.0), 600.0)


def test_audio_output_must_be_one_aac_stream() -> None:
    with pytest.raises(PermanentError, match=r"1-eng\.m4a holds ac3 audio, the plan says aac"):
        check_output(PLAN.audio[0], ProbedFile((ProbedStream(0, "Audio", "ac3"),), 600.0), 600.0)


@pytest.mark.parametrize(
    ("source", "output", "ok"),
    [
        (600.0, 606.0, True),  # 1 % of 10 minutes is 6 s
        (600.0, 593.9, False),
        (4.0, 4.9, True),  # at least one second for short items
        (4.0, 2.9, False),
    ],
)
def test_durations_must_be_within_one_second_or_one_percent(
    source: float, output: float, ok: bool
) -> None:
    probed = ProbedFile((AAC,), output)
    if ok:
        check_output(PLAN.audio[0], probed, source)
    else:
        with pytest.raises(PermanentError, match=r"audio/1-eng.m4a lasts .*s, the source"):
            check_output(PLAN.audio[0], probed, source)


def test_tolerance_and_missing_durations() -> None:
    assert duration_tolerance(10.0) == 1.0
    assert duration_tolerance(7200.0) == 72.0
    with pytest.raises(PermanentError, match=r"video\.mp4 has no duration"):
        check_output(PLAN.video, ProbedFile((H264,), None), 600.0)
    assert check_output(PLAN.video, ProbedFile((H264,), None), None).duration_s is None
