"""The fragment index of a fragmented MP4 that mirror wrote: where each fragment lies.

ffmpeg writes `video.mp4` and every `.m4a` as fragmented MP4 with a global `sidx`
(segment index) right after the `moov`: one reference per `moof`+`mdat` pair with its
byte size and duration. That index is all a byte-range HLS playlist needs, so the
playlists are generated from the file's own index and cannot disagree with its bytes.
Only the head of the file is read (ftyp, moov, sidx: a few KiB, whatever the size).
The parsing is pure (bytes in, plain data out); `read_fragment_index` does the I/O.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mirror.errors import PermanentError

# The head (ftyp + moov + sidx) of a two-hour file is well under this.
_MAX_HEAD_BYTES = 16 * 1024 * 1024


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
    return FragmentIndex(init=index.init, fragments=tuple(segments), codec=index.codec)


def read_fragment_index(path: Path) -> FragmentIndex:
    """The index of a fragmented MP4 on disk; PermanentError when it has none."""
    boxes: dict[bytes, tuple[int, bytes]] = {}
    with path.open("rb") as file:
        offset = 0
        while offset < _MAX_HEAD_BYTES:
            file.seek(offset)
            header = file.read(16)
            if len(header) < 8:
                break
            size, kind = _box_header(header)
            if kind in (b"ftyp", b"moov", b"sidx"):
                file.seek(offset)
                boxes[kind] = (offset, file.read(size))
            if kind in (b"sidx", b"moof", b"mdat") or size == 0:
                break
            offset += size
    return index_from_head(boxes, path.name)


def index_from_head(boxes: dict[bytes, tuple[int, bytes]], name: str) -> FragmentIndex:
    """Build the index from the file's head boxes, by type: (offset, whole box bytes)."""
    if b"ftyp" not in boxes or b"moov" not in boxes:
        raise PermanentError(f"hls: {name} has no ftyp/moov at its start")
    if b"sidx" not in boxes:
        raise PermanentError(f"hls: {name} has no segment index (sidx): not fragmented")
    ftyp_offset, _ = boxes[b"ftyp"]
    moov_offset, moov = boxes[b"moov"]
    sidx_offset, sidx = boxes[b"sidx"]
    init = ByteRange(ftyp_offset, moov_offset + len(moov) - ftyp_offset)
    fragments = parse_sidx(sidx, sidx_offset)
    if not fragments:
        raise PermanentError(f"hls: {name} has an empty segment index")
    return FragmentIndex(init=init, fragments=fragments, codec=codec_string(moov))


def parse_sidx(box: bytes, box_offset: int) -> tuple[Fragment, ...]:
    """The references of a `sidx` box (ISO 14496-12 8.16.3) as absolute byte ranges."""
    size, _ = _box_header(box)
    header = 8 if struct.unpack(">I", box[:4])[0] != 1 else 16
    version = box[header]
    position = header + 4  # version + flags
    _reference_id, timescale = struct.unpack_from(">II", box, position)
    position += 8
    if version == 0:
        _earliest, first_offset = struct.unpack_from(">II", box, position)
        position += 8
    else:
        _earliest, first_offset = struct.unpack_from(">QQ", box, position)
        position += 16
    (count,) = struct.unpack_from(">xxH", box, position)
    position += 4
    # Offsets in a sidx count from the first byte after the sidx box itself.
    offset = box_offset + size + first_offset
    fragments = []
    for _ in range(count):
        reference, duration, _sap = struct.unpack_from(">III", box, position)
        position += 12
        length = reference & 0x7FFFFFFF
        fragments.append(Fragment(offset, length, duration / timescale))
        offset += length
    return tuple(fragments)


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
    position = 0
    object_type: int | None = None
    while position < len(payload):
        tag = payload[position]
        position += 1
        length = 0
        for _ in range(4):  # "expandable" size: 7 bits a byte, high bit continues
            byte = payload[position]
            position += 1
            length = (length << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        if tag == 0x03:  # ES_Descriptor: ES_ID, flags, then nested descriptors
            flags = payload[position + 2]
            position += 3
            position += 2 if flags & 0x80 else 0
            position += 1 + payload[position] if flags & 0x40 else 0
            position += 2 if flags & 0x20 else 0
        elif tag == 0x04:  # DecoderConfigDescriptor
            object_type = payload[position]
            position += 13
        elif tag == 0x05 and object_type is not None:  # AudioSpecificConfig
            audio_object_type = payload[position] >> 3
            if audio_object_type == 31:
                audio_object_type = 32 + (
                    (payload[position] & 0x07) << 3 | payload[position + 1] >> 5
                )
            return f"mp4a.{object_type:02x}.{audio_object_type}"
        else:
            position += length
    return f"mp4a.{object_type:02x}" if object_type is not None else None


def _box_header(data: bytes) -> tuple[int, bytes]:
    size, kind = struct.unpack_from(">I4s", data)
    if size == 1:  # 64-bit size follows the type
        (size,) = struct.unpack_from(">Q", data, 8)
    return size, kind
