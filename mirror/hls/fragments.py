"""The fragment index of a fragmented MP4 that mirror wrote: where each fragment lies.

ffmpeg writes `video.mp4` and every `.m4a` as fragmented MP4: ftyp, moov, then one
`moof`+`mdat` pair per fragment, appended in order and never rewritten (no global
`sidx`: writing one makes ffmpeg move the whole file at the end, and the file is
uploaded while it is written). Walking the top-level boxes gives each fragment's byte
range, and its duration from the moof's sample durations: all a byte-range HLS playlist
needs, so the playlists come from the file's own bytes and cannot disagree with them.
The parsing is pure (bytes in, plain data out); `read_fragment_index` does the I/O.
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mirror.domain.errors import PermanentError
from mirror.transcode.audio_config import AudioConfig, channels, decoder_config

# No ftyp, moov or moof mirror writes comes near this; a larger one is not ours.
_MAX_HEADER_BOX_BYTES = 16 * 1024 * 1024
_HEAD = (b"ftyp", b"moov")


@dataclass(frozen=True, slots=True)
class ByteRange:
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Fragment:
    """One `moof`+`mdat` pair: an HLS segment."""

    offset: int
    length: int
    duration_s: float


@dataclass(frozen=True, slots=True)
class FragmentIndex:
    """Where the init section (ftyp + moov) and each fragment of one file lie."""

    init: ByteRange
    fragments: tuple[Fragment, ...]
    codec: str | None  # RFC 6381 string for CODECS, e.g. avc1.64001f, mp4a.40.2
    channels: int | None = None  # an audio track's channel count (HLS `CHANNELS`)

    @property
    def duration_s(self) -> float:
        return sum(fragment.duration_s for fragment in self.fragments)

    @property
    def peak_bitrate(self) -> int:
        """Bits per second of the densest fragment: HLS `BANDWIDTH` is a peak rate."""
        rates = [f.length * 8 / f.duration_s for f in self.fragments if f.duration_s > 0]
        return round(max(rates, default=0.0))

    @property
    def average_bitrate(self) -> int:
        total = self.duration_s
        size = sum(fragment.length for fragment in self.fragments)
        return round(size * 8 / total) if total > 0 else 0


def aligned(index: FragmentIndex, boundaries: Sequence[float]) -> FragmentIndex:
    """`index` with consecutive fragments merged into segments that end as close as
    possible to each of `boundaries` (the video's segment ends, in seconds).

    Audio has no keyframes to cut at, and its frames (1024 samples) do not add up to
    whole seconds: fragments cut every N seconds drift from the video's by a frame each
    time. Written in short fragments and grouped here, the audio segments stay within
    half a fragment of the video's for the whole file. Consecutive fragments are
    consecutive bytes, so a group is one byte range.
    """
    ends = list(itertools.accumulate(f.duration_s for f in index.fragments))
    cuts = set()
    for boundary in boundaries:
        nearest = min(range(len(ends)), key=lambda j: abs(ends[j] - boundary))
        cuts.add(nearest)
    cuts.add(len(ends) - 1)
    segments: list[Fragment] = []
    start = 0
    for end in sorted(cuts):
        group = index.fragments[start : end + 1]
        if group:
            first, last = group[0], group[-1]
            segments.append(
                Fragment(
                    first.offset,
                    last.offset + last.length - first.offset,
                    sum(f.duration_s for f in group),
                )
            )
        start = end + 1
    return FragmentIndex(
        init=index.init, fragments=tuple(segments), codec=index.codec, channels=index.channels
    )


def read_fragment_index(path: Path) -> FragmentIndex:
    """The index of a fragmented MP4 on disk, from a walk over its top-level boxes.

    Reads the ftyp, the moov and every moof (a few hundred bytes each) and only the
    header of each mdat: a few MiB for a two-hour film, whatever its size.
    """
    boxes: list[tuple[bytes, int, int, bytes]] = []
    with path.open("rb") as file:
        offset, end = 0, os.fstat(file.fileno()).st_size
        while offset + 8 <= end:
            file.seek(offset)
            size, kind = _box_header(file.read(16))
            size = end - offset if size == 0 else size  # 0: the box runs to the end
            if size < 8 or offset + size > end:
                break  # a cut or damaged tail: the fragments before it still count
            body = b""
            if kind in (b"ftyp", b"moov", b"moof"):
                if size > _MAX_HEADER_BOX_BYTES:
                    raise PermanentError(f"hls: {path.name} has a {kind.decode()} of {size} bytes")
                file.seek(offset)
                body = file.read(size)
            boxes.append((kind, offset, size, body))
            offset += size
    return index_from_boxes(boxes, path.name)


def index_from_boxes(boxes: Sequence[tuple[bytes, int, int, bytes]], name: str) -> FragmentIndex:
    """Build the index from the top-level boxes in file order: (type, offset, size, bytes
    of ftyp/moov/moof). A fragment is a moof with the mdat(s) after it."""
    heads = {kind: (offset, body) for kind, offset, _size, body in boxes if kind in _HEAD}
    if b"ftyp" not in heads or b"moov" not in heads:
        raise PermanentError(f"hls: {name} has no ftyp/moov at its start")
    ftyp_offset, _ = heads[b"ftyp"]
    moov_offset, moov = heads[b"moov"]
    timescale, default_duration = track_timing(moov)
    fragments: list[Fragment] = []
    for position, (kind, offset, size, body) in enumerate(boxes):
        if kind != b"moof":
            continue
        length = size
        for next_kind, _offset, next_size, _body in boxes[position + 1 :]:
            if next_kind == b"moof":
                break
            length += next_size if next_kind == b"mdat" else 0
        ticks = moof_duration(body, default_duration)
        fragments.append(Fragment(offset, length, ticks / timescale))
    if not fragments:
        raise PermanentError(f"hls: {name} has no fragments (moof): not fragmented")
    init = ByteRange(ftyp_offset, moov_offset + len(moov) - ftyp_offset)
    return FragmentIndex(
        init=init, fragments=tuple(fragments), codec=codec_string(moov), channels=channels(moov)
    )


def track_timing(moov: bytes) -> tuple[int, int]:
    """(timescale of the track's mdhd, trex default sample duration) of a one-track moov."""
    trak = _child(moov, 8, len(moov), b"trak")
    mdia = _child(moov, *trak, b"mdia") if trak else None
    mdhd = _child(moov, *mdia, b"mdhd") if mdia else None
    if mdhd is None:
        raise PermanentError("hls: the moov has no track timescale (mdhd)")
    start = mdhd[0]
    timescale_at = start + (20 if moov[start] == 1 else 12)  # after the (64-bit) times
    (timescale,) = struct.unpack_from(">I", moov, timescale_at)
    mvex = _child(moov, 8, len(moov), b"mvex")
    trex = _child(moov, *mvex, b"trex") if mvex else None
    default: int = struct.unpack_from(">I", moov, trex[0] + 12)[0] if trex else 0
    return timescale, default


def moof_duration(moof: bytes, default_duration: int) -> int:
    """Ticks one fragment lasts: the sum of its samples' durations (ISO 14496-12 8.8.8),
    each from the trun, else the tfhd's default, else the trex's (`default_duration`)."""
    total = 0
    for traf in _children(moof, 8, len(moof), b"traf"):
        tfhd = _child(moof, *traf, b"tfhd")
        duration = default_duration
        if tfhd is not None:
            flags = int.from_bytes(moof[tfhd[0] + 1 : tfhd[0] + 4], "big")
            position = tfhd[0] + 8 + (8 if flags & 0x01 else 0) + (4 if flags & 0x02 else 0)
            if flags & 0x08:
                (duration,) = struct.unpack_from(">I", moof, position)
        for trun in _children(moof, *traf, b"trun"):
            total += _trun_duration(moof, trun[0], duration)
    return total


def _trun_duration(data: bytes, start: int, default_duration: int) -> int:
    flags = int.from_bytes(data[start + 1 : start + 4], "big")
    count: int = struct.unpack_from(">I", data, start + 4)[0]
    if not flags & 0x100:  # no per-sample durations
        return count * default_duration
    position = start + 8 + (4 if flags & 0x01 else 0) + (4 if flags & 0x04 else 0)
    stride = 4 * bin(flags & 0xF00).count("1")
    return sum(struct.unpack_from(">I", data, position + i * stride)[0] for i in range(count))


def _children(data: bytes, start: int, end: int, kind: bytes) -> list[tuple[int, int]]:
    """(payload start, box end) of each child box of `kind` between start and end."""
    found = []
    position = start
    while position + 8 <= end:
        size, child = _box_header(data[position : position + 16])
        if size < 8:
            break
        if child == kind:
            header = 16 if struct.unpack_from(">I", data, position)[0] == 1 else 8
            found.append((position + header, min(position + size, end)))
        position += size
    return found


def _child(data: bytes, start: int, end: int, kind: bytes) -> tuple[int, int] | None:
    children = _children(data, start, end, kind)
    return children[0] if children else None


def codec_string(moov: bytes) -> str | None:
    """`avc1.PPCCLL` from the avcC box, or `mp4a.40.N` from the esds; None if neither."""
    avcc = moov.find(b"avcC")
    if avcc >= 0:
        profile, compatibility, level = moov[avcc + 5 : avcc + 8]
        return f"avc1.{profile:02x}{compatibility:02x}{level:02x}"
    esds = moov.find(b"esds")
    if esds >= 0:
        return _mp4a_codec(moov[esds + 8 :])  # skip the type and version/flags
    return None


def _mp4a_codec(payload: bytes) -> str | None:
    """`mp4a.<object type>.<audio object type>` from an ES descriptor (ISO 14496-1)."""
    object_type, config = decoder_config(payload)
    if object_type is None:
        return None
    if not config:
        return f"mp4a.{object_type:02x}"
    return f"mp4a.{object_type:02x}.{AudioConfig.parse(config).audio_object_type}"


def _box_header(data: bytes) -> tuple[int, bytes]:
    size, kind = struct.unpack_from(">I4s", data)
    if size == 1:  # 64-bit size follows the type
        (size,) = struct.unpack_from(">Q", data, 8)
    return size, kind
