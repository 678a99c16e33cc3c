"""Peak sampling during a job: the work directory's size and the worker's resident memory.

A thread polls every `interval` (50 ms) and keeps the maxima, so the bench sees what a
deployment's disk and memory must hold at the worst moment, not at the end. Disk is
counted as `du` does (allocated blocks), memory from /proc/<pid>/status of the worker
process alone (ffmpeg and other children excluded); `peak_hwm` reads the kernel's own
high-water mark (VmHWM), which no sampling interval can miss.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from types import TracebackType


def tree_bytes(root: Path) -> int:
    """Bytes allocated under `root` (like `du -s --block-size=1`); 0 when it is gone."""
    total = 0
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        with (
            contextlib.suppress(FileNotFoundError, NotADirectoryError),
            os.scandir(folder) as entries,
        ):
            for entry in entries:
                with contextlib.suppress(FileNotFoundError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total


def status_kib(pid: int, field: str) -> int:
    """A `kB` field of /proc/<pid>/status (VmRSS, VmHWM); 0 once the process is gone."""
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    return 0


class PeakSampler:
    """Context manager: samples `work_dir` bytes and `pid`'s RSS until it exits."""

    def __init__(self, work_dir: Path | None, pid: int | None, interval: float = 0.05) -> None:
        self.work_dir = work_dir
        self.pid = pid
        self.interval = interval
        self.peak_dir_bytes = 0
        self.peak_rss_bytes = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-sampler", daemon=True)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        if self.work_dir is not None:
            self.peak_dir_bytes = max(self.peak_dir_bytes, tree_bytes(self.work_dir))
        if self.pid is not None:
            self.peak_rss_bytes = max(self.peak_rss_bytes, status_kib(self.pid, "VmRSS") * 1024)
        self.samples += 1


def peak_hwm(pid: int) -> int:
    """The process's resident-memory high-water mark so far, in bytes (VmHWM)."""
    return status_kib(pid, "VmHWM") * 1024
