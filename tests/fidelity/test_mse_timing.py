"""Issue 19 in the browser: the mirrored files appended to Media Source Extensions in
Chromium, as hls.js / video.js do (`segments` mode) and as Shaka does for HLS
(`sequence` mode). MSE places samples by tfdt + composition offset alone, so this is the
reading the issue is about: the white frame must be presented at MARK_S, both buffers
must start at 0, and a 5.1 track must append at all (channel configuration 0 does not).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mirror.demo.media import SampleMedia
from mirror.hls.fragments import read_fragment_index
from mirror.testing.fidelity_samples import MARK_S
from tests.e2e.browser_support import browser_page, needs_chromium
from tests.fidelity.test_av_sync import SYNC_TOLERANCE_S, fetch, mirror_sample
from tests.fixtures.inprocess import InProcess

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Route

ORIGIN = "http://mirror.test"

# Appends video.mp4 and the .m4a whole, plays at quarter speed from just before the mark and
# notes the media time of the first bright frame presented (requestVideoFrameCallback + a
# 1-pixel canvas read). Quarter speed: on a loaded machine (-n 6) half speed once dropped
# the one-frame mark.
_PAGE = """<!doctype html><video id="v" muted></video><canvas id="c" width="8" height="6">
</canvas><script>
window.measure = async (mode, videoType, audioType, from) => {
  const v = document.getElementById("v"), source = new MediaSource();
  v.src = URL.createObjectURL(source);
  await new Promise(r => source.addEventListener("sourceopen", r, {once: true}));
  // Every SourceBuffer must exist before the first append.
  const buffers = {video: source.addSourceBuffer(videoType),
                   audio: source.addSourceBuffer(audioType)};
  for (const [kind, url] of [["video", "video.mp4"], ["audio", "audio.m4a"]]) {
    const buffer = buffers[kind];
    buffer.mode = mode;
    const once = (event, value) =>
      new Promise(r => buffer.addEventListener(event, () => r(value), {once: true}));
    const failed = once("error", "error"), done = once("updateend", "ok");
    buffer.appendBuffer(await (await fetch(url)).arrayBuffer());
    if (await Promise.race([done, failed]) !== "ok") return {error: kind + " append failed"};
  }
  source.endOfStream();
  const context = document.getElementById("c").getContext("2d", {willReadFrequently: true});
  let flash = null;
  await new Promise(resolve => {
    const seen = (now, frame) => {
      context.drawImage(v, 0, 0, 8, 6);
      if (flash === null && context.getImageData(4, 3, 1, 1).data[0] > 128) flash = frame.mediaTime;
      if (flash !== null || v.ended || v.currentTime > 2) resolve();
      else v.requestVideoFrameCallback(seen);
    };
    v.addEventListener("seeked", () => {
      v.requestVideoFrameCallback(seen);
      v.playbackRate = 0.25;
      v.play();
    }, {once: true});
    v.currentTime = from;
  });
  v.pause();
  const range = b => b.buffered.length ? b.buffered.start(0) : null;
  return {flash, video: range(buffers.video), audio: range(buffers.audio)};
};
</script>"""


@needs_chromium
@pytest.mark.parametrize("shape", ["delayed_audio", "b_frames_ac3_51"])
def test_chromium_mse_presents_the_mark_where_the_source_has_it(
    inproc: InProcess,
    fidelity_sample: Callable[[str], SampleMedia],
    tmp_path: Path,
    chromium: Browser,
    shape: str,
) -> None:
    item, job = mirror_sample(inproc, fidelity_sample(shape))
    assert job.audio_keys is not None
    video = fetch(inproc, f"mirror/{item}/video.mp4", tmp_path)
    audio = fetch(inproc, job.audio_keys[0]["key"], tmp_path)
    types = [
        f'{kind}/mp4; codecs="{read_fragment_index(path).codec}"'
        for kind, path in (("video", video), ("audio", audio))
    ]
    bodies = {"/": (_PAGE.encode(), "text/html"), "/video.mp4": (video.read_bytes(), "video/mp4")}
    bodies["/audio.m4a"] = (audio.read_bytes(), "audio/mp4")

    def serve(route: Route) -> None:
        body, content_type = bodies[route.request.url.removeprefix(ORIGIN)]
        route.fulfill(body=body, content_type=content_type)

    results: dict[str, Any] = {}
    # The worker's browser, with the other tests' arguments: no autoplay flag, as the
    # <video> is muted, which Chromium lets play without a user gesture.
    with browser_page(chromium) as page:
        page.route(f"{ORIGIN}/**", serve)
        for mode in ("segments", "sequence"):
            page.goto(f"{ORIGIN}/")
            results[mode] = page.evaluate(
                "([m, v, a, f]) => measure(m, v, a, f)", [mode, *types, MARK_S - 0.3]
            )

    for mode, found in results.items():
        assert "error" not in found, (mode, found)
        assert found["video"] == pytest.approx(0, abs=0.001), (mode, found)
        assert found["audio"] == pytest.approx(0, abs=0.001), (mode, found)
        assert found["flash"] == pytest.approx(MARK_S, abs=SYNC_TOLERANCE_S), (mode, found)
