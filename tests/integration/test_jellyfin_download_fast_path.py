"""The download's fast path (body straight from the socket) and its throttled progress."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.errors import TransientError
from mirror.domain.progress import AbortSignal, Progress
from mirror.jellyfin.body import open_direct_body
from mirror.jellyfin.client import JellyfinClient, authorization_header
from mirror.jellyfin.download import REPORT_EVERY_S

MB = 1024 * 1024
ITEM_ID = "5f0c1e2d3b4a59687766554433221100"


class Recorder:
    def __init__(self) -> None:
        self.reports: list[Progress] = []

    def __call__(self, progress: Progress) -> None:
        self.reports.append(progress)


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fast-path") / "payload.mkv"
    path.write_bytes(os.urandom(6 * MB + 12345))  # not a multiple of the 1 MiB buffer
    return path


def add_payload(standin: JellyfinStandIn, path: Path) -> str:
    return standin.add_item(path, name="payload", streams=[], duration_s=4.0)


def test_current_httpx_gives_the_socket_and_the_body_arrives_whole(
    jellyfin: JellyfinStandIn, payload: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    headers = {"Authorization": authorization_header(jellyfin.api_key)}
    with (
        httpx.Client(base_url=jellyfin.url, headers=headers) as http,
        http.stream("GET", f"/Items/{item_id}/Download") as response,
    ):
        body = open_direct_body(response, timeout=10)
        # If an httpx/httpcore upgrade moves its internals, this fails (downloads still
        # work through iter_raw, only slower: see mirror/jellyfin/body.py).
        assert body is not None
        received = b"".join(bytes(chunk) for chunk in body.chunks())
    assert received == payload.read_bytes()


def test_a_transport_without_a_socket_falls_back_to_iter_raw(tmp_path: Path) -> None:
    size = 3 * MB
    data = os.urandom(size)
    pieces = 2000

    def serve(request: httpx.Request) -> httpx.Response:
        step = len(data) // pieces + 1
        chunks = (data[i : i + step] for i in range(0, len(data), step))
        return httpx.Response(200, headers={"Content-Length": str(size)}, content=chunks)

    progress = Recorder()
    dest = tmp_path / "movie.mkv"
    with JellyfinClient(
        "http://jellyfin.invalid", "key", transport=httpx.MockTransport(serve)
    ) as c:
        began = time.monotonic()
        got = c.download(
            ITEM_ID, dest, expected_size=size, on_progress=progress, abort=AbortSignal()
        )
        elapsed = time.monotonic() - began

    assert got.size == size and dest.read_bytes() == data
    # 2000 chunks, but reports come on a clock: the first, one per REPORT_EVERY_S, the last.
    assert len(progress.reports) <= 3 + elapsed / REPORT_EVERY_S
    assert len(progress.reports) < pieces / 10
    assert progress.reports[0].bytes_done == 0
    assert progress.reports[-1].bytes_done == size


def test_progress_keeps_flowing_on_a_slow_link_and_ends_at_the_size(
    jellyfin: JellyfinStandIn, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    size = payload.stat().st_size
    jellyfin.throttle(8 * MB)  # about 0.8 s in all
    progress = Recorder()
    with JellyfinClient(jellyfin.url, jellyfin.api_key) as client:
        began = time.monotonic()
        client.download(
            item_id,
            tmp_path / "m.mkv",
            expected_size=size,
            on_progress=progress,
            abort=AbortSignal(),
        )
        elapsed = time.monotonic() - began

    done = [report.bytes_done or 0 for report in progress.reports]
    assert done == sorted(done) and done[-1] == size
    assert len(done) <= 3 + elapsed / REPORT_EVERY_S
    assert len(set(done)) >= 4  # the bytes were reported while they arrived, not at the end


def test_a_server_that_goes_silent_mid_body_is_a_timeout_then_retried(
    jellyfin: JellyfinStandIn, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    jellyfin.stall_downloads(True)
    with (
        JellyfinClient(
            jellyfin.url,
            jellyfin.api_key,
            read_timeout=0.3,
            retry_attempts=2,
            retry_initial_wait=0.01,
            retry_max_wait=0.01,
        ) as client,
        pytest.raises(TransientError, match=r"did not answer in time"),
    ):
        client.download(
            item_id,
            tmp_path / "m.mkv",
            expected_size=None,
            on_progress=Recorder(),
            abort=AbortSignal(),
        )
    assert len(jellyfin.download_requests()) == 2
