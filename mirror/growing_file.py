"""Reading a file while another part of the job still writes it, front to back.

The download appends to the source while ffmpeg reads it; ffmpeg appends to each
fragmented output while the S3 upload reads it. The writer says when it is done
(`finish`); until then a read waits for the bytes it asks for instead of taking the
current end for the end of the file.

How a reader learns of new bytes depends on the writer. The download writes in this
process and reports each chunk (`wrote`, with `writer_reports=True`): readers wait on a
condition it notifies, so ffmpeg's feed follows the download with no delay and no
polling. ffmpeg is another process and tells nothing: readers of its outputs poll the
size (every 20 ms). Either way the size on disk is what counts (a resumed download
starts with bytes already there), and the abort signal wakes every waiter.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import BinaryIO

from mirror.errors import TransientError
from mirror.progress import AbortSignal

POLL_S = 0.02
# With a reporting writer the size is still checked this often: a safety net only.
REPORTED_WAIT_S = 1.0


class GrowingFile:
    """One file being written; `finish` marks the end. Thread-safe."""

    def __init__(
        self,
        path: Path,
        abort: AbortSignal,
        *,
        poll_s: float = POLL_S,
        writer_reports: bool = False,
    ) -> None:
        self.path = path
        self._abort = abort
        self._poll_s = REPORTED_WAIT_S if writer_reports else poll_s
        self._done = threading.Event()
        self._changed = threading.Condition()
        abort.on_abort(self._wake)

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def wrote(self, _size: int = 0) -> None:
        """The writer (in this process) appended bytes: wake the readers."""
        self._wake()

    def finish(self) -> None:
        """The writer is done: every byte is on disk, reads may now reach the end."""
        with self._changed:
            self._done.set()
            self._changed.notify_all()

    def _wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_until_finished(self) -> int:
        """Block until the writer is done; return the final size."""
        with self._changed:
            while not self._done.is_set():
                self._abort.raise_if_set()
                self._changed.wait(self._poll_s)
        return self.size()

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def wait_for(self, size: int) -> int:
        """Block until the file holds `size` bytes or is finished; return its size then."""
        # The size is read holding the condition's lock, which `wrote` takes after the
        # bytes are on disk: a write the stat missed wakes the wait that follows it.
        with self._changed:
            while True:
                finished = self._done.is_set()  # before the size: no byte written after is lost
                current = self.size()
                if current >= size or finished:
                    return current
                self._abort.raise_if_set()
                self._changed.wait(self._poll_s)

    def open(self) -> GrowingReader:
        """A reader from byte 0 (waits for the file to appear)."""
        self.wait_for(1)
        return GrowingReader(self, self.path.open("rb"))


class GrowingReader:
    """Sequential reads of a `GrowingFile`: `read(n)` returns n bytes unless the end of
    the finished file comes first (b"" at the end)."""

    def __init__(self, growing: GrowingFile, file: BinaryIO) -> None:
        self._growing = growing
        self._file = file
        self.position = 0

    def read(self, size: int) -> bytes:
        available = self._growing.wait_for(self.position + size)
        if available < self.position:
            # The writer started over (Jellyfin sent the whole file, not the rest).
            raise TransientError(
                f"{self._growing.path.name} shrank from {self.position} to {available} bytes "
                "while it was read; the job will start over"
            )
        data = self._file.read(min(size, available - self.position))
        self.position += len(data)
        return data

    def read_some(self, size: int) -> bytes:
        """Up to `size` bytes as soon as at least one is there (b"" at the end)."""
        available = self._growing.wait_for(self.position + 1)
        return self.read(min(size, max(1, available - self.position)))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> GrowingReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def remove_quietly(*paths: Path) -> None:
    """Delete files that may already be gone."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
