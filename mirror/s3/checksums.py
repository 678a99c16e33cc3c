"""What proves an output arrived intact: its size and SHA-256 on the job row, and the
per-part checksum that S3 itself checks.

The SHA-256 is taken from the very bytes the upload reads, not from an extra pass over
the file: the file goes to s3transfer as a seekable file object wrapped in
`HashingReader`. For such objects s3transfer reads each multipart part once, in order,
in one thread, into memory (retries resend that copy), and a single PutObject body is
read from the start, possibly several times (botocore reads it for the part checksum,
the payload signature and the send, and again on a retry). So the reader hashes every
byte the first time it is read at the running end of what it has seen, and ignores
re-reads. The hash only ever grows contiguously from byte 0, so it is right exactly when
it reached the file's end; `digest()` refuses to answer otherwise.

Why not upload by path and hash there: s3transfer then opens every part on its own and
its request threads read them at once, out of order, each several times; a SHA-256 of
the whole file (which cannot be combined from per-part hashes) would have to hold early
parts back until the ones before them arrived (as much memory as this) or read the file
again (the pass this avoids). The price here: parts pass through memory (bounded in
storage.py) and the hash itself, about 75 ms of CPU per 100 MB on this machine.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Literal, Self

from mirror.objects import FileDigest

# What every part carries (`x-amz-checksum-crc32`) and S3 checks before it stores the
# part. CRC32 is what botocore (since 1.36) and s3transfer send by default, so AWS, MinIO
# and moto take it, as must any S3 look-alike that works with current AWS SDKs; it costs
# next to nothing (zlib); CRC32C and CRC64NVME would need awscrt, which is not installed.
# Set explicitly, it stays on whatever AWS_REQUEST_CHECKSUM_CALCULATION says.
PART_CHECKSUM_ALGORITHM: Literal["CRC32"] = "CRC32"


class IncompleteDigest(RuntimeError):
    """The reads did not cover the file in order, so there is no true SHA-256 to record."""


class HashingReader:
    """A read-only, seekable view of a binary file that hashes what is read, in order.

    Bytes count once: a read that starts at or before the hashed end extends the hash
    with whatever lies beyond it; re-reads after a seek back (retries, botocore reading a
    body for its checksum first) add nothing, and a read that starts beyond the hashed
    end is not hashed (it would leave a hole). Reads are serialized by a lock, so even
    callers on several threads could only stop the hash short, never make it wrong.
    """

    def __init__(self, file: BinaryIO, size: int, name: str = "") -> None:
        self._file = file
        self.size = size
        self.name = name
        self._hash = hashlib.sha256()
        self._hashed = 0  # bytes [0, _hashed) are in the hash
        self._position = file.tell()
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path) -> Self:
        """Open `path` for reading; its size now is what `digest()` expects to have read."""
        file = path.open("rb")
        try:
            return cls(file, os.fstat(file.fileno()).st_size, str(path))
        except BaseException:
            file.close()
            raise

    # --- the file-object surface s3transfer and botocore use ------------------------

    def read(self, size: int | None = -1) -> bytes:
        with self._lock:
            start = self._position
            data = self._file.read(-1 if size is None else size)
            end = start + len(data)
            self._position = end
            if start <= self._hashed < end:
                self._hash.update(memoryview(data)[self._hashed - start :])
                self._hashed = end
            return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        with self._lock:
            self._position = self._file.seek(offset, whence)
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

    # --- the result ----------------------------------------------------------------

    def digest(self) -> FileDigest:
        """Size and SHA-256 of the whole file, once every byte of it has been read.

        Raises `IncompleteDigest` when the reads did not reach `size` from byte 0 on.
        """
        with self._lock:
            hashed, sha256 = self._hashed, self._hash.hexdigest()
        if hashed != self.size:
            where = self.name or "file"
            raise IncompleteDigest(
                f"{where}: only bytes 0-{hashed} of {self.size} were read in order"
            )
        return FileDigest(hashed, sha256)
