"""Breaking a download's blocked socket read from another thread (the abort signal)."""

from __future__ import annotations

import contextlib
import socket
from typing import Any

import httpx

from mirror.domain.progress import AbortSignal


class Interrupter:
    """Lets the abort signal break a blocked socket read in the job's thread at once.

    Closing a socket from another thread does not wake a blocked recv() on Linux, but
    shutdown() does. The socket is caught through httpcore's trace hook as soon as the
    connection opens, so even a server that never sends headers can be interrupted.
    """

    def __init__(self, abort: AbortSignal, receive_buffer: int | None = None) -> None:
        self._abort = abort
        self._receive_buffer = receive_buffer
        self._socket: socket.socket | None = None
        self.response: httpx.Response | None = None

    def trace(self, name: str, info: dict[str, Any]) -> None:
        if not (name.startswith("connection.connect_") and name.endswith(".complete")):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            self._socket = sock
            if self._receive_buffer is not None:
                # Best effort: a socket that refuses only keeps its bigger buffer.
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
            if self._abort.is_set():
                self.interrupt()

    def interrupt(self) -> None:
        sock = self._socket
        if sock is not None:
            # The plain-socket method: ssl.SSLSocket.shutdown would also drop the TLS
            # state under the reading thread's feet. OSError: already closed, read over.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        elif self.response is not None:
            # A custom transport (tests) has no socket; closing the stream is enough.
            # Best effort from a foreign thread: any failure means the stream is gone.
            with contextlib.suppress(Exception):
                self.response.close()

    def clear(self) -> None:
        self._socket = None
        self.response = None
