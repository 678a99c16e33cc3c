"""Giving back the disk of output bytes that are safely in S3, keeping what is read later.

A fragmented output streams to S3 while ffmpeg writes it, but the file stays in the work
dir until the job ends: the multipart upload is published only after verify, and the
playlists are built from the file. Once a range is stored in S3 its media data is not
read again, so its blocks are freed with a hole (`fallocate` PUNCH_HOLE | KEEP_SIZE: the
size stays, the range reads as zeros, the blocks go back to the file system).

What later steps read stays whole, which is everything but the media payloads:
- verify (`ffmpeg -i`, a quick probe) reads the ftyp and moov, decodes the first
  fragments (up to its 1 MB probe size) and walks every moof to find the duration;
- the playlists (`mirror.hls.fragments.read_fragment_index`) read the ftyp, the moov,
  every moof and each mdat's header.
So only the payload of each top-level `mdat` is punched, past the first
`KEEP_HEAD_BYTES`, rounded inwards to whole pages: a few KiB a fragment stay, so short
audio fragments keep most of their (small) bytes, and video gives back nearly all.
The boxes are found from the very bytes the upload reads, in order (`observe`), so
nothing is read twice. Where holes are unsupported (not Linux, a file system without
them) nothing is punched and the job is unchanged, only the disk is not given back.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import struct
import sys
import threading
from collections import deque
from pathlib import Path

log = logging.getLogger("mirror.holes")

KEEP_HEAD_BYTES = 2 * 1024 * 1024  # twice verify's probe size: its decoded head stays
_PAGE = 4096
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02


def _load_fallocate() -> ctypes._NamedFuncPointer | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function


_fallocate = _load_fallocate()


def punch_hole(fd: int, offset: int, length: int) -> bool:
    """Free the blocks of [offset, offset+length) keeping the file's size; False when
    the platform or the file system cannot."""
    if _fallocate is None or length <= 0:
        return False
    flags = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
    return bool(_fallocate(fd, flags, offset, length) == 0)


class OutputHoles:
    """One output file: `observe` its bytes front to back as they are read for upload,
    `stored(end)` once every byte before `end` is in S3. Thread-safe."""

    def __init__(self, path: Path, *, keep_head: int = KEEP_HEAD_BYTES) -> None:
        self.path = path
        self._keep_head = keep_head
        self._lock = threading.Lock()
        self._seen = 0  # bytes observed
        self._next_box = 0  # offset of the next top-level box header
        self._carry = b""  # the start of a header cut by the end of the last chunk
        self._payloads: deque[tuple[int, int]] = deque()  # mdat payloads not freed yet
        self._enabled = _fallocate is not None
        self.freed = 0

    def observe(self, data: bytes) -> None:
        """The next bytes of the file, in order: note where each mdat's payload lies."""
        with self._lock:
            start = self._seen
            self._seen += len(data)
            while self._enabled and self._next_box < self._seen:
                relative = self._next_box - start
                header = data[relative : relative + 16] if relative >= 0 else self._carry + data
                header = header[:16]
                if len(header) < 8 or (header[:4] == b"\x00\x00\x00\x01" and len(header) < 16):
                    self._carry = header  # the rest of the header comes with the next chunk
                    return
                self._carry = b""
                size, kind = struct.unpack_from(">I4s", header)
                header_size = 8
                if size == 1:
                    (size,) = struct.unpack_from(">Q", header, 8)
                    header_size = 16
                if size < header_size:  # 0 (to the end) or damaged: not ours, free nothing
                    self._enabled = False
                    return
                if kind == b"mdat":
                    self._payloads.append((self._next_box + header_size, self._next_box + size))
                self._next_box += size

    def stored(self, end: int) -> None:
        """Every byte before `end` is stored in S3: free the payloads wholly or partly in it."""
        with self._lock:
            if not self._enabled:
                return
            with contextlib.ExitStack() as stack:
                fd = -1
                while self._payloads:
                    first, last = self._payloads[0]
                    start = _round_up(max(first, self._keep_head))
                    stop = _round_down(min(last, end))
                    if stop > start:
                        if fd < 0:
                            try:
                                fd = os.open(self.path, os.O_WRONLY)
                            except OSError:  # gone already: nothing left to free
                                self._enabled = False
                                return
                            stack.callback(os.close, fd)
                        if not punch_hole(fd, start, stop - start):
                            log.info("no holes on %s: outputs keep their disk", self.path)
                            self._enabled = False
                            return
                        self.freed += stop - start
                    if last > end:
                        self._payloads[0] = (max(first, stop), last)
                        return
                    self._payloads.popleft()


def _round_up(offset: int) -> int:
    return -(-offset // _PAGE) * _PAGE


def _round_down(offset: int) -> int:
    return offset // _PAGE * _PAGE
