from __future__ import annotations

import pytest

from mirror.domain.progress import Progress
from mirror.transcode import FfmpegProgressParser
from mirror.transcode.progress_lines import parse_clock, parse_speed_factor

# Shaped like ffmpeg's `-progress` output for a video + audio run (ffmpeg 7-9).
FIRST_BLOCK = """\
frame=67
fps=0.00
stream_0_0_q=28.0
bitrate=   0.1kbits/s
total_size=48
out_time_us=3136000
out_time_ms=3136000
out_time=00:00:03.136000
dup_frames=0
drop_frames=0
speed=27.9x
progress=continue
"""

LAST_BLOCK = """\
frame=101
fps=45.20
bitrate=  46.7kbits/s
total_size=20418
out_time_us=4020000
out_time_ms=4020000
out_time=00:00:04.020000
dup_frames=0
drop_frames=0
speed=25.9x
progress=end
"""

START_BLOCK = """\
frame=0
fps=0.00
bitrate=N/A
total_size=0
out_time_us=N/A
out_time_ms=N/A
out_time=N/A
speed=N/A
progress=continue
"""


def feed(parser: FfmpegProgressParser, text: str) -> list[Progress]:
    results = [parser.feed(line) for line in text.splitlines(keepends=True)]
    return [r for r in results if r is not None]


def test_one_progress_per_block_at_its_end() -> None:
    parser = FfmpegProgressParser(frames_total=100, duration_s=4.0)

    lines = FIRST_BLOCK.splitlines()
    assert [parser.feed(line) for line in lines[:-1]] == [None] * (len(lines) - 1)
    progress = parser.feed(lines[-1])

    assert progress == Progress(
        phase="transcode",
        frames_done=67,
        frames_total=100,
        out_time_s=3.136,
        duration_s=4.0,
        speed_factor=27.9,
    )
    assert not parser.finished


def test_video_percent_follows_frames_when_out_time_runs_ahead() -> None:
    parser = FfmpegProgressParser(frames_total=100, duration_s=4.0)

    (progress,) = feed(parser, FIRST_BLOCK)

    # out_time says 78 % (the audio is ahead); the video has 67 of 100 frames.
    assert progress.out_time_s is not None and progress.out_time_s / 4.0 > 0.78
    assert progress.percent == 67.0


def test_na_values_are_unknown_at_the_start() -> None:
    parser = FfmpegProgressParser(frames_total=None, duration_s=None)

    (progress,) = feed(parser, START_BLOCK)

    assert progress.frames_done == 0
    assert progress.out_time_s is None
    assert progress.speed_factor is None
    assert progress.percent is None


def test_na_after_a_known_value_keeps_the_last_known_value() -> None:
    parser = FfmpegProgressParser(frames_total=100, duration_s=4.0)
    feed(parser, FIRST_BLOCK)

    (progress,) = feed(
        parser, "frame=N/A\nout_time_us=N/A\nout_time=N/A\nspeed=N/A\nprogress=continue\n"
    )

    assert (progress.frames_done, progress.out_time_s, progress.speed_factor) == (67, 3.136, 27.9)


def test_end_block_makes_the_frame_count_exact() -> None:
    parser = FfmpegProgressParser(frames_total=100, duration_s=4.02)

    first, last = feed(parser, FIRST_BLOCK + LAST_BLOCK)

    assert first.frames_total == 100
    assert (last.frames_done, last.frames_total) == (101, 101)
    assert last.percent == 100.0
    assert parser.finished


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["out_time_us=2500000", "out_time_ms=9", "out_time=00:00:09.000000"], 2.5),
        (["out_time_us=N/A", "out_time_ms=1500000", "out_time=00:00:09.000000"], 1.5),
        (["out_time=01:02:03.500000"], 3723.5),
        (["out_time_us=-9223372036854775807", "out_time=-577014:32:22.775808"], None),
        (["out_time=N/A"], None),
    ],
)
def test_out_time_sources_in_order_of_precision(lines: list[str], expected: float | None) -> None:
    parser = FfmpegProgressParser(frames_total=None, duration_s=None)

    (progress,) = feed(parser, "\n".join([*lines, "progress=continue"]))

    assert progress.out_time_s == expected


def test_speed_is_trimmed_and_other_noise_ignored() -> None:
    parser = FfmpegProgressParser(frames_total=None, duration_s=None)

    (progress,) = feed(parser, "\n  \nnot a key value line\nspeed=   1x\r\nprogress=continue\r\n")

    assert progress.speed_factor == 1.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [("27.9x", 27.9), ("1.02e+03x", 1020.0), ("0x", 0.0), ("N/A", None), ("fast", None),
     ("-1x", None), ("nanx", None), ("", None)],
)  # fmt: skip
def test_speed_factor_is_a_number(value: str, expected: float | None) -> None:
    assert parse_speed_factor(value) == expected


@pytest.mark.parametrize("value", ["", "N/A", "1:2", "aa:bb:cc", "-00:00:01.0"])
def test_unparsable_clock_is_unknown(value: str) -> None:
    assert parse_clock(value) is None
