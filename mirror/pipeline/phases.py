"""One heartbeat for phases that run at once (download, transcode and upload overlap).

`heartbeat_data.phase` names the earliest phase not finished yet, with that phase's own
counts, so its percent only grows (each phase reports monotone counts) and the stall
watchdog watches the phase everything else waits for: a stalled download stops ffmpeg's
input, so nothing moves; a hung ffmpeg stops showing progress once the download is done.
Reports of later phases are kept and shown when their turn comes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from mirror.domain.progress import Phase, Progress, ProgressCallback

ORDER: tuple[Phase, ...] = ("download", "transcode", "upload")


class OverlappedPhases:
    """Callable progress sink for every phase; forwards the earliest unfinished one's."""

    def __init__(self, sink: ProgressCallback, *, moved: Callable[[], None] | None = None) -> None:
        self._sink = sink
        # Told when a phase not shown moves: while ffmpeg's input waits for the upload
        # (backpressure), the upload is the only thing moving, and that is no stall.
        self._moved = moved
        self._lock = threading.Lock()
        self._latest: dict[Phase, Progress] = {}
        self._finished: set[Phase] = set()

    @property
    def sink(self) -> ProgressCallback:
        """Where the forwarded progress goes (the heartbeat)."""
        return self._sink

    @property
    def current(self) -> Phase:
        with self._lock:
            return self._current_locked()

    def __call__(self, progress: Progress) -> None:
        with self._lock:
            self._latest[progress.phase] = progress
            current = self._current_locked()
        if progress.phase == current:
            self._sink(progress)
        elif self._moved is not None:
            self._moved()

    def finished(self, phase: Phase) -> None:
        """`phase` is over: the next unfinished phase's latest counts show from now on."""
        with self._lock:
            self._finished.add(phase)
            current = self._current_locked()
            latest = self._latest.get(current)
        if latest is not None and phase != current:
            self._sink(latest)

    def _current_locked(self) -> Phase:
        return next((phase for phase in ORDER if phase not in self._finished), ORDER[-1])
