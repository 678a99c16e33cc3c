"""Scrubbing thumbnails in the player: hovering the seek bar shows the thumbnail of the
time under the pointer, its sheet fetched from the (private) bucket by a presigned URL;
Shaka Player finds the same thumbnail through the master's EXT-X-IMAGE-STREAM-INF.

The item is mirrored by the real adapters (Postgres, the stand-in over HTTP, SeaweedFS)
with MIRROR_THUMBNAILS on and a 2 s interval; Chromium and hls.js as
tests/e2e/browser_support says.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mirror.demo.media import generate_sample
from tests.e2e.browser_support import allow_browsers, browser_page, needs_chromium, serving
from tests.e2e.test_independent_players import (  # noqa: F401
    ROUTED_PAGE_PERMISSIONS,
    _route_harness,
    libraries,
)
from tests.e2e.test_playable_mirror import CSP_RECORDER, _until, hlsjs_file  # noqa: F401
from tests.fixtures.stack import Stack

if TYPE_CHECKING:
    from playwright.sync_api import Browser

INTERVAL_S = 2


@pytest.fixture
def mirrored(stack: Stack, tmp_path: Path, ffmpeg_path: str) -> str:
    """A 7 s item (4 thumbnails at 0, 2, 4, 6 s) mirrored with thumbnails; its id."""
    sample = generate_sample(
        tmp_path / "scrub.mkv", "h264_aac", duration_s=7.0, ffmpeg_path=ffmpeg_path
    )
    item_id = stack.add_sample(sample, name="Scrub")
    stack.enqueue(item_id)
    stack.burst_in_process(MIRROR_THUMBNAILS="true", MIRROR_THUMBNAIL_INTERVAL=f"{INTERVAL_S}s")
    job = stack.job(item_id)
    assert job.status == "done", job.error
    allow_browsers(stack)
    return item_id


@pytest.fixture
def serve_url(stack: Stack, hlsjs_file: Path) -> Iterator[str]:  # noqa: F811
    with serving(stack, hlsjs_file) as url:
        yield url


@needs_chromium
def test_hovering_the_seek_bar_shows_the_thumbnail_of_that_time(
    stack: Stack,
    mirrored: str,
    serve_url: str,
    tmp_path: Path,
    libraries: dict[str, Path],  # noqa: F811
    chromium: Browser,
) -> None:
    manifest_key = stack.job(mirrored).manifest_key or ""
    body = stack.s3.client.get_object(Bucket=stack.s3.bucket, Key=manifest_key)["Body"].read()
    thumbnails = json.loads(body)["thumbnails"]
    assert (thumbnails["count"], thumbnails["origin"]) == (4, "ffmpeg")
    width, height = thumbnails["width"], thumbnails["height"]
    with browser_page(
        chromium, viewport={"width": 1000, "height": 720}, permissions=ROUTED_PAGE_PERMISSIONS
    ) as page:
        page.add_init_script(CSP_RECORDER)
        page.goto(f"{serve_url}/play/{mirrored}")
        _until(page, "window.mirrorPlayer.thumbnails() === 4", 20)
        _until(page, "Number.isFinite(document.getElementById('video').duration)", 20)
        seek = page.locator("#seek")
        box = seek.bounding_box()
        assert box is not None
        # 5 s of 7: the third thumbnail (4-6 s), third from the left on sheet 0.
        # hover() places the pointer where the bar is once it stands still (the
        # page's layout moves when the video's size arrives; a mouse.move to an
        # earlier box missed the bar in a full run).
        seek.hover(position={"x": box["width"] * 5 / 7, "y": box["height"] / 2})
        thumbnail = page.locator("#thumbnail")
        thumbnail.wait_for(state="visible", timeout=10_000)
        style = page.eval_on_selector(
            "#thumbnail",
            "e => ({image: e.style.backgroundImage, position: e.style.backgroundPosition,"
            " width: e.offsetWidth, time: e.textContent.trim()})",
        )
        assert f"/mirror/{mirrored}/thumbnails/0.jpg" in style["image"]
        assert "Signature=" in style["image"]  # presigned: the bucket is private
        assert style["position"] == f"-{2 * width}px 0px"
        assert style["time"] == "0:05"
        # The sheet really loads from the bucket's origin, at its full size.
        url = style["image"].split('"')[1]
        size = page.evaluate(
            """url => new Promise((done, fail) => { const i = new Image();
                   i.onload = () => done([i.naturalWidth, i.naturalHeight]);
                   i.onerror = () => fail("sheet did not load"); i.src = url; })""",
            url,
        )
        assert size == [4 * width, height]  # a sheet just big enough: 4 x 1
        assert page.evaluate("window.cspViolations") == []
        shot = tmp_path / "thumbnail-hover.png"
        page.screenshot(path=str(shot))
        print(f"screenshot: {shot}")
        assert shot.stat().st_size > 0

        # Shaka reads the same sheets from the master's EXT-X-IMAGE-STREAM-INF.
        with browser_page(chromium, permissions=ROUTED_PAGE_PERMISSIONS) as shaka:
            _route_harness(shaka, serve_url, "shaka", libraries)
            master = f"/play/{mirrored}/master.m3u8"
            shaka.goto(f"{serve_url}/test-players/harness.html?player=shaka&master={master}")
            _until(shaka, "window.mirrorPlayer.audio().length > 0", 30)
            found = shaka.evaluate(
                """async () => {
                    const tracks = window.shakaPlayer.getImageTracks();
                    const t = await window.shakaPlayer.getThumbnails(tracks[0].id, 5);
                    return {tracks: tracks.length, uri: t.uris[0], x: t.positionX,
                            y: t.positionY, w: t.width, h: t.height};
                }"""
            )
            assert found["tracks"] == 1
            assert f"/mirror/{mirrored}/thumbnails/0.jpg" in found["uri"]
            assert (found["x"], found["y"], found["w"], found["h"]) == (2 * width, 0, width, height)
