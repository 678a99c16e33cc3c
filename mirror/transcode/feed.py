"""Feeding ffmpeg a source that is still downloading, through its stdin.

ffmpeg given a file path takes the current end of a growing file for the end of the
media, so it reads a pipe instead: this thread copies the file into it as bytes land
(`mirror.files.growing_file`) and closes it, ffmpeg's EOF, only once the download is complete
(size checked) and every byte went in. A new attempt feeds from byte 0 of the partial
file, then follows the resumed download. An MP4 with the moov at the end is fed in
another order (`mirror.transcode.moov_first`): what is fed is a `FeedSource`.

`wait_for_room` is the backpressure of the streaming upload: called before each chunk, it
blocks while ffmpeg's outputs hold too many bytes not yet in S3, so when the upload is the
slowest phase ffmpeg waits for its input instead of piling outputs up on disk.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import IO, Protocol

CHUNK_BYTES = 1024 * 1024


class FeedReader(Protocol):
    """Sequential reads of what ffmpeg is fed (a `GrowingReader`, a `MoovFirstReader`)."""

    def read_some(self, size: int) -> bytes:
        """Up to `size` bytes as soon as there are any; b"" at the end."""
        ...

    def __enter__(self) -> FeedReader: ...

    def __exit__(self, *exc_info: object) -> None: ...


class FeedSource(Protocol):
    """What ffmpeg reads: a `GrowingFile`, or a `MoovFirstFeed` (moov at the end)."""

    def open(self) -> FeedReader: ...

    def require_unchanged(self) -> None:
        """Once the download is complete: raise SourceChanged unless what was fed is
        that file's bytes."""
        ...


class SourceFeeder:
    """One thread copying a `FeedSource` into a pipe; `error` says why it stopped early."""

    def __init__(
        self,
        source: FeedSource,
        pipe: IO[bytes],
        on_error: Callable[[], None],
        wait_for_room: Callable[[], None] | None = None,
    ) -> None:
        self._source = source
        self._wait_for_room = wait_for_room
        self._pipe = pipe
        self._on_error = on_error  # kills ffmpeg: it must not wait for bytes never coming
        self.error: BaseException | None = None
        self.fed = 0
        self._thread = threading.Thread(target=self._run, name="ffmpeg-feed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            with self._source.open() as reader:
                while chunk := reader.read_some(CHUNK_BYTES):
                    if self._wait_for_room is not None:
                        self._wait_for_room()
                    self._pipe.write(chunk)
                    self.fed += len(chunk)
        except (BrokenPipeError, ValueError):
            pass  # ffmpeg exited (or was killed): its exit status tells why
        except BaseException as exc:  # the download failed or started over: stop ffmpeg
            self.error = exc
            self._on_error()
        finally:
            with contextlib.suppress(OSError, ValueError):
                self._pipe.close()
