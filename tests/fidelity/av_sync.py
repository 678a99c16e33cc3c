"""Where the sync mark of a fidelity sample (mirror.testing.fidelity_samples) is in a file.

The white frame and the start of the beep are found by decoding with ffmpeg: `showinfo`
gives each frame's timestamp and mean brightness (the white frame is the first whose
mean jumps well above the frame before it: over black, over a moving pattern, in 8 or
10 bits, tone-mapped or not), the audio is decoded to PCM beside
`ashowinfo` (each frame's timestamp and length), so the beep is placed to the sample.
`-copyts` keeps each file's own timestamps (ffmpeg would otherwise start each file at 0).

Two readings of an MP4: `edit_lists=False` ignores edit lists (`-ignore_editlist 1`), as
MSE players (hls.js, Shaka, video.js) do; `edit_lists=True` honours them, as ffmpeg and
Safari do. One correction: libavformat presents a track with negative composition
offsets (ctts/trun version 1) late by the largest of them (mov.c, mov_finalize_packet:
pts = dts + dts_shift + offset), where ISO 14496-12 and MSE put its first frame at its
decode time; the frame's time here is the file's own (decode time + offset), so that
shift is taken off again (`composition_shift_s`).
"""

from __future__ import annotations

import re
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

# The mark frame's luma mean against the frame before it: 235 after 16 over black, 235
# after 126 over the test pattern, 214 after 118 tone-mapped from HDR10, 509 after 392
# in 10-bit PQ.
_JUMP_RATIO = 1.2
_JUMP_MIN = 4  # levels: a black frame's mean wobbles by one or two
_LOUD = 0.1  # the beep's amplitude is 0.5; AAC's noise floor on silence is far below
_FRAME = re.compile(r"pts_time:\s*(?P<t>-?[\d.]+).*?mean:\[\s*(?P<y>\d+)")
_AUDIO_FRAME = re.compile(rb"pts_time:(?P<t>-?[\d.e+-]+) .*?rate:(?P<r>\d+) nb_samples:(?P<n>\d+)")


@dataclass(frozen=True, slots=True)
class Mark:
    flash_s: float  # when the white frame is presented
    beep_s: float  # when the beep starts

    @property
    def offset_s(self) -> float:
        """Flash minus beep: how far the picture trails the sound at the mark."""
        return self.flash_s - self.beep_s


def mark_of(video: Path, audio: Path, ffmpeg_path: str, *, edit_lists: bool) -> Mark:
    """The mark as read from a video file and an audio file (they may be one file)."""
    return Mark(
        flash_s=flash_s(video, ffmpeg_path, edit_lists=edit_lists),
        beep_s=beep_s(audio, ffmpeg_path, edit_lists=edit_lists),
    )


def flash_s(path: Path, ffmpeg_path: str, *, edit_lists: bool) -> float:
    """The presentation time of the first frame of `path`'s first video stream that is
    much brighter than the one before it."""
    argv = [*_input(path, ffmpeg_path, edit_lists), "-map", "0:v:0", "-vf", "showinfo"]
    text = _run([*argv, "-f", "null", "-"]).stderr.decode("utf-8", "replace")
    before: int | None = None
    for match in _FRAME.finditer(text):
        mean = int(match["y"])
        if before is not None and mean > _JUMP_RATIO * before + _JUMP_MIN:
            return float(match["t"]) - composition_shift_s(path)
        before = mean
    raise AssertionError(f"no bright frame in {path.name}")


def beep_s(path: Path, ffmpeg_path: str, *, edit_lists: bool) -> float:
    """The time of the first loud sample of `path`'s first audio stream."""
    argv = [*_input(path, ffmpeg_path, edit_lists), "-map", "0:a:0", "-af", "ashowinfo"]
    result = _run([*argv, "-ac", "1", "-c:a", "pcm_f32le", "-f", "f32le", "-"])
    samples = memoryview(result.stdout).cast("f")
    position = 0
    for match in _AUDIO_FRAME.finditer(result.stderr):
        count, rate = int(match["n"]), int(match["r"])
        for i in range(count):
            if abs(samples[position + i]) > _LOUD:
                return float(match["t"]) + i / rate
        position += count
    raise AssertionError(f"no beep in {path.name}")


def composition_shift_s(path: Path) -> float:
    """How late libavformat presents an MP4's track with negative composition offsets:
    the largest negative offset of its fragments' truns (0 for anything else)."""
    data = path.read_bytes()
    if data[4:8] != b"ftyp":
        return 0.0
    timescale = _timescale(data)
    shift = 0
    for trun in _boxes_named(data, b"trun"):
        shift = max(shift, *(-offset for offset in _composition_offsets(data, trun)), 0)
    return shift / timescale if timescale else 0.0


def _input(path: Path, ffmpeg_path: str, edit_lists: bool) -> list[str]:
    mp4 = path.read_bytes()[4:8] == b"ftyp"
    ignore = ["-ignore_editlist", "1"] if mp4 and not edit_lists else []
    return [ffmpeg_path, "-nostdin", "-hide_banner", "-copyts", *ignore, "-i", str(path)]


def _run(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, capture_output=True, check=True, timeout=120)


_CONTAINERS = {b"moov", b"trak", b"mdia", b"moof", b"traf"}


def _boxes_named(data: bytes, kind: bytes, start: int = 0, end: int | None = None) -> list[int]:
    """Offsets of every box of `kind` inside the container boxes between start and end."""
    found, position, end = [], start, len(data) if end is None else end
    while position + 8 <= end:
        size, name = struct.unpack_from(">I4s", data, position)
        if size == 1:
            (size,) = struct.unpack_from(">Q", data, position + 8)
        size = end - position if size == 0 else size
        if size < 8:
            break
        if name == kind:
            found.append(position)
        elif name in _CONTAINERS:
            found += _boxes_named(data, kind, position + 8, position + size)
        position += size
    return found


def _timescale(data: bytes) -> int:
    mdhd = _boxes_named(data, b"mdhd")
    if not mdhd:
        return 0
    version = data[mdhd[0] + 8]
    (timescale,) = struct.unpack_from(">I", data, mdhd[0] + (28 if version == 1 else 20))
    return int(timescale)


def _composition_offsets(data: bytes, trun: int) -> list[int]:
    version, flags = data[trun + 8], int.from_bytes(data[trun + 9 : trun + 12], "big")
    if not flags & 0x800:
        return []
    (count,) = struct.unpack_from(">I", data, trun + 12)
    position = trun + 16 + (4 if flags & 0x01 else 0) + (4 if flags & 0x04 else 0)
    before = 4 * bin(flags & 0x700).count("1")  # duration, size, flags come first
    stride = before + 4
    kind = ">i" if version == 1 else ">I"
    return [struct.unpack_from(kind, data, position + i * stride + before)[0] for i in range(count)]
