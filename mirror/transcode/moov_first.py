"""An MP4 with its moov at the end, fed to ffmpeg moov first while it still downloads.

Cameras and some encoders write the moov (every stream's sample tables) after the media
data. ffmpeg reading a pipe cannot seek to it, so such a file used to be downloaded
whole before ffmpeg started: the source and the outputs on disk at once, 2x the item.

Instead the moov comes first, by a Range request for the file's tail, and ffmpeg gets
what `qt-faststart` would have made of the file, in file order: the bytes before the
first mdat (ftyp), the moov with every chunk offset moved past itself, then the media
data as it downloads. The download itself is unchanged, front to back into the source
file; once it is complete, the file's own tail must be the one whose moov was fed
(`require_unchanged`), so a file replaced on the server in between fails the job like
any other change (SourceChanged). The disk then peaks as for any streamable source.

Pure layout work here; `None` wherever anything is unusual (a moov that is not right
after the media data, a compressed or fragmented moov, offsets past 4 GiB in a 32-bit
table, a tail too large to hold): the caller then waits for the whole file, as before.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mirror.files.growing_file import GrowingFile, GrowingReader, changed_while_read
from mirror.transcode.probe import QUICK_PROBE_SIZE, ProbedFile, probe_file

# The tail is held in memory while its moov is rewritten: a two-hour film's moov is a
# few MiB; a tail larger than this is not worth the memory, the file is read whole.
MAX_TAIL_BYTES = 64 * 1024 * 1024
# Boxes whose children hold the sample tables (moov > trak > mdia > minf > stbl > stco).
_CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts"}
# Top-level boxes that may come before the media data.
_LEADING = {b"ftyp", b"free", b"skip", b"wide", b"pdin", b"uuid", b"styp"}
_MAX_32 = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class TailLayout:
    """Where the moov goes (the first mdat's offset) and where it sits in the file."""

    insert_at: int
    moov_start: int


def moov_at_end(head: bytes, size: int | None) -> TailLayout | None:
    """From a file's first bytes and its size: the layout of an MP4 whose media data
    comes before a moov at the end, or None (another layout, or not sure)."""
    offset, seen_ftyp = 0, False
    while offset + 16 <= len(head):
        box_size, kind = struct.unpack_from(">I4s", head, offset)
        if box_size == 1:
            (box_size,) = struct.unpack_from(">Q", head, offset + 8)
        if kind == b"mdat" and seen_ftyp and box_size >= 8:
            end = offset + box_size
            if size is None or end + 8 > size or size - end > MAX_TAIL_BYTES:
                return None
            return TailLayout(insert_at=offset, moov_start=end)
        if kind not in _LEADING or box_size < 8 or (kind != b"ftyp" and not seen_ftyp):
            return None
        seen_ftyp = True
        offset += box_size
    return None


class MoovFirstFeed:
    """What ffmpeg reads instead of the source file (`open` like a `GrowingFile`)."""

    def __init__(
        self, source: GrowingFile, head: bytes, layout: TailLayout, moov: bytes, tail: bytes
    ) -> None:
        self.path = source.path
        self.prefix = head[: layout.insert_at] + moov
        self._source = source
        self._layout = layout
        self._tail_sha256 = hashlib.sha256(tail).digest()

    def open(self) -> MoovFirstReader:
        return MoovFirstReader(self._source.open(), self.path, self.prefix, self._layout)

    def probe_copy(self, dest: Path, media_bytes: int) -> Path:
        """A small file ffmpeg can probe: the prefix and the first `media_bytes` of the
        media data (stream details such as the pixel format come from the first frames)."""
        start = self._layout.insert_at
        end = min(start + media_bytes, self._layout.moov_start)
        self._source.wait_for(end)
        with self.path.open("rb") as source, dest.open("wb") as copy:
            source.seek(start)
            copy.write(self.prefix)
            copy.write(source.read(end - start))
        return dest

    def require_unchanged(self) -> None:
        """Once the download is complete: raise SourceChanged unless the file ends with
        the very tail whose moov was fed (the file was not replaced in between)."""
        self._source.require_unchanged()
        with self.path.open("rb") as source:
            source.seek(self._layout.moov_start)
            tail = source.read(MAX_TAIL_BYTES + 1)
        if hashlib.sha256(tail).digest() != self._tail_sha256:
            raise changed_while_read(self.path)


class MoovFirstReader:
    """The prefix, then the source's media data up to where the moov was."""

    def __init__(
        self, reader: GrowingReader, path: Path, prefix: bytes, layout: TailLayout
    ) -> None:
        self._reader = reader
        self._path = path
        self._prefix = memoryview(prefix)
        self._layout = layout
        self._served = 0

    def read_some(self, size: int) -> bytes:
        """Up to `size` bytes as soon as there are any; b"" at the end."""
        if self._served < len(self._prefix):
            data = bytes(self._prefix[self._served : self._served + size])
            self._served += len(data)
            return data
        while self._reader.position < self._layout.insert_at:  # in the prefix already
            if not self._reader.read_some(self._layout.insert_at - self._reader.position):
                raise changed_while_read(self._path)
        left = self._layout.moov_start - self._reader.position
        if left <= 0:
            return b""  # the moov and what follows went first, as the prefix
        data = self._reader.read_some(min(size, left))
        if not data:  # ended before the moov: not the file the tail came from
            raise changed_while_read(self._path)
        return data

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> MoovFirstReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def moov_first(tail: bytes, layout: TailLayout) -> bytes | None:
    """The tail's moov with every chunk offset moved past it (it now sits at
    `insert_at`), or None when it cannot be (see the module doc)."""
    if len(tail) < 8:
        return None
    size, kind = struct.unpack_from(">I4s", tail, 0)
    if kind != b"moov" or size < 8 or size > len(tail) or not _only_trailers(tail[size:]):
        return None
    moov = bytearray(tail[:size])
    return bytes(moov) if _shift_offsets(moov, 8, size, size, layout.insert_at) else None


def _only_trailers(rest: bytes) -> bool:
    """Whether what follows the moov holds no media data (a free box, metadata)."""
    offset = 0
    while offset + 8 <= len(rest):
        size, kind = struct.unpack_from(">I4s", rest, offset)
        if kind in (b"mdat", b"moov", b"moof") or size < 8:
            return False
        offset += size
    return offset == len(rest)


def _shift_offsets(moov: bytearray, start: int, end: int, delta: int, first: int) -> bool:
    """Add `delta` to every chunk offset at or past `first` in the boxes [start, end)."""
    offset = start
    while offset + 8 <= end:
        size, kind = struct.unpack_from(">I4s", moov, offset)
        if size < 8 or offset + size > end or kind in (b"cmov", b"mvex"):
            return False
        body, box_end = offset + 8, offset + size
        if kind in _CONTAINERS:
            shifted = _shift_offsets(moov, body, box_end, delta, first)
        elif kind in (b"stco", b"co64"):
            shifted = _shift_table(moov, body, box_end, delta, first, wide=kind == b"co64")
        else:
            shifted = True
        if not shifted:
            return False
        offset = box_end
    return offset == end


def _shift_table(
    moov: bytearray, body: int, end: int, delta: int, first: int, *, wide: bool
) -> bool:
    (count,) = struct.unpack_from(">I", moov, body + 4)
    entry = ">Q" if wide else ">I"
    width = 8 if wide else 4
    if body + 8 + count * width > end:
        return False
    for position in range(body + 8, body + 8 + count * width, width):
        (value,) = struct.unpack_from(entry, moov, position)
        if value >= first:
            value += delta
        if not wide and value > _MAX_32:
            return False
        struct.pack_into(entry, moov, position, value)
    return True


def moov_first_feed(
    source: GrowingFile,
    head: bytes,
    size: int | None,
    fetch_range: Callable[[int, int], bytes | None],
) -> MoovFirstFeed | None:
    """The moov-first feed of a source whose `head` shows a moov at the end, fetching the
    tail with `fetch_range(start, length)`; None for any other layout (see module doc)
    or when the server does not serve the range."""
    layout = moov_at_end(head, size)
    if layout is None or size is None:
        return None
    tail = fetch_range(layout.moov_start, size - layout.moov_start)
    moov = None if tail is None else moov_first(tail, layout)
    if tail is None or moov is None:
        return None
    return MoovFirstFeed(source, head, layout, moov, tail)


def probe_moov_first(feed: MoovFirstFeed, scratch: Path, ffmpeg_path: str) -> ProbedFile:
    """A quick probe of the feed's first bytes, through a small copy at `scratch`."""
    try:
        return probe_file(feed.probe_copy(scratch, QUICK_PROBE_SIZE), ffmpeg_path, quick=True)
    finally:
        scratch.unlink(missing_ok=True)
