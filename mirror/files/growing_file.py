"""Reading a file while another part of the job still writes it, front to back.

The download appends to the source while ffmpeg reads it; ffmpeg appends to each
fragmented output while the S3 upload reads it. The writer says when it is done
(`finish`); until then a read waits for the bytes it asks for instead of taking the
current end for the end of the file.

How a reader learns of new bytes depends on the writer. The download writes in this
process and reports each chunk (`wrote`, with `writer_reports=True`): readers wait on a
condition it notifies, so ffmpeg's feed follows the download with no delay and no
polling, and they read only the bytes it vouched for: a partial file kept from an
earlier attempt counts once the server confirmed it may be resumed (the download then
reports its size), never before. ffmpeg is another process and tells nothing: readers
of its outputs poll the size on disk (every 20 ms). The abort signal wakes every waiter.

A download that has to throw its bytes away (the file changed on the server) says so
(`start_over`): if anyone may have read them, what was made from them mixes two files,
so it raises SourceChanged and every reader fails with it too.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import BinaryIO

from mirror.domain.errors import SourceChanged
from mirror.domain.progress import AbortSignal

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
        self._reports = writer_reports
        self._vouched = 0  # with a reporting writer: the bytes it said are there and current
        self._started_over = False  # bytes readers may have seen were thrown away
        self._done = threading.Event()
        self._changed = threading.Condition()
        abort.on_abort(self._wake)

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def wrote(self, size: int) -> None:
        """The writer (in this process) holds `size` current bytes: wake the readers."""
        with self._changed:
            self._vouched = size
            self._changed.notify_all()

    def start_over(self) -> None:
        """The writer throws its bytes away to write the file again from byte 0 (the
        server has another version of it). Raises SourceChanged if it had vouched for
        any: readers may have read them, and whatever they made mixes two files."""
        with self._changed:
            seen = self._vouched > 0
            self._vouched = 0
            self._started_over = self._started_over or seen
            self._changed.notify_all()
        self.require_unchanged()

    def require_unchanged(self) -> None:
        """Raise SourceChanged if bytes readers may have seen were thrown away."""
        if self._started_over:
            raise changed_while_read(self.path)

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
        """Bytes readers may read: those the writer vouched for, or (a writer that does
        not report, or once it finished) the size on disk."""
        if self._reports and not self._done.is_set():
            return self._vouched
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
        if available < self.position:  # shrank under the reader: never a short end
            raise changed_while_read(self._growing.path)
        data = self._file.read(min(size, available - self.position))
        # Checked after reading: a start-over is announced before its first new byte,
        # so data that may hold one never leaves here.
        self._growing.require_unchanged()
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


def changed_while_read(path: Path) -> SourceChanged:
    return SourceChanged(
        f"{path.name} changed on the server while it was being read; "
        "the job starts over from byte 0 of the new file"
    )


def remove_quietly(*paths: Path) -> None:
    """Delete files that may already be gone."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
