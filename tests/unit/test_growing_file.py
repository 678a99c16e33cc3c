"""GrowingFile: a reader follows an in-process writer by its reports, not by polling."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mirror.errors import JobCancelled
from mirror.growing_file import REPORTED_WAIT_S, GrowingFile
from mirror.progress import AbortSignal

HANDOFFS = 20


def test_a_reader_wakes_on_each_reported_write_not_on_the_poll(tmp_path: Path) -> None:
    """Writer and reader take turns 20 times, the reader waiting each time. Waking only
    on the size check (every REPORTED_WAIT_S = 1 s) would take about 20 s; woken by
    `wrote` it takes 20 x 20 ms."""
    path = tmp_path / "source.mkv"
    path.write_bytes(b"")
    growing = GrowingFile(path, AbortSignal(), writer_reports=True)
    consumed = threading.Semaphore(0)

    def writer() -> None:
        with path.open("ab", buffering=0) as file:
            for _ in range(HANDOFFS):
                time.sleep(0.02)  # the reader is waiting by now
                file.write(b"x" * 1000)
                growing.wrote(file.tell())
                consumed.acquire(timeout=30)
        growing.finish()

    thread = threading.Thread(target=writer)
    began = time.monotonic()
    thread.start()
    received = 0
    with growing.open() as reader:
        while chunk := reader.read_some(65536):
            received += len(chunk)
            consumed.release()
    elapsed = time.monotonic() - began
    thread.join(30)
    assert received == HANDOFFS * 1000
    assert elapsed < HANDOFFS * REPORTED_WAIT_S / 4, elapsed


def test_an_abort_wakes_a_reader_waiting_for_a_reporting_writer(tmp_path: Path) -> None:
    path = tmp_path / "source.mkv"
    path.write_bytes(b"abc")
    abort = AbortSignal()
    growing = GrowingFile(path, abort, writer_reports=True)
    timer = threading.Timer(0.1, lambda: abort.trigger(JobCancelled("cancelled")))
    timer.start()
    began = time.monotonic()
    with pytest.raises(JobCancelled):
        growing.wait_for(1000)
    assert time.monotonic() - began < REPORTED_WAIT_S
    timer.join()
