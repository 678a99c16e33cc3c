"""A rate-limiting TCP proxy for the benchmarks: one shared budget per direction.

`bench/job.py` puts one in front of the Jellyfin side (nginx) with the server-to-client
direction limited (the download) and one in front of S3 with the client-to-server
direction limited (the upload), so a job sees a LAN Jellyfin and an internet S3 link.
The limit is for all connections together (the S3 upload opens several at once), unlike
tests/fixtures/tcp_proxy.py, which paces each connection on its own.

Pacing is a virtual clock: every chunk reserves `len / rate` seconds of the link after
the previous reservation and waits until its slot begins (idle time is not banked beyond
`burst_s`, as a token bucket). Threads, not asyncio: recv/sendall release the GIL, and
the bench runs beside the worker on the same 2 cores.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

CHUNK = 256 * 1024


class Pacer:
    """A byte budget of `rate` bytes/s shared by the threads that call `take`."""

    def __init__(self, rate: float, *, burst_s: float = 0.05) -> None:
        self.rate = rate
        self.burst_s = burst_s
        self._lock = threading.Lock()
        self._next = time.monotonic()

    def take(self, size: int) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(self._next, now - self.burst_s)
            self._next = start + size / self.rate
        delay = start - now
        if delay > 0:
            time.sleep(delay)


class RateLimitedProxy:
    """127.0.0.1:<port> -> target; `upstream_rate` paces client->target bytes,
    `downstream_rate` target->client bytes (None: unlimited). Use as a context manager."""

    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        upstream_rate: float | None = None,
        downstream_rate: float | None = None,
    ) -> None:
        self.target = (target_host, target_port)
        self._up = Pacer(upstream_rate) if upstream_rate else None
        self._down = Pacer(downstream_rate) if downstream_rate else None
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port: int = self._listener.getsockname()[1]
        self._closing = False
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)

    @classmethod
    def for_url(
        cls, url: str, *, upstream_rate: float | None = None, downstream_rate: float | None = None
    ) -> RateLimitedProxy:
        host, _, port = url.removeprefix("http://").rstrip("/").partition(":")
        return cls(host, int(port), upstream_rate=upstream_rate, downstream_rate=downstream_rate)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> RateLimitedProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing = True
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets.update((client, upstream))
            pending = [2]  # pumps of this connection still running; the last one closes
            for source, sink, pacer in (
                (client, upstream, self._up),
                (upstream, client, self._down),
            ):
                threading.Thread(
                    target=self._pump,
                    args=(source, sink, pacer, pending),
                    name="proxy-pump",
                    daemon=True,
                ).start()

    def _pump(
        self, source: socket.socket, sink: socket.socket, pacer: Pacer | None, pending: list[int]
    ) -> None:
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        try:
            while True:
                size = source.recv_into(buffer)
                if not size:
                    break
                if pacer is not None:
                    pacer.take(size)
                sink.sendall(view[:size])
        except OSError:
            pass
        finally:
            # Half-close: the other direction may still be answering.
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
            with self._lock:
                pending[0] -= 1
                last = pending[0] == 0
                if last:
                    self._sockets.difference_update((source, sink))
            if last:
                source.close()
                sink.close()
