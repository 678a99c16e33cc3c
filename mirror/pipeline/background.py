"""One call of a job on its own thread (the download, while ffmpeg already reads it).

Its failure fires the job's `stop` signal so the work that depends on it ends at once
(ffmpeg is killed, the uploads are aborted) and the job thread raises that failure;
leaving the `with` block early stops the call and waits for it, so no thread outlives
the attempt that started it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from mirror.domain.progress import AbortSignal

T = TypeVar("T")


class BackgroundCall(Generic[T]):
    """`call` on a daemon thread; `join` waits for it and returns what it returned or
    raises what it raised."""

    def __init__(self, call: Callable[[], T], stop: AbortSignal, *, name: str) -> None:
        self._call = call
        self._stop = stop
        self._error: BaseException | None = None
        self._result: T | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> BackgroundCall[T]:
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            self._stop.trigger(exc)  # the call honours `stop` (the download does)
        self._thread.join()

    def join(self) -> T:
        """Wait for the call; its result, or its error (or the stop's reason if it came
        first) raised."""
        while self._thread.is_alive():
            self._thread.join(0.1)
        if self._error is not None:
            raise self._error
        self._stop.raise_if_set()
        assert self._result is not None, "the call returned None"
        return self._result

    def _run(self) -> None:
        try:
            self._result = self._call()
        except BaseException as exc:  # raised again by join in the job's thread
            self._error = exc
            self._stop.trigger(exc)
