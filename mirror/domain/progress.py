"""Progress of one job attempt and the signal that stops it.

Adapters (download, ffmpeg, S3) only know these two things: they report `Progress`
through a callback and they stop when the `AbortSignal` fires. The `Heartbeat` is the
callback and the one that fires the signal, so adapters never touch the database.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeVar

log = logging.getLogger("mirror.progress")  # the name logs carried before the move to packages

T = TypeVar("T")

# `waiting`: claimed, but held back before a phase (a download slot); `note` says why.
Phase = Literal["download", "transcode", "upload", "waiting"]


@dataclass(frozen=True, slots=True)
class Progress:
    """Latest counts of one phase; fields are None where unknown."""

    phase: Phase
    bytes_done: int | None = None
    bytes_total: int | None = None
    frames_done: int | None = None
    frames_total: int | None = None
    out_time_s: float | None = None
    duration_s: float | None = None
    speed_bps: int | None = None  # bytes per second (download, upload)
    speed_factor: float | None = None  # media seconds per second (ffmpeg's `2.5x`)
    note: str | None = None

    @property
    def percent(self) -> float | None:
        """Best estimate of completion: frames, else bytes, else media time."""
        for done, total in (
            (self.frames_done, self.frames_total),
            (self.bytes_done, self.bytes_total),
            (self.out_time_s, self.duration_s),
        ):
            if done is not None and total:
                return round(min(100.0, max(0.0, 100.0 * done / total)), 1)
        return None

    def to_json(self) -> dict[str, Any]:
        """The `heartbeat_data` shape: keys present only where known."""
        data = {key: value for key, value in asdict(self).items() if value is not None}
        percent = self.percent
        if percent is not None:
            data["percent"] = percent
        return data


ProgressCallback = Callable[[Progress], None]


class AbortSignal:
    """Thread-safe 'stop this attempt' flag carrying the reason as an exception.

    The heartbeat (or a shutdown) fires it from any thread; the job's thread sees it at
    its next progress callback via `raise_if_set`, and blocking work (ffmpeg, a socket)
    is interrupted at once through the hooks registered with `on_abort`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reason: BaseException | None = None
        self._hooks: list[Callable[[], None]] = []
        self._fired = threading.Event()

    @property
    def reason(self) -> BaseException | None:
        return self._reason

    def is_set(self) -> bool:
        return self._reason is not None

    def trigger(self, reason: BaseException) -> None:
        """Fire once; later triggers keep the first reason. Runs the abort hooks."""
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason
            hooks = list(self._hooks)
        self._fired.set()
        for hook in hooks:
            try:
                hook()
            except Exception:  # a failing hook must not stop the others
                log.exception("abort hook failed")

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout`, waking at once when the signal fires; True if it has."""
        return self._fired.wait(timeout)

    def raise_if_set(self) -> None:
        reason = self._reason
        if reason is not None:
            raise reason

    def linked(self) -> AbortSignal:
        """A signal that fires whenever this one does (same reason) and can also fire on
        its own: one part of a job stopping the others without stopping the attempt."""
        child = AbortSignal()

        def follow() -> None:
            if self._reason is not None:
                child.trigger(self._reason)

        self.on_abort(follow)
        return child

    def on_abort(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Register a hook run when the signal fires (at once if it already has).

        Returns a function that unregisters the hook.
        """
        with self._lock:
            fired = self._reason is not None
            if not fired:
                self._hooks.append(hook)
        if fired:
            hook()

        def unregister() -> None:
            with self._lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)

        return unregister


def abortably(abort: AbortSignal, call: Callable[[], T]) -> T:
    """Run a blocking call that has no abort hook of its own, stopping when `abort` fires.

    For calls without side effects worth waiting for (an item's metadata, the bucket
    check): the call runs in a helper thread, and when the signal fires the attempt
    raises its reason at once and leaves the call to end on its own timeouts.
    """
    abort.raise_if_set()
    finished = threading.Event()
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # handed to the waiting attempt below
            failure.append(error)
        finally:
            finished.set()

    unregister = abort.on_abort(finished.set)
    try:
        threading.Thread(target=run, name="abortable-call", daemon=True).start()
        finished.wait()
    finally:
        unregister()
    if outcome:
        return outcome[0]
    if failure:
        raise failure[0]
    abort.raise_if_set()
    raise AssertionError("unreachable: the call finished or the signal fired")
