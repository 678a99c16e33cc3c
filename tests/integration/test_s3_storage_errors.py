"""S3 failures become one clear error kind: a real HTTP server answers like S3 would."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.objects import Upload
from mirror.domain.progress import AbortSignal, Progress
from mirror.s3.storage import AUDIO_CONTENT_TYPE, S3Storage

SECRET = "hunter2-very-secret-key"


class CannedS3:
    """Answers every request with one S3 error (status + code), counting requests."""

    def __init__(self, status: int, code: str) -> None:
        self.status, self.code = status, code
        self.requests = 0
        canned = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                canned.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                body = (
                    f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{canned.code}</Code>"
                    f"<Message>canned {canned.code}</Message></Error>"
                ).encode()
                self.send_response(canned.status)
                self.send_header("Content-Type", "application/xml")
                self.send_header(
                    "Content-Length", "0" if self.command == "HEAD" else str(len(body))
                )
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@pytest.fixture
def small_file(tmp_path: Path) -> Path:
    path = tmp_path / "1-eng.m4a"
    path.write_bytes(os.urandom(100_000))
    return path


def _storage(server: CannedS3) -> S3Storage:
    return S3Storage(
        "media-bucket",
        endpoint_url=server.endpoint_url,
        access_key_id="AKIDEXAMPLE",
        secret_access_key=SECRET,
        max_attempts=2,
        connect_timeout_s=2.0,
        read_timeout_s=5.0,
    )


@pytest.fixture
def canned(request: pytest.FixtureRequest) -> Iterator[CannedS3]:
    status, code = request.param
    server = CannedS3(status, code)
    yield server
    server.close()


def _upload(storage: S3Storage, path: Path) -> None:
    def ignore(progress: Progress) -> None:
        pass

    upload = Upload(path, "prefix/item/audio/1-eng.m4a", AUDIO_CONTENT_TYPE)
    storage.upload_files([upload], on_progress=ignore, abort=AbortSignal())


@pytest.mark.parametrize(
    "canned",
    [(403, "AccessDenied"), (403, "InvalidAccessKeyId"), (403, "SignatureDoesNotMatch")],
    indirect=True,
)
def test_denied_upload_is_permanent_and_never_shows_the_secret(
    canned: CannedS3, small_file: Path
) -> None:
    storage = _storage(canned)

    with pytest.raises(PermanentError, match="S3 denied access to bucket 'media-bucket'") as info:
        _upload(storage, small_file)

    assert canned.code in str(info.value)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("canned", [(403, "AccessDenied")], indirect=True)
def test_denied_bucket_check_says_what_to_check(canned: CannedS3) -> None:
    with pytest.raises(PermanentError) as info:
        _storage(canned).check_bucket()

    assert str(info.value) == (
        "S3 denied access to bucket 'media-bucket' (check the credentials and policy)"
    )


@pytest.mark.parametrize("canned", [(404, "NoSuchBucket")], indirect=True)
def test_missing_bucket_on_upload_is_permanent(canned: CannedS3, small_file: Path) -> None:
    with pytest.raises(PermanentError, match="S3 bucket 'media-bucket' does not exist"):
        _upload(_storage(canned), small_file)


@pytest.mark.parametrize(
    "canned",
    [(503, "SlowDown"), (500, "InternalError"), (503, "ServiceUnavailable")],
    indirect=True,
)
def test_throttling_and_server_errors_are_transient_after_retries(
    canned: CannedS3, small_file: Path
) -> None:
    storage = _storage(canned)

    with pytest.raises(TransientError, match=f"S3 upload failed: {canned.code}") as info:
        _upload(storage, small_file)

    assert canned.endpoint_url in str(info.value)
    assert canned.requests == 2  # botocore retried once (max_attempts=2) before giving up
