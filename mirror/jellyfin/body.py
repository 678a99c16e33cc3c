"""A download's body read straight from the socket, once httpx has parsed the headers.

httpx hands a body over in 64 KiB pieces, each one allocated by recv, copied twice
inside h11 and passed through several layers of Python calls. On a fast link that costs
about 1.5x curl's CPU per byte, which caps a download at ~0.55x curl's speed on a busy
2-core host (bench/download.py). After the headers, the rest of a Content-Length body is
nothing but bytes on the socket, so here it is read with `recv_into` into one reused
1 MiB buffer and handed out as views of that buffer: no allocation and no copy per chunk,
and 16x fewer system calls.

Getting at the socket means reaching into httpcore's HTTP/1.1 connection (private
attributes, each one checked). When anything is not as expected - another transport
(tests), HTTP/2, chunked encoding, a proxy tunnel, a newer httpcore - `open_direct_body`
returns None and the caller uses `iter_raw()`, which is correct everywhere, only slower.
A test pins the fast path on the current httpx so an upgrade that loses it is noticed;
pyproject.toml pins httpcore and h11 to the minor versions it was written against, and
`fast_path_problem` (logged once when a worker starts) says when it is unavailable.

It relies on keep-alive being off (`JellyfinClient`'s download client sets
`max_keepalive_connections=0`): h11 never sees the body, so its connection state is
wrong for another request, and the connection must be closed when the response is.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from typing import Any

import h11
import httpx

BUFFER_SIZE = 1024 * 1024


class BodyReadError(Exception):
    """The socket failed or closed before the whole body arrived.

    Not an OSError on purpose: the download loop maps OSError to disk trouble.
    """

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class DirectBody:
    """The remaining `length` bytes of a response body, read from `sock` directly."""

    def __init__(self, sock: socket.socket, buffered: bytes, length: int, timeout: float | None):
        self._sock = sock
        self._buffered = buffered  # body bytes h11 had already received with the headers
        self.length = length
        self._timeout = timeout

    def chunks(self) -> Iterator[memoryview | bytes]:
        """Yield the body in order. A yielded view is valid until the next one is asked for."""
        remaining = self.length
        if self._buffered:
            head = self._buffered[:remaining]
            remaining -= len(head)
            yield head
        buffer = bytearray(min(BUFFER_SIZE, max(remaining, 1)))
        view = memoryview(buffer)
        sock = self._sock
        sock.settimeout(self._timeout)
        while remaining:
            try:
                count = sock.recv_into(buffer, min(remaining, len(buffer)))
            except TimeoutError as exc:
                raise BodyReadError(f"read timed out: {exc}", timed_out=True) from exc
            except OSError as exc:
                raise BodyReadError(f"{type(exc).__name__}: {exc}") from exc
            if not count:
                raise BodyReadError(
                    f"peer closed connection without sending complete message body "
                    f"({remaining} bytes missing)"
                )
            remaining -= count
            yield view[:count]


def open_direct_body(response: httpx.Response, timeout: float | None) -> DirectBody | None:
    """The fast path for a plain HTTP/1.1 Content-Length body, or None to use iter_raw()."""
    if response.http_version != "HTTP/1.1" or "transfer-encoding" in response.headers:
        return None
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    length_header = response.headers.get("content-length", "").strip()
    if encoding != "identity" or not length_header.isdigit():
        return None
    if response.is_stream_consumed or response.is_closed:
        return None
    connection = _http11_connection(response)
    if connection is None:
        return None
    state = getattr(connection, "_h11_state", None)
    stream = getattr(connection, "_network_stream", None)
    if not isinstance(state, h11.Connection) or state.their_state is not h11.SEND_BODY:
        return None
    get_extra_info = getattr(stream, "get_extra_info", None)
    sock = get_extra_info("socket") if callable(get_extra_info) else None
    # Plain TCP or TLS straight on the socket; a TLS-in-TLS proxy tunnel has another stream.
    if type(sock) not in (socket.socket, ssl.SSLSocket):
        return None
    assert isinstance(sock, socket.socket)
    buffered, closed = state.trailing_data
    if closed and len(buffered) < int(length_header):
        return None  # let the normal path report the short body
    return DirectBody(sock, bytes(buffered), int(length_header), timeout)


def fast_path_problem() -> str | None:
    """None when this httpcore's HTTP/1.1 connection has what `open_direct_body` reads."""
    try:
        import httpcore

        connection = httpcore.HTTP11Connection(
            origin=httpcore.Origin(b"http", b"localhost", 80),
            stream=None,  # type: ignore[arg-type]
        )
    except Exception as error:  # an httpcore this code does not know
        return f"httpcore has no usable HTTP11Connection ({type(error).__name__})"
    missing = [name for name in ("_h11_state", "_network_stream") if not hasattr(connection, name)]
    if missing or not isinstance(getattr(connection, "_h11_state", None), h11.Connection):
        return f"httpcore's HTTP/1.1 connection lacks {', '.join(missing) or '_h11_state'}"
    return None


def _http11_connection(response: httpx.Response) -> Any:
    """httpx BoundSyncStream -> ResponseStream -> PoolByteStream -> connection stream."""
    stream: Any = response.stream
    for attribute in ("_stream", "_httpcore_stream", "_stream", "_connection"):
        stream = getattr(stream, attribute, None)
        if stream is None:
            return None
    return stream if type(stream).__name__ == "HTTP11Connection" else None
