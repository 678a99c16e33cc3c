"""One upload_files call as seen from s3transfer's threads: byte sums and stopping.

s3transfer calls its subscribers from several threads with byte deltas (negative when
a part is retried) and runs the failure cleanups (aborting multipart uploads) once a
cancelled transfer winds down. `UploadRun` turns that into ordered progress reports for
the job and a single place where the run is stopped, whoever stops it.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from s3transfer.subscribers import BaseSubscriber

from mirror.progress import Progress, ProgressCallback

if TYPE_CHECKING:
    from s3transfer.futures import TransferFuture

# s3transfer calls back for every 256 KiB read; the job callback needs far fewer reports.
REPORT_INTERVAL_S = 0.1


class ByteTally:
    """Running byte count fed from many threads.

    s3transfer reports deltas, and a retried part reports a negative delta for the bytes
    it rewinds, so the sum (not a max) under a lock is the truth.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = 0

    @property
    def done(self) -> int:
        return self._done

    def add(self, delta: int) -> int:
        """Add a (possibly negative) delta; return the new total."""
        with self._lock:
            self._done += delta
            return self._done


class UploadRun:
    """State one `upload_files` call shares between s3transfer's threads and the caller.

    Exceptions never escape into s3transfer threads: a failing progress callback is
    recorded and stops the run, and the calling thread re-raises it.
    """

    def __init__(self, total: int, count: int, on_progress: ProgressCallback) -> None:
        self.total = total
        self.tally = ByteTally()
        self.callback_error: BaseException | None = None
        self.first_failure: BaseException | None = None
        self.all_done = threading.Event()
        self.wake = threading.Event()  # set when all are done or the run is stopped
        self._on_progress = on_progress
        self._started = time.monotonic()
        self._last_report = 0.0
        self._report_lock = threading.Lock()
        self._lock = threading.Lock()
        self._futures: list[TransferFuture] = []
        self._pending = count
        self._stopped = False

    def snapshot(self, done: int) -> Progress:
        elapsed = time.monotonic() - self._started
        speed = round(done / elapsed) if elapsed > 0 and done > 0 else None
        return Progress(phase="upload", bytes_done=done, bytes_total=self.total, speed_bps=speed)

    def add_future(self, future: TransferFuture) -> None:
        with self._lock:
            self._futures.append(future)
            stopped = self._stopped
        if stopped:
            future.cancel()

    def stop(self) -> None:
        """Cancel every transfer; safe from any thread, also from an abort hook."""
        with self._lock:
            self._stopped = True
            futures = list(self._futures)
        # Outside our lock: a not-yet-started future runs its done callbacks right here.
        for future in futures:
            future.cancel()
        self.wake.set()

    def record_bytes(self, delta: int) -> None:
        done = self.tally.add(delta)
        now = time.monotonic()
        if self._stopped or (now - self._last_report < REPORT_INTERVAL_S and done < self.total):
            return
        # One reporter at a time keeps reports in order; a busy reporter means skip this.
        if not self._report_lock.acquire(blocking=False):
            return
        try:
            self._last_report = now
            self._on_progress(self.snapshot(done))
        except Exception as exc:  # re-raised by the caller, see class doc
            with self._lock:
                if self.callback_error is None:
                    self.callback_error = exc
            self.stop()
        finally:
            self._report_lock.release()

    def forget(self, count: int) -> None:
        """Stop waiting for transfers that were never submitted."""
        self._finish(count, None)

    def record_done(self, future: TransferFuture) -> None:
        failure: BaseException | None = None
        try:
            future.result()  # does not block: s3transfer calls on_done once finished
        except BaseException as exc:  # kept for the caller to translate
            failure = exc
        self._finish(1, failure)

    def _finish(self, count: int, failure: BaseException | None) -> None:
        with self._lock:
            # After a stop, failures are the cancellations it caused, not news. Checking
            # here also matters for locking: cancelling a not-started transfer runs this
            # callback inside s3transfer's (non-reentrant) coordinator lock, so it must
            # not cancel again.
            first = failure is not None and not self._stopped
            if first and self.first_failure is None:
                self.first_failure = failure
            self._pending -= count
            finished = self._pending <= 0
        if first:
            self.stop()  # one file failed: the job fails, so stop the others early
        if finished:
            self.all_done.set()
            self.wake.set()


class RunSubscriber(BaseSubscriber):
    def __init__(self, run: UploadRun) -> None:
        self._run = run

    def on_progress(self, future: TransferFuture, bytes_transferred: int, **kwargs: Any) -> None:
        self._run.record_bytes(bytes_transferred)

    def on_done(self, future: TransferFuture, **kwargs: Any) -> None:
        self._run.record_done(future)
