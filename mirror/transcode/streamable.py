"""Whether ffmpeg can read a source front to back while it is still downloading.

Matroska/WebM and an MP4 whose moov comes before its media data carry every stream and
the duration in their first bytes, and ffmpeg reads them through a pipe in file order.
An MP4 with the moov at the end is fed in another order (`mirror.transcode.moov_first`);
a fragmented MP4 (whose length only its end tells), MPEG-TS (streams may show up late,
the duration is a guess from a partial file) and anything unknown wait for the whole
file, as before. Pure: bytes in, a number out.
"""

from __future__ import annotations

import struct

HEAD_BYTES = 64 * 1024
# A Matroska header (EBML, Segment Info, Tracks) sits in the first few KiB; the quick
# probe reads 1 MB, so that much must be there before a partial file is probed.
_MATROSKA_PROBE_BYTES = 2 * 1024 * 1024
_EBML_MAGIC = b"\x1a\x45\xdf\xa3"


def bytes_before_probe(head: bytes) -> int | None:
    """How many bytes of the file a probe needs before ffmpeg may read it while it
    grows, judged from its first bytes; None when it must be downloaded whole first."""
    if head.startswith(_EBML_MAGIC):
        return _MATROSKA_PROBE_BYTES
    return _mp4_moov_end(head)


def _mp4_moov_end(head: bytes) -> int | None:
    """The end of the moov of a progressive MP4 that has it up front, else None."""
    offset, seen_ftyp = 0, False
    while offset + 8 <= len(head):
        size, kind = struct.unpack_from(">I4s", head, offset)
        if size == 1 and offset + 16 <= len(head):
            (size,) = struct.unpack_from(">Q", head, offset + 8)
        if kind == b"ftyp":
            seen_ftyp = True
        elif kind == b"moov":
            if not seen_ftyp or size < 8:
                return None
            body = head[offset : offset + size]
            # mvex: fragmented; a moov cut by the head may still hide one, so look again
            # once the whole moov is there (the caller probes only then).
            return None if b"mvex" in body else offset + size
        elif kind in (b"mdat", b"moof") or size < 8 or not seen_ftyp:
            return None
        offset += size
    return None
