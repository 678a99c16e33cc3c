"""The player's media links for MIRROR_S3_PUBLIC_URL: made for where a browser reaches S3.

A reverse proxy in front of S3 under a path (`/s3/`) strips the path and passes the
browser's Host on, as the README tells; the link must still be accepted by S3 (SigV4
signs the path and the Host, so it is signed for the path S3 sees).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import pytest

from mirror import wiring
from mirror.domain.errors import ConfigError
from mirror.settings import Settings, load_settings
from mirror.web.player import Player
from tests.fixtures.s3 import S3Target

KEY = "mirror/0123456789abcdef0123456789abcdef/video.mp4"
BODY = b"fragmented mp4 bytes " * 100


class PathProxy(ThreadingHTTPServer):
    """`location /s3/ { proxy_pass <upstream>/; proxy_set_header Host $host; }`"""

    def __init__(self, upstream: str, prefix: str) -> None:
        target = urlsplit(upstream)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not self.path.startswith(prefix + "/"):
                    self.send_error(404)
                    return
                upstream_conn = http.client.HTTPConnection(target.hostname, target.port)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                try:
                    upstream_conn.request("GET", self.path[len(prefix) :], headers=headers)
                    answer = upstream_conn.getresponse()
                    body = answer.read()
                finally:
                    upstream_conn.close()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                proxy.forwarded.append(self.path)  # before the answer: the test reads it next
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.forwarded: list[str] = []
        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def path_proxy(s3: S3Target) -> Iterator[PathProxy]:
    proxy = PathProxy(s3.endpoint_url, "/s3")
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    yield proxy
    proxy.shutdown()
    proxy.server_close()


def settings_for(s3: S3Target, **public: object) -> Settings:
    return load_settings(
        s3_bucket=s3.bucket,
        s3_region=s3.region,
        s3_endpoint_url=s3.endpoint_url,
        s3_access_key_id=s3.access_key_id,
        s3_secret_access_key=s3.secret_access_key,
        **public,
    )


def test_a_link_under_a_reverse_proxy_path_reaches_the_object(
    s3: S3Target, path_proxy: PathProxy
) -> None:
    s3.client.put_object(Bucket=s3.bucket, Key=KEY, Body=BODY)
    public = f"http://localhost:{path_proxy.server_port}/s3"  # not serve's host name either
    link = wiring.object_links(settings_for(s3, s3_public_url=public), s3.client)

    url = link(KEY)

    assert url.startswith(f"{public}/{s3.bucket}/{KEY}?"), url
    assert "X-Amz-Signature=" in url
    answer = httpx.get(url, headers={"Range": "bytes=0-20"}, timeout=30)
    assert answer.status_code == 206, answer.text
    assert answer.content == BODY[:21]
    assert path_proxy.forwarded and path_proxy.forwarded[0].startswith(f"/s3/{s3.bucket}/")


def test_the_page_csp_lets_media_in_from_the_public_origin_only(s3: S3Target) -> None:
    public = "https://media.example/s3"
    link = wiring.object_links(settings_for(s3, s3_public_url=public), s3.client)
    player = Player(jobs=None, client=s3.client, bucket=s3.bucket, link=link)  # type: ignore[arg-type]

    assert "media-src 'self' blob: https://media.example;" in player.csp
    assert "connect-src 'self' https://media.example;" in player.csp
    assert urlsplit(s3.endpoint_url).netloc not in player.csp


def test_a_public_bucket_gets_plain_links_under_the_public_url(s3: S3Target) -> None:
    settings = settings_for(s3, s3_public_url="https://cdn.example/m", s3_public_bucket=True)
    link = wiring.object_links(settings, s3.client)

    assert link("a b/ü.vtt") == f"https://cdn.example/m/{s3.bucket}/a%20b/%C3%BC.vtt"


def test_a_public_bucket_without_a_public_url_is_one_clear_error(s3: S3Target) -> None:
    with pytest.raises(
        ConfigError, match="MIRROR_S3_PUBLIC_BUCKET=true needs MIRROR_S3_PUBLIC_URL"
    ):
        wiring.object_links(settings_for(s3, s3_public_bucket=True), s3.client)
