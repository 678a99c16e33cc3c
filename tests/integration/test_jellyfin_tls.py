"""JellyfinClient over HTTPS: the CAs it trusts (certifi's, or SSL_CERT_FILE) and what
a client costs to make now that every client of a process shares one TLS context."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mirror.jellyfin.client import JellyfinClient


class _PublicInfo(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"Version": "10.10.7", "ServerName": "tls"}).encode()
        self.send_response(200 if self.path == "/System/Info/Public" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def _self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def https_jellyfin(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A server answering /System/Info/Public over TLS with a self-signed certificate."""
    cert, key = _self_signed(tmp_path, "server")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PublicInfo)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _version(url: str) -> str | None:
    with JellyfinClient(url, "key") as client:
        return client.server_version()


def test_ssl_cert_file_decides_which_server_certificates_are_trusted(
    https_jellyfin: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, cert = https_jellyfin
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    assert _version(url) is None  # certifi's CAs do not know it
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert _version(url) == "10.10.7"
    other, _ = _self_signed(tmp_path, "other")
    monkeypatch.setenv("SSL_CERT_FILE", str(other))
    assert _version(url) is None  # the shared context follows the variable
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert _version(url) == "10.10.7"


def test_a_client_is_cheap_to_make(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each httpx client used to read the CA bundle for itself (~20 ms of CPU, twice per
    JellyfinClient); `mirror serve` makes a client per library search."""
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)  # a folder is read lazily: cheap
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # certifi's bundle, read whole
    JellyfinClient("https://jellyfin.invalid", "key").close()
    started = time.process_time()
    for _ in range(10):
        JellyfinClient("https://jellyfin.invalid", "key").close()
    per_client = (time.process_time() - started) / 10
    print(f"one JellyfinClient: {per_client * 1000:.1f} ms of CPU")
    assert per_client < 0.01
