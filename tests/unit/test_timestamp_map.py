"""The WebVTT X-TIMESTAMP-MAP: the video's first presentation time, and the header itself."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from mirror.domain.errors import PermanentError
from mirror.domain.item import MediaItem
from mirror.hls.fragments import read_fragment_index
from mirror.hls.timestamp_map import (
    first_presentation_s,
    first_presentation_ticks,
    with_timestamp_map,
)
from mirror.transcode.plan import plan_transcode
from mirror.transcode.probe import parse_probe


def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def _full(kind: bytes, version: int, flags: int, payload: bytes) -> bytes:
    return _box(kind, bytes([version]) + flags.to_bytes(3, "big") + payload)


def _moof(decode_time: int, samples: list[tuple[int, int]] | None, version: int = 0) -> bytes:
    """One traf: tfdt, then a trun with (duration, composition offset) per sample, or with
    durations only (from the tfhd default of 512) when `samples` is None."""
    tfhd = _full(b"tfhd", 0, 0x020008, struct.pack(">II", 1, 512))
    tfdt = _full(b"tfdt", 1, 0, struct.pack(">Q", decode_time))
    if samples is None:
        trun = _full(b"trun", 0, 0x201, struct.pack(">Ii", 3, 0) + struct.pack(">III", 9, 9, 9))
    else:
        offset = ">i" if version else ">I"
        rows = b"".join(
            struct.pack(">II", d, 100) + struct.pack(offset, c) for d, c in samples
        )  # duration, size, composition offset
        trun = _full(b"trun", version, 0xB01, struct.pack(">Ii", len(samples), 0) + rows)
    traf = _box(b"traf", tfhd + tfdt + trun)
    return _box(b"moof", _full(b"mfhd", 0, 0, struct.pack(">I", 1)) + traf)


def test_first_presentation_is_the_earliest_decode_time_plus_composition_offset() -> None:
    # I P B B as x264 orders them: the I frame is shown after two frames of reorder delay.
    moof = _moof(10_000, [(512, 1024), (512, 2560), (512, 512), (512, 1024)])
    assert first_presentation_ticks(moof, 0) == 10_000 + 1024
    # Signed offsets (trun version 1): a frame may be shown before its decode time.
    signed = _moof(10_000, [(512, 0), (512, 1536), (512, -512), (512, 0)], version=1)
    assert first_presentation_ticks(signed, 0) == 10_000
    # No composition offsets: every frame is shown at its decode time.
    assert first_presentation_ticks(_moof(4_096, None), 0) == 4_096


def test_a_first_fragment_without_samples_is_refused_and_one_without_tfdt_starts_at_0() -> None:
    tfhd = _full(b"tfhd", 0, 0x020000, struct.pack(">I", 1))
    with pytest.raises(PermanentError, match="no samples"):
        first_presentation_ticks(_box(b"moof", _box(b"traf", tfhd)), 0)
    trun = _full(b"trun", 0, 0x800, struct.pack(">I", 2) + struct.pack(">II", 1024, 0))
    assert first_presentation_ticks(_box(b"moof", _box(b"traf", tfhd + trun)), 512) == 512


@pytest.mark.parametrize(
    ("movflags", "expected_s"),
    [("", 0.08), ("+negative_cts_offsets", 0.0)],
    ids=["unsigned-offsets", "signed-offsets"],
)
def test_first_presentation_of_ffmpegs_fragmented_h264_with_b_frames(
    tmp_path: Path, ffmpeg_path: str, movflags: str, expected_s: float
) -> None:
    video = tmp_path / "video.mp4"
    subprocess.run(
        [ffmpeg_path, "-nostdin", "-y", "-loglevel", "error",
         "-f", "lavfi", "-i", "testsrc=size=160x120:rate=25:duration=2",
         "-c:v", "libx264", "-preset", "veryfast", "-g", "25",
         "-movflags", "+frag_keyframe+empty_moov+default_base_moof" + movflags,
         "-min_frag_duration", "500000", str(video)],
        check=True,
    )  # fmt: skip
    # x264's B-pyramid: the first frame is shown two frames (80 ms at 25 fps) after it is
    # decoded, unless the offsets are signed.
    assert first_presentation_s(video, read_fragment_index(video)) == pytest.approx(expected_s)


def test_the_map_goes_right_after_the_webvtt_line_and_the_cues_stay_as_they_were() -> None:
    vtt = "WEBVTT\n\n00:00:02.000 --> 00:00:06.000\nHello \u2013 ça\n"
    assert with_timestamp_map(vtt, 0.08) == (
        "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:7200,LOCAL:00:00:00.000\n\n"
        "00:00:02.000 --> 00:00:06.000\nHello \u2013 ça\n"
    )


def test_other_header_lines_are_kept_and_an_old_map_is_replaced() -> None:
    vtt = (
        "\ufeffWEBVTT - from Jellyfin\nKind: captions\n"
        "X-TIMESTAMP-MAP=LOCAL:00:00:00.000,MPEGTS:900000\nLanguage: fr\n\n"
        "NOTE kept\n\n1\n00:00:00.500 --> 00:00:07.000\nBonjour\n"
    )
    assert with_timestamp_map(vtt, 1.5) == (
        "WEBVTT - from Jellyfin\nX-TIMESTAMP-MAP=MPEGTS:135000,LOCAL:00:00:00.000\n"
        "Kind: captions\nLanguage: fr\n\n"
        "NOTE kept\n\n1\n00:00:00.500 --> 00:00:07.000\nBonjour\n"
    )


def test_a_file_with_no_cues_gets_the_map_too() -> None:
    assert with_timestamp_map("WEBVTT\n", 0.0) == (
        "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n"
    )


def test_a_file_that_is_not_webvtt_is_refused() -> None:
    with pytest.raises(PermanentError, match="not WebVTT"):
        with_timestamp_map("1\n00:00:00,500 --> 00:00:07,000\nSubRip\n", 0.0)


def test_local_is_where_the_video_starts_on_the_cues_clock() -> None:
    # A video that starts 1 h 2 min 3.5 s into the file's clock, presented from 0.
    assert with_timestamp_map("WEBVTT\n", 0.0, local_s=3723.5) == (
        "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:01:02:03.500\n"
    )


def test_the_plan_says_where_the_video_starts_on_ffmpegs_clock_for_local() -> None:
    # An MPEG-TS whose clock starts at 1.4 s, its video 0.5 s after its audio.
    probe = parse_probe(
        "Input #0, mpegts, from 'x.ts':\n"
        "  Duration: 00:00:10.00, start: 1.400000, bitrate: 1000 kb/s\n"
        "  Stream #0:0[0x100]: Video: h264 (High), yuv420p(tv, progressive), 1920x1080, "
        "25 fps, 25 tbr, 90k tbn, start 1.900000\n"
        "  Stream #0:1[0x101](eng): Audio: aac (LC), 48000 Hz, stereo, fltp\n"
    )
    item = MediaItem(
        id="a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21",
        name="Sample",
        type="Movie",
        container="ts",
        size=1000,
        duration_s=10.0,
        streams=tuple(s.to_media_stream() for s in probe.streams),
    )
    work = Path("/work/item")
    plan = plan_transcode(item, work, work / "source.ts", probe=probe, output_format="hls")
    assert plan.video.start_s == pytest.approx(0.5)
