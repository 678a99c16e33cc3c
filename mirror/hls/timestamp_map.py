"""Subtitles on the video's clock: the `X-TIMESTAMP-MAP` header of every mirrored WebVTT.

A WebVTT cue time counts from the start of the programme, but HLS players place the
media by the timestamps inside its segments, and the video need not start at 0 there
(composition offsets of B-frames, audio that starts before the video, a copied stream's
own start). RFC 8216 3.5: the header `X-TIMESTAMP-MAP=MPEGTS:<t>,LOCAL:<cue time>` says
which media timestamp (in 90 kHz) goes with which cue time; without it hls.js and
video.js show cues early by the video's start, and Shaka Player shifts them by minus
the video's first timestamp, out of sight when that is larger than the cue time.
MPEGTS is the video's first presentation time, read from its first fragment (tfdt +
composition offsets), so it is right whatever the muxer made the first timestamp; LOCAL
is where that frame is on the cues' clock (ffmpeg's: a video that starts after the
audio starts there, while video.mp4 starts at 0).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from mirror.domain.errors import PermanentError
from mirror.hls.fragments import FragmentIndex, track_timing

MPEG_TS_CLOCK = 90_000
_HEADER_END = re.compile(r"\r?\n\r?\n|\r\r")
_EXISTING_MAP = re.compile(r"^X-TIMESTAMP-MAP=.*$\n?", re.MULTILINE)


def first_presentation_s(path: Path, index: FragmentIndex) -> float:
    """The presentation time, in seconds, of the earliest frame of the file's first fragment."""
    first = index.fragments[0]
    with path.open("rb") as file:
        file.seek(index.init.offset)
        init = file.read(index.init.length)
        file.seek(first.offset)
        header = file.read(8)
        (size,) = struct.unpack(">I", header[:4]) if len(header) == 8 else (0,)
        moof = header + file.read(max(0, size - 8))
    moov_at = struct.unpack(">I", init[:4])[0] if len(init) >= 8 else 0  # after the ftyp
    if init[moov_at + 4 : moov_at + 8] != b"moov" or moof[4:8] != b"moof" or size < 8:
        raise PermanentError(f"hls: {path.name} has no moov or first moof where indexed")
    timescale, default_duration = track_timing(init[moov_at:])
    return first_presentation_ticks(moof, default_duration) / timescale


def first_presentation_ticks(moof: bytes, default_duration: int) -> int:
    """min(decode time + composition offset) over the samples of one moof, in track ticks
    (ISO 14496-12 8.8.8 trun, 8.8.12 tfdt; version 1 trun offsets are signed)."""
    traf = _child(moof, 8, len(moof), b"traf")
    tfdt = _child(moof, *traf, b"tfdt") if traf else None
    trun = _child(moof, *traf, b"trun") if traf else None
    if traf is None or trun is None:
        raise PermanentError("hls: the first fragment has no samples (trun)")
    decode = 0  # without a tfdt, the first fragment starts where the track does: 0
    if tfdt is not None:
        decode = struct.unpack_from(">Q" if moof[tfdt[0]] == 1 else ">I", moof, tfdt[0] + 4)[0]
    tfhd = _child(moof, *traf, b"tfhd")
    duration = default_duration
    if tfhd is not None:
        flags = int.from_bytes(moof[tfhd[0] + 1 : tfhd[0] + 4], "big")
        at = tfhd[0] + 8 + (8 if flags & 0x01 else 0) + (4 if flags & 0x02 else 0)
        duration = struct.unpack_from(">I", moof, at)[0] if flags & 0x08 else duration
    start = trun[0]
    version, flags = moof[start], int.from_bytes(moof[start + 1 : start + 4], "big")
    count: int = struct.unpack_from(">I", moof, start + 4)[0]
    if not flags & 0x800 or count == 0:  # no composition offsets: presented as decoded
        return int(decode)
    position = start + 8 + (4 if flags & 0x01 else 0) + (4 if flags & 0x04 else 0)
    stride = 4 * bin(flags & 0xF00).count("1")
    offset_at = 4 * bin(flags & 0x700).count("1")  # duration, size, flags come first
    presented = []
    for sample in range(count):
        at = position + sample * stride
        (composition,) = struct.unpack_from(">i" if version else ">I", moof, at + offset_at)
        presented.append(decode + composition)
        decode += struct.unpack_from(">I", moof, at)[0] if flags & 0x100 else duration
    return int(min(presented))


def with_timestamp_map(vtt: str, start_s: float, local_s: float = 0.0) -> str:
    """`vtt` with its header saying that cue time `local_s` is the media time `start_s`.

    `local_s` is where the video's first frame is on the cues' clock (ffmpeg's, which
    the muxer drops from the video file). Replaces a map the file already has (it would
    be for another timeline); everything after the header is kept byte for byte.
    """
    ticks = max(0, round(start_s * MPEG_TS_CLOCK))
    line = f"X-TIMESTAMP-MAP=MPEGTS:{ticks},LOCAL:{_cue_time(local_s)}"
    text = vtt.removeprefix("\ufeff")
    if not text.startswith("WEBVTT"):
        raise PermanentError("hls: a subtitle is not WebVTT (no WEBVTT header)")
    end = _HEADER_END.search(text)
    header, rest = (text[: end.start()], text[end.start() :]) if end else (text.rstrip(), "\n")
    header = _EXISTING_MAP.sub("", header).rstrip("\r\n")
    first, _, others = header.partition("\n")
    lines = [first, line, *([others] if others else [])]
    return "\n".join(lines) + rest


def _cue_time(seconds: float) -> str:
    """hh:mm:ss.ttt, the WebVTT timestamp form the map's LOCAL takes."""
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02}:{minutes:02}:{rest // 1000:02}.{rest % 1000:03}"


def _child(data: bytes, start: int, end: int, kind: bytes) -> tuple[int, int] | None:
    """(payload start, end) of the first child box of `kind` between start and end."""
    position = start
    while position + 8 <= end:
        size, child = struct.unpack_from(">I4s", data, position)
        header = 8
        if size == 1:
            (size,) = struct.unpack_from(">Q", data, position + 8)
            header = 16
        if size < 8:
            return None
        if child == kind:
            return position + header, min(position + size, end)
        position += size
    return None
