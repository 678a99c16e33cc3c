"""Issue 19 point 2: where each stream starts, from `ffmpeg -i`, decides copy or re-encode.

ffmpeg prints a stream's `start` only when it is not the file's; its clock starts at the
file's start. A copied track's file starts at its own first timestamp, so AAC is copied
only when it starts with the video; otherwise it is re-encoded and padded to the video.
"""

from __future__ import annotations

from pathlib import Path

from mirror.domain.item import MediaItem
from mirror.transcode.plan import MAX_COPY_START_GAP_S, plan_transcode
from mirror.transcode.probe import parse_probe

# `ffmpeg -hide_banner -i` of mirror.testing.fidelity_samples.delayed_audio (ffmpeg 9.0).
DELAYED_AUDIO = """\
Input #0, matroska,webm, from 'delayed.mkv':
  Duration: 00:00:03.02, start: 0.000000, bitrate: 19 kb/s
  Stream #0:0: Video: h264 (High), yuv420p(tv, progressive), 320x240 [SAR 1:1 DAR 4:3], \
24 fps, 24 tbr, 1k tbn
  Stream #0:1(eng): Audio: aac (LC), 48000 Hz, stereo, fltp, start 0.480000
"""
# An MPEG-TS whose clock starts at 1.4 s, audio 20 ms before the video.
TS_AUDIO_FIRST = """\
Input #0, mpegts, from 'x.ts':
  Duration: 00:00:10.00, start: 1.400000, bitrate: 1000 kb/s
  Stream #0:0[0x100]: Video: h264 (High) ([27][0][0][0] / 0x001B), yuv420p(tv, progressive), \
1920x1080, 25 fps, 25 tbr, 90k tbn, start 1.420000
  Stream #0:1[0x101](eng): Audio: aac (LC) ([15][0][0][0] / 0x000F), 48000 Hz, stereo, fltp
"""

WORK = Path("/work/item")


def plan_of(listing: str) -> tuple[float | None, str, float | None]:
    probe = parse_probe(listing)
    item = MediaItem(
        id="a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21",
        name="Sample",
        type="Movie",
        container="mkv",
        size=1000,
        duration_s=10.0,
        streams=tuple(s.to_media_stream() for s in probe.streams),
    )
    plan = plan_transcode(item, WORK, WORK / "source.mkv", probe=probe, output_format="hls")
    (track,) = plan.audio
    return probe.stream_start_s(probe.streams[1]), track.codec, track.video_start_s


def test_a_stream_start_is_read_where_ffmpeg_prints_one() -> None:
    probed = parse_probe(DELAYED_AUDIO)

    video, audio = probed.streams
    assert (probed.start_s, video.start_s, audio.start_s) == (0.0, None, 0.48)
    assert (probed.stream_start_s(video), probed.stream_start_s(audio)) == (0.0, 0.48)


def test_aac_that_starts_after_the_video_is_reencoded_and_padded_to_it() -> None:
    start, codec, video_start = plan_of(DELAYED_AUDIO)

    assert (start, codec, video_start) == (0.48, "aac", 0.0)


def test_starts_are_on_ffmpegs_clock_which_begins_at_the_files_start() -> None:
    start, codec, video_start = plan_of(TS_AUDIO_FIRST)

    # The audio starts the file (0 on ffmpeg's clock), the video 20 ms later.
    assert start == 0.0
    assert video_start is not None and abs(video_start - 0.02) < 1e-9
    assert codec == "aac" and MAX_COPY_START_GAP_S < 0.02


def test_aac_that_starts_with_the_video_is_copied_untouched() -> None:
    listing = DELAYED_AUDIO.replace(", start 0.480000", ", start 0.005000")

    start, codec, video_start = plan_of(listing)

    assert (start, codec, video_start) == (0.005, "copy", None)
