"""A byte range of a file as a request body that botocore reads in small chunks.

A part handed to botocore as `bytes` sits in memory whole (16 MiB by default) from the
moment it is read until S3 answered, for every request in flight, plus the copies
botocore makes of it. A seekable, sized file object instead is read a MiB at a time for
the payload signature and a block at a time while it is sent, so a part in flight costs
a few buffers whatever the part size. `__len__` gives the Content-Length (botocore asks
`len()` first: a `fileno` would give it the whole file's size); `seek` and `tell` let it
rewind for a retry.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self


class FileSlice:
    """Bytes [start, start + length) of `path`, read-only and seekable within the range."""

    def __init__(self, path: Path, start: int, length: int) -> None:
        self._file: BinaryIO = path.open("rb")
        self._start = start
        self._length = length
        self._position = 0
        self._file.seek(start)

    def __len__(self) -> int:
        return self._length

    def read(self, size: int | None = -1) -> bytes:
        left = self._length - self._position
        if size is None or size < 0 or size > left:
            size = left
        data = self._file.read(size)
        self._position += len(data)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            offset += self._position
        elif whence == os.SEEK_END:
            offset += self._length
        self._position = min(max(offset, 0), self._length)
        self._file.seek(self._start + self._position)
        return self._position

    def tell(self) -> int:
        return self._position

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        self._file.close()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
