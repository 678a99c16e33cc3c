"""Streaming one original file to disk, resuming where an earlier try stopped.

Reverse proxies in front of Jellyfin cut long downloads, and a worker may die halfway,
so the bytes already on disk are kept: the next try asks for the rest with
`Range: bytes=N-` and `If-Range: <Last-Modified>` (Jellyfin sends no ETag), the
validator of those very bytes, recorded beside them (`mirror.jellyfin.partial`). Every
resume is conditional, and checked: a partial the item's metadata no longer fits is
dropped before the first request; a 200 (the file changed), or a 206 whose size,
Last-Modified or ETag are not the recorded ones (ASP.NET honours a date If-Range for a
replaced file with an older mtime) means the download starts over from byte 0.

Bytes are vouched for to the reader in this process (`on_write`) only once the server
confirmed they are current. A start-over after that ends the download, as the reader
may have used the old bytes: SourceChanged (from `on_restart`) when the server has
another version, a TransientError when the bytes merely cannot be resumed.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import httpx

from mirror.domain.errors import InsufficientSpace, PermanentError, TransientError
from mirror.domain.item import ServedFile
from mirror.domain.progress import AbortSignal, Progress, ProgressCallback
from mirror.jellyfin.body import BodyReadError, open_direct_body
from mirror.jellyfin.failures import (
    FailureBudget,
    RetryableError,
    RetryPolicy,
    classify_http_error,
    give_up,
    raise_for_status,
    size_mismatch,
)
from mirror.jellyfin.interrupter import Interrupter
from mirror.jellyfin.partial import PartialRecord, discard, read_record, write_record
from mirror.jellyfin.quirks import has_symlink_bug, symlink_bug_error
from mirror.jellyfin.throttle import TokenBucket

logger = logging.getLogger("mirror.jellyfin")

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)", re.IGNORECASE)
_UNSATISFIED_RANGE = re.compile(r"bytes\s+\*/(\d+)", re.IGNORECASE)
_SPEED_EVERY_S = 0.5
# Progress reports while bytes flow: often enough for a live percentage and the stall
# watchdog (minutes), rare enough to cost nothing next to the copying.
REPORT_EVERY_S = 0.05
# MIRROR_DOWNLOAD_RATE_LIMIT: the receive buffer of a paced download (see _receive_buffer).
RECEIVE_BUFFER_SECONDS = 0.25
RECEIVE_BUFFER_MIN = 64 * 1024


class ResumableDownload:
    """One call of JellyfinClient.download: tries until done, aborted or out of retries."""

    def __init__(
        self,
        http: httpx.Client,
        item_id: str,
        dest: Path,
        *,
        expected_size: int | None,
        on_progress: ProgressCallback,
        abort: AbortSignal,
        policy: RetryPolicy,
        server_version: Callable[[], str | None] | None = None,
        rate_limit: float | None = None,
        on_write: Callable[[int], None] | None = None,
        on_restart: Callable[[], None] | None = None,
        listed: Mapping[str, object] | None = None,
    ) -> None:
        self._http = http
        # Told the size of the current bytes on disk after every chunk written (a reader
        # in this process waits on it instead of polling the file), and when bytes it was
        # told of are thrown away.
        self._on_write = on_write
        self._on_restart = on_restart
        # The item as its metadata lists it now: a partial recorded under other facts
        # is of another version of the file.
        self._listed = dict(listed or {})
        self._record: PartialRecord | None = None
        self._told_reader = False  # on_write was told of bytes: a reader may have them
        self._server_version = server_version
        self._item_id = item_id
        self._path = f"/Items/{item_id}/Download"
        self._dest = dest
        self._expected_size = expected_size
        self._on_progress = on_progress
        self._abort = abort
        self._policy = policy
        self._link = Interrupter(abort, _receive_buffer(rate_limit))
        self._wakeup = threading.Event()
        self._received = 0  # body bytes received in the current try
        self._read_timeout = http.timeout.read
        # MIRROR_DOWNLOAD_RATE_LIMIT; one bucket for every try, so a resume keeps the pace.
        # Its sleep wakes on an abort (the loop then raises the reason).
        self._bucket = TokenBucket(rate_limit, sleep=abort.wait) if rate_limit is not None else None

    def run(self) -> ServedFile:
        """Download (or finish) the file; its size (verified) and validators."""
        self._dest.parent.mkdir(parents=True, exist_ok=True)
        unregister = self._abort.on_abort(self._interrupt)
        budget = FailureBudget()
        try:
            for attempt in self._policy.retrying(budget, sleep=self._sleep):
                with attempt:
                    self._abort.raise_if_set()
                    self._received = 0
                    try:
                        return self._try_once()
                    except RetryableError:
                        budget.note_failure(progressed=self._received > 0)
                        raise
        except RetryableError as exc:
            raise give_up(exc, self._policy.attempts) from exc
        finally:
            unregister()
        raise AssertionError("unreachable: tenacity either returns or raises")

    def _interrupt(self) -> None:
        self._wakeup.set()
        self._link.interrupt()

    def _sleep(self, seconds: float) -> None:
        self._wakeup.wait(seconds)  # an abort ends the back-off early

    def _try_once(self) -> ServedFile:
        offset, validator = self._resume_point()
        headers = {"Accept-Encoding": "identity"}  # byte offsets must be file offsets
        if offset and validator:  # never unconditional: _resume_point drops such bytes
            headers["Range"] = f"bytes={offset}-"
            headers["If-Range"] = validator
            logger.info("resuming download of item %s at byte %d", self._item_id, offset)
        self._report(offset, self._expected_size, None)
        try:
            with self._http.stream(
                "GET", self._path, headers=headers, extensions={"trace": self._link.trace}
            ) as response:
                self._link.response = response
                if response.status_code == 416 and offset:
                    return self._finish_complete_partial(response, offset)
                if response.status_code == 500 and offset:
                    self._blame_symlink_bug(f"500 to a range request at byte {offset}")
                raise_for_status(response, self._path, self._item_id)
                return self._write_body(response, offset)
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, BodyReadError) as exc:
            self._abort.raise_if_set()
            failure = classify_http_error("GET", self._path, exc)
            cut = isinstance(exc, httpx.TransportError | httpx.StreamError | BodyReadError)
            if cut and not isinstance(failure, PermanentError):  # resumable: say how far
                raise RetryableError(self._interrupted_message(exc)) from exc
            raise failure from exc
        finally:
            self._link.clear()

    def _resume_point(self) -> tuple[int, str | None]:
        """Bytes already on disk that may be resumed, and the If-Range that names them."""
        try:
            size = self._dest.stat().st_size
        except FileNotFoundError:
            return 0, None
        record = read_record(self._dest)
        if record is None:
            why: str | None = "no record says which version of the file they are"
        elif self._expected_size is not None and size > self._expected_size:
            why = f"they are more than the {self._expected_size} bytes the item has"
        else:
            why = record.stale_for(self._listed, self._expected_size)
        if why is not None:
            if size:
                logger.info("not resuming the %d bytes of item %s: %s", size, self._item_id, why)
            # Across attempts nobody read them yet; inside one, only a missing validator
            # gets here (same listing, same size): no sign the file changed.
            self._start_over(why, changed=False)
            return 0, None
        self._record = record
        return size, record.if_range if record is not None else None

    def _start_over(self, why: str, *, changed: bool) -> None:
        """Throw the partial away, to download the file again from byte 0. Once a reader
        was told of its bytes that ends the download, as nothing may mix them with
        others: SourceChanged (`on_restart` raises it) when the server has another
        version, a TransientError when the bytes merely cannot be resumed."""
        discard(self._dest)
        self._record = None
        if not self._told_reader:
            return
        if changed and self._on_restart is not None:
            self._on_restart()
        raise TransientError(
            f"the download of item {self._item_id} has to start over ({why}) after part of "
            "it was read; the attempt starts over"
        )

    def _write_body(self, response: httpx.Response, offset: int) -> ServedFile:
        if response.status_code == 206:
            start, total = self._check_content_range(response, offset)
            self._vouch(offset)  # the server confirmed these bytes are current
            mode = "ab"
        else:
            if offset:
                logger.info("item %s changed on the server; downloading it again", self._item_id)
            self._start_over("Jellyfin sent the whole file", changed=bool(offset))
            start, total = 0, _content_length(response)
            mode = "wb"
        if total is not None and self._expected_size is not None and total != self._expected_size:
            self._blame_symlink_bug(
                f"it sends {total} bytes but reported {self._expected_size} (MediaSources Size)"
            )
            raise size_mismatch(self._item_id, total, self._expected_size)
        if mode == "wb":
            # Recorded before the first byte: no byte on disk is of an unknown version.
            self._record = PartialRecord.of(response, total, self._listed)
            write_record(self._dest, self._record)
        done = self._copy_body(response, start, total, mode)
        if total is not None and done != total:
            raise RetryableError(
                f"download of item {self._item_id} ended at byte {done} of {total}"
            )
        return self._verified(done)

    def _copy_body(self, response: httpx.Response, start: int, total: int | None, mode: str) -> int:
        """The hot loop: write each chunk; report progress at most every REPORT_EVERY_S.

        Chunks come straight from the socket when possible (see mirror.jellyfin.body),
        else from httpx's iter_raw. Progress is reported on a clock, not per chunk: a
        fast link delivers thousands of chunks a second and the heartbeat needs a few.
        The abort signal is still checked at every chunk. With a rate limit each chunk
        also pays the token bucket; without one the loop has no extra work.
        """
        direct = open_direct_body(response, self._read_timeout) if total is not None else None
        chunks: Iterable[bytes | memoryview] = direct.chunks() if direct else response.iter_raw()
        done = start
        began = time.monotonic()
        speed: int | None = None
        next_speed_at = began + _SPEED_EVERY_S
        next_report_at = began + REPORT_EVERY_S
        reported = start
        abort = self._abort
        pace = self._bucket.take if self._bucket is not None else None
        on_write = self._on_write
        failed = True
        try:
            # Unbuffered: writes go to the kernel as they are, with no copy in between.
            with self._dest.open(mode, buffering=0) as file:
                for chunk in chunks:
                    _write_all(file, chunk)
                    done += len(chunk)
                    self._received += len(chunk)
                    if on_write is not None:
                        on_write(done)
                    if pace is not None:
                        pace(len(chunk))
                    abort.raise_if_set()
                    now = time.monotonic()
                    if now < next_report_at:
                        continue
                    next_report_at = now + REPORT_EVERY_S
                    if now >= next_speed_at:
                        speed = round(self._received / (now - began))
                        next_speed_at = now + _SPEED_EVERY_S
                    self._report(done, total, speed)
                    reported = done
            failed = False
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise InsufficientSpace(f"disk full while downloading to {self._dest}") from exc
            raise TransientError(f"cannot write the download to {self._dest}: {exc}") from exc
        finally:
            if done > start and on_write is not None:
                self._told_reader = True
            if done != reported:  # the last bytes (or those before a failure) are counted
                elapsed = time.monotonic() - began
                speed = round(self._received / elapsed) if elapsed > 0 else speed
                if failed:  # on the way out of a failure a report must not mask it
                    with contextlib.suppress(Exception):
                        self._report(done, total, speed)
                else:
                    self._report(done, total, speed)
        return done

    def _check_content_range(self, response: httpx.Response, offset: int) -> tuple[int, int | None]:
        header = response.headers.get("Content-Range", "")
        match = _CONTENT_RANGE.fullmatch(header.strip())
        if match is None or int(match.group(1)) != offset:
            self._start_over(f"Content-Range {header[:80]!r}", changed=False)
            raise RetryableError(
                f"Jellyfin answered a resume of item {self._item_id} at byte {offset} "
                f"with Content-Range {header[:80]!r}; starting over"
            )
        total = None if match.group(3) == "*" else int(match.group(3))
        why = self._record.mismatch(response, total) if self._record is not None else None
        if why is not None:
            self._start_over(why, changed=True)
            raise RetryableError(
                f"the file of item {self._item_id} changed on the server ({why}); "
                "downloading it again from byte 0"
            )
        return offset, total

    def _vouch(self, size: int) -> None:
        if self._on_write is not None:
            self._on_write(size)
            self._told_reader = self._told_reader or size > 0

    def _finish_complete_partial(self, response: httpx.Response, offset: int) -> ServedFile:
        """416 to `bytes=N-` with a matching If-Range: fine if N is the whole file."""
        match = _UNSATISFIED_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
        total = int(match.group(1)) if match else None
        # The whole file on disk, if it is of the version recorded (same size and date).
        why = self._record.mismatch(response, total) if self._record is not None else None
        if total != offset or why is not None:
            self._start_over(why or f"416: the file has {total} bytes", changed=True)
            raise RetryableError(
                f"Jellyfin cannot resume item {self._item_id} at byte {offset} "
                f"(416, the file has {total} bytes); starting over"
            )
        self._vouch(offset)
        self._report(offset, total, None)
        return self._verified(offset)

    def _verified(self, size: int) -> ServedFile:
        expected = self._expected_size
        if expected is not None and size != expected:
            self._blame_symlink_bug(f"it sent {size} bytes but reported {expected}")
            if size > expected:
                discard(self._dest)  # the error below ends the download either way
            raise TransientError(
                f"downloaded {size} bytes of item {self._item_id} but Jellyfin reported "
                f"{expected} (MediaSources Size)"
            )
        return self._record.served(size) if self._record is not None else ServedFile(size)

    def _blame_symlink_bug(self, symptom: str) -> None:
        """Raise the permanent #15279 error if the server is a release with that bug."""
        version = self._server_version() if self._server_version is not None else None
        if version is not None and has_symlink_bug(version):
            raise symlink_bug_error(self._item_id, version, symptom)

    def _report(self, done: int, total: int | None, speed_bps: int | None) -> None:
        self._on_progress(
            Progress("download", bytes_done=done, bytes_total=total, speed_bps=speed_bps)
        )

    def _interrupted_message(self, exc: Exception) -> str:
        kind = type(exc).__name__
        detail = str(exc).strip()[:200]
        where = f"download of item {self._item_id} ({self._path})"
        if self._received:
            return f"{where} interrupted after {self._received} bytes: {kind}: {detail}"
        if isinstance(exc, httpx.TimeoutException) or getattr(exc, "timed_out", False):
            return f"Jellyfin did not answer in time for the {where}: {kind}: {detail}"
        return f"Jellyfin unreachable for the {where}: {kind}: {detail}"


def _receive_buffer(rate_limit: float | None) -> int | None:
    """With a rate limit, a socket receive buffer of a quarter second at that rate.

    Linux grows a receive buffer up to tens of MB by itself, even under a paced reader
    at times; Jellyfin would then send that much at full speed before the pace reaches
    it. A fixed buffer keeps what leaves Jellyfin close to the limit (Linux doubles the
    value for its bookkeeping). Without a limit the kernel's autotuning is left alone.
    """
    if rate_limit is None:
        return None
    return max(RECEIVE_BUFFER_MIN, int(rate_limit * RECEIVE_BUFFER_SECONDS))


def _write_all(file: IO[Any], chunk: bytes | memoryview) -> None:
    """An unbuffered write may take fewer bytes than given (rarely, e.g. on a signal)."""
    written = file.write(chunk) or 0
    while written < len(chunk):
        written += file.write(memoryview(chunk)[written:]) or 0


def _content_length(response: httpx.Response) -> int | None:
    value = response.headers.get("Content-Length", "")
    return int(value) if value.strip().isdigit() else None
