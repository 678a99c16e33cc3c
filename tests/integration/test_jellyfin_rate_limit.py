"""MIRROR_DOWNLOAD_RATE_LIMIT through the real download loop, timed by the stand-in: the
body leaves the server at the limit (TCP flow control carries our pace back to it)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from mirror.demo.stand_in.handler import DownloadSpan
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.errors import ShutdownRequested
from mirror.domain.progress import AbortSignal, Progress
from mirror.jellyfin.client import JellyfinClient

SIZE = 6_000_000


@pytest.fixture
def big_file(tmp_path: Path) -> Path:
    path = tmp_path / "movie.mkv"
    path.write_bytes(os.urandom(SIZE))
    return path


def served_span(standin: JellyfinStandIn) -> DownloadSpan:
    deadline = time.monotonic() + 10
    while not (spans := standin.download_spans()) and time.monotonic() < deadline:
        time.sleep(0.01)
    (span,) = spans
    return span


def download(
    standin: JellyfinStandIn, item_id: str, dest: Path, rate: float | None, abort: AbortSignal
) -> list[Progress]:
    seen: list[Progress] = []
    with JellyfinClient(standin.url, standin.api_key, download_rate_limit=rate) as client:
        client.download(item_id, dest, expected_size=SIZE, on_progress=seen.append, abort=abort)
    return seen


def test_a_download_leaves_the_server_at_the_rate_limit(
    jellyfin: JellyfinStandIn, big_file: Path, tmp_path: Path
) -> None:
    item_id = jellyfin.add_item(big_file, name="x", streams=[], duration_s=1)
    jellyfin.limit_send_buffer(64 * 1024)  # the server's clock follows our reads
    dest = tmp_path / "out" / "source.mkv"
    download(jellyfin, item_id, dest, 2_000_000, AbortSignal())
    assert dest.read_bytes() == big_file.read_bytes()
    span = served_span(jellyfin)
    took = span.ended - span.started
    # 6 MB at 2 MB/s: 3 s, less what our receive buffer (0.5 s) and first burst (0.1 s) hold.
    assert 2.0 <= took <= 4.5, took


def test_without_a_limit_the_same_download_takes_a_fraction_of_that(
    jellyfin: JellyfinStandIn, big_file: Path, tmp_path: Path
) -> None:
    item_id = jellyfin.add_item(big_file, name="x", streams=[], duration_s=1)
    jellyfin.limit_send_buffer(64 * 1024)
    download(jellyfin, item_id, tmp_path / "source.mkv", None, AbortSignal())
    span = served_span(jellyfin)
    assert span.ended - span.started < 1.0


def test_an_abort_ends_a_throttled_download_at_once(
    jellyfin: JellyfinStandIn, big_file: Path, tmp_path: Path
) -> None:
    item_id = jellyfin.add_item(big_file, name="x", streams=[], duration_s=1)
    abort = AbortSignal()
    # So low a limit that each chunk's debt is a long sleep: the abort must cut it short.
    timer = threading.Timer(0.5, lambda: abort.trigger(ShutdownRequested("shutting down")))
    timer.start()
    began = time.monotonic()
    with pytest.raises(ShutdownRequested):
        download(jellyfin, item_id, tmp_path / "source.mkv", 10_000, abort)
    assert time.monotonic() - began < 2.0
