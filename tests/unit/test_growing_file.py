"""GrowingFile: a reader follows an in-process writer by its reports, not by polling."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mirror.domain.errors import JobCancelled, SourceChanged
from mirror.domain.progress import AbortSignal
from mirror.files.growing_file import REPORTED_WAIT_S, GrowingFile

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


def test_bytes_on_disk_count_only_once_the_writer_vouched_for_them(tmp_path: Path) -> None:
    """A partial file kept from an earlier attempt is on disk before the download knows
    whether it is still current: readers must not see it until the writer says so."""
    path = tmp_path / "source.mkv"
    path.write_bytes(b"old" * 1000)
    growing = GrowingFile(path, AbortSignal(), writer_reports=True)
    assert growing.size() == 0
    growing.wrote(1500)  # the server confirmed the first 1500 bytes
    with growing.open() as reader:
        assert reader.read_some(65536) == (b"old" * 1000)[:1500]


def test_a_start_over_before_any_byte_was_vouched_for_is_no_change(tmp_path: Path) -> None:
    path = tmp_path / "source.mkv"
    path.write_bytes(b"stale partial")
    growing = GrowingFile(path, AbortSignal(), writer_reports=True)
    growing.start_over()  # nobody could have read the stale bytes: no SourceChanged
    growing.require_unchanged()  # nor later
    # The new version's bytes are read as they are vouched for, from byte 0.
    path.write_bytes(b"new bytes")
    growing.wrote(9)
    with growing.open() as reader:
        assert reader.read_some(65536) == b"new bytes"


def test_a_start_over_after_bytes_were_read_fails_writer_and_readers(tmp_path: Path) -> None:
    """Whatever was made from the old bytes mixes two files: both sides learn of it."""
    path = tmp_path / "source.mkv"
    path.write_bytes(b"a" * 1000)
    growing = GrowingFile(path, AbortSignal(), writer_reports=True)
    growing.wrote(1000)
    with growing.open() as reader:
        assert reader.read(1000) == b"a" * 1000
        with pytest.raises(SourceChanged, match="changed on the server"):
            growing.start_over()
        path.write_bytes(b"b" * 3000)  # the new version, from byte 0
        growing.wrote(3000)
        with pytest.raises(SourceChanged):
            reader.read(1000)
