"""Issue 19: "the master plays in a real browser player", for every shape of the corpus.

Every shape (tests/fixtures/shape_corpus.py) mirrored once; the stored objects are
served as they are by a plain static server on 127.0.0.1 (the playlists hold relative
URIs and byte ranges, so a server that answers Range requests is all a player needs,
as from the bucket), and one Debian Chromium plays each master with hls.js from npm:
playback passes 1.5 s with no fatal error, the video element shows the displayed size
(an anamorphic copy stretched, a rotated one upright) and hls.js lists the audio track.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mirror.web.player import HLSJS_VERSION
from tests.e2e.browser_support import browser_page, needs_chromium, npm_file
from tests.fixtures.shape_corpus import SHAPES, MirroredShape

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = needs_chromium

PAGE = """<!doctype html>
<html><body><video id="video" muted playsinline></video>
<script src="/hls.min.js"></script>
<script>
  const video = document.getElementById("video");
  const hls = new Hls();
  window.hls = hls;
  window.fatal = null;
  hls.on(Hls.Events.ERROR, (_, data) => {
    if (data.fatal) window.fatal = `${data.type}: ${data.details}`;
  });
  hls.on(Hls.Events.MANIFEST_PARSED, () => {
    video.play().catch((error) => { window.fatal = String(error); });
  });
  hls.loadSource(new URLSearchParams(location.search).get("master"));
  hls.attachMedia(video);
</script></body></html>
"""
STATE = """(() => {
  const video = document.getElementById("video");
  return {
    time: video.currentTime, width: video.videoWidth, height: video.videoHeight,
    fatal: window.fatal, error: video.error && video.error.message,
    audio: window.hls.audioTracks.map((t) => ({ lang: t.lang, channels: t.channels })),
  };
})()"""


class _RangeHandler(SimpleHTTPRequestHandler):
    """Static files, answering `Range: bytes=a-b` with 206 as S3 does (hls.js asks for
    each fragment by its EXT-X-BYTERANGE)."""

    def send_head(self) -> Any:
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        path = Path(self.translate_path(self.path))
        if wanted is None or not path.is_file():
            return super().send_head()
        size = path.stat().st_size
        start = int(wanted[1])
        end = min(int(wanted[2]) if wanted[2] else size - 1, size - 1)
        with path.open("rb") as file:
            file.seek(start)
            body = file.read(end - start + 1)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return BytesIO(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reports what matters."""


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory, mirrored_shape: Callable[[str], MirroredShape]
) -> Iterator[tuple[str, dict[str, MirroredShape]]]:
    """Every shape's objects under /<shape>/<key>, the page and hls.js, on 127.0.0.1."""
    root = tmp_path_factory.mktemp("shapes-site")
    (root / "play.html").write_text(PAGE)
    (root / "hls.min.js").symlink_to(npm_file("hls.js", HLSJS_VERSION, "dist/hls.min.js"))
    mirrored = {}
    for name in SHAPES:
        mirrored[name] = mirrored_shape(name)
        if mirrored[name].store.is_dir():
            (root / name).symlink_to(mirrored[name].store)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_RangeHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", mirrored
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def player_page(chromium: Browser) -> Iterator[tuple[Page, list[str]]]:
    """One page for every shape, with what its console said: each test loads play.html
    afresh (a new document, player and MediaSource). A browser context per test cost
    Chromium ~0.7 CPU-s each, and the static site keeps no cookies or storage."""
    with browser_page(chromium) as page:
        log: list[str] = []
        page.on("console", lambda message: log.append(message.text))
        yield page, log


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_plays_in_hls_js(
    site: tuple[str, dict[str, MirroredShape]],
    player_page: tuple[Page, list[str]],
    tmp_path: Path,
    shape: str,
) -> None:
    base, mirrored = site
    assert mirrored[shape].status == "done", mirrored[shape].error
    master = f"/{shape}/{mirrored[shape].folder}/master.m3u8"
    page, log = player_page
    log.clear()
    try:
        page.goto(f"{base}/play.html?master={master}")
        deadline = time.monotonic() + 30
        while (state := page.evaluate(STATE))["time"] <= 1.5 and not state["fatal"]:
            if time.monotonic() > deadline:
                pytest.fail(f"{shape}: playback did not pass 1.5 s: {state}; {log[-10:]}")
            time.sleep(0.1)
    finally:
        page.screenshot(path=str(tmp_path / f"{shape}.png"))
        page.goto("about:blank")  # the player stops with its document

    assert state["fatal"] is None and state["error"] is None, (state, log[-10:])
    assert (state["width"], state["height"]) == SHAPES[shape].displayed, state
    assert [track["channels"] for track in state["audio"]] == list(SHAPES[shape].channels)
