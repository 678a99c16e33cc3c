"""Every way an HTTP exchange with Jellyfin can break becomes PermanentError or
TransientError with one clear line, over real sockets: the stand-in (redirect loops)
and a raw server that answers what no well-behaved server would."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.progress import AbortSignal
from mirror.jellyfin.client import JellyfinClient

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
FAST = {"retry_attempts": 2, "retry_initial_wait": 0.001, "retry_max_wait": 0.01}
RAW_ANSWERS = {
    "gzip": b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Type: application/json\r\n"
    b"Content-Length: 5\r\n\r\nabcde",
    "ftp": b"HTTP/1.1 302 Found\r\nLocation: ftp://jellyfin/x\r\nContent-Length: 0\r\n\r\n",
    "garbage": b"NOT HTTP AT ALL\r\n\r\n",
    "bad-location": b"HTTP/1.1 302 Found\r\nLocation: http://[::1/\r\nContent-Length: 0\r\n\r\n",
}


@pytest.fixture
def raw_server() -> Iterator[str]:
    """A TCP server answering every request with RAW_ANSWERS[first path segment]."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)  # so the thread sees `stopping` soon
    stopping = threading.Event()

    def answer() -> None:
        while not stopping.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            with conn:
                request = conn.recv(65536).decode("latin-1")
                segment = request.split(" ")[1].strip("/").split("/")[0] if request else ""
                conn.sendall(RAW_ANSWERS.get(segment, RAW_ANSWERS["garbage"]))

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    host, port = listener.getsockname()[:2]
    yield f"http://{host}:{port}"
    stopping.set()
    thread.join(timeout=5)
    listener.close()


def _raw_client(raw_server: str, segment: str) -> JellyfinClient:
    return JellyfinClient(f"{raw_server}/{segment}", "CANARYraw", **FAST)


def test_a_redirect_loop_on_metadata_is_permanent_named_and_not_retried(
    jellyfin: JellyfinStandIn,
) -> None:
    jellyfin.fail_next(302, times=1000, path_prefix="/Items")
    with (
        JellyfinClient(jellyfin.url, jellyfin.api_key, **FAST) as client,
        pytest.raises(PermanentError) as caught,
    ):
        client.get_item(ITEM)
    assert str(caught.value).startswith(
        "Jellyfin redirected GET /Items more than 20 times (a redirect loop): "
        "check MIRROR_JELLYFIN_URL"
    )
    assert len(jellyfin.requests) == 21  # one try: the first request and 20 redirects


def test_a_redirect_loop_on_the_download_is_permanent(
    jellyfin: JellyfinStandIn, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    item = jellyfin.add_item(
        sample_h264_aac.path,
        name="Loop",
        streams=sample_h264_aac.streams,
        duration_s=sample_h264_aac.duration_s,
    )
    jellyfin.fail_next(307, times=1000, path_prefix=f"/Items/{item}/Download")
    with (
        JellyfinClient(jellyfin.url, jellyfin.api_key, **FAST) as client,
        pytest.raises(PermanentError, match=r"redirected GET /Items/\w+/Download more than 20"),
    ):
        client.download(
            item,
            tmp_path / "original.mkv",
            expected_size=sample_h264_aac.size,
            on_progress=lambda progress: None,
            abort=AbortSignal(),
        )
    assert len(jellyfin.download_requests()) == 21


@pytest.mark.parametrize(
    ("segment", "kind", "message"),
    [
        ("gzip", TransientError, "could not be decoded (its Content-Encoding or charset"),
        ("ftp", PermanentError, "cannot request GET /Items: Request URL has an unsupported"),
        ("garbage", TransientError, "Jellyfin sent a broken HTTP answer (GET /Items)"),
        ("bad-location", TransientError, "RemoteProtocolError: Invalid URL in location header"),
    ],
)
def test_odd_http_answers_become_one_clear_error_kind(
    raw_server: str, segment: str, kind: type[Exception], message: str
) -> None:
    with _raw_client(raw_server, segment) as client, pytest.raises(kind) as caught:
        client.get_item(ITEM)
    text = str(caught.value)
    assert message in text, text
    assert "\n" not in text and "CANARY" not in text
    if kind is TransientError:
        assert text.endswith("(gave up after 2 failed tries in a row)")


def test_downloads_sort_odd_answers_the_same_way(raw_server: str, tmp_path: Path) -> None:
    download: dict[str, Any] = {
        "expected_size": None,
        "on_progress": lambda progress: None,
        "abort": AbortSignal(),
    }
    with _raw_client(raw_server, "ftp") as client, pytest.raises(PermanentError):
        client.download(ITEM, tmp_path / "a.mkv", **download)
    with _raw_client(raw_server, "garbage") as client, pytest.raises(TransientError):
        client.download(ITEM, tmp_path / "b.mkv", **download)
