"""A mirrored item plays from its bucket: in ffmpeg over HTTP, and in headless Chromium.

The sample has two audio tracks, an embedded SubRip subtitle and a sidecar `.srt`
(fetched through the stand-in's `/Videos/.../Subtitles/{index}/Stream.vtt`). Chromium
and hls.js come as tests/e2e/browser_support says.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import pytest

from mirror.demo.media import SampleMedia, generate_sample
from mirror.demo.stand_in.catalog import Sidecar
from mirror.web.player import HLSJS_VERSION
from tests.e2e.browser_support import (
    allow_browsers,
    browser_page,
    needs_chromium,
    npm_file,
    serving,
)
from tests.fixtures.media import shared
from tests.fixtures.stack import Stack

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Route


@pytest.fixture(scope="module")
def playable_sample(tmp_path_factory: pytest.TempPathFactory, ffmpeg_path: str) -> SampleMedia:
    """8 s: long enough to play past 3 s, two 4 s fragments per output (made once for all
    xdist workers: the tests only read it)."""
    return shared(
        tmp_path_factory,
        "playable_h264_8s",
        lambda folder: generate_sample(
            folder / "playable.mkv", "h264_aac", duration_s=8.0, ffmpeg_path=ffmpeg_path
        ),
    )


@pytest.fixture(scope="session")
def hlsjs_file() -> Path:
    """hls.min.js from the npm package (never copied into the repo)."""
    return npm_file("hls.js", HLSJS_VERSION, "dist/hls.min.js")


@pytest.fixture
def mirrored(stack: Stack, playable_sample: SampleMedia, tmp_path: Path) -> str:
    """The sample mirrored with the default output format (hls); returns its item id."""
    srt = tmp_path / "playable.fr.srt"
    srt.write_text("1\n00:00:00,500 --> 00:00:07,000\nBonjour de mirror\n", encoding="utf-8")
    item_id = stack.jellyfin.add_item(
        playable_sample.path,
        name="Playable",
        streams=playable_sample.streams,
        duration_s=playable_sample.duration_s,
        sidecars=[Sidecar(srt, language="fre", title="Français (sidecar)")],
    )
    stack.enqueue(item_id)
    stack.burst_in_process()  # the mirror is the set-up here; the worker process is not
    job = stack.job(item_id)
    assert job.status == "done", job.error
    allow_browsers(stack)  # the bucket setup the README gives browsers on another origin
    return item_id


def test_job_row_and_manifest_list_playlists_and_both_subtitles(
    stack: Stack, mirrored: str
) -> None:
    job = stack.job(mirrored)
    assert job.hls_key == f"mirror/{mirrored}/master.m3u8"
    assert job.subtitle_keys is not None
    subs = {(e["key"].rsplit("/", 1)[1], e["external"], e["codec"]) for e in job.subtitle_keys}
    # Jellyfin numbers the sidecar 0 and the file's subtitle 4; the file's own index is 3.
    assert subs == {("3-eng.vtt", False, "subrip"), ("0-fre.vtt", True, "subrip")}
    master = _object(stack, job.hls_key).decode()
    assert master.count("TYPE=SUBTITLES") == 2 and master.count("TYPE=AUDIO") == 2
    assert re.search(r'CODECS="avc1\.[0-9a-f]{6},mp4a\.40\.2"', master)
    sidecar_vtt = _object(stack, f"mirror/{mirrored}/subtitles/0-fre.vtt").decode()
    assert sidecar_vtt.startswith("WEBVTT") and "Bonjour de mirror" in sidecar_vtt
    # Both on the video's clock (the sample's video starts at 0: no B-frames).
    own_vtt = _object(stack, f"mirror/{mirrored}/subtitles/3-eng.vtt").decode()
    for vtt in (sidecar_vtt, own_vtt):
        assert vtt.splitlines()[1] == "X-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000", vtt
    manifest = json.loads(_object(stack, job.manifest_key or ""))
    assert manifest["hls"]["master"] == job.hls_key
    assert {p["key"] for p in manifest["hls"]["playlists"]} >= {job.hls_key}
    assert all(p["sha256"] for p in manifest["hls"]["playlists"])
    assert [s["key"] for s in manifest["subtitles"]] == [e["key"] for e in job.subtitle_keys]


def test_ffmpeg_reads_master_over_http_from_s3_and_decodes_every_rendition(
    stack: Stack, mirrored: str, ffmpeg_path: str
) -> None:
    # A bucket (or CDN) that serves the mirror publicly: the playlists work unchanged.
    stack.s3.client.put_bucket_policy(
        Bucket=stack.s3.bucket,
        Policy=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": "*",
                        "Action": "s3:GetObject",
                        "Resource": f"arn:aws:s3:::{stack.s3.bucket}/mirror/*",
                    }
                ],
            }
        ),
    )
    url = f"{stack.s3.endpoint_url}/{stack.s3.bucket}/mirror/{mirrored}/master.m3u8"
    listing = subprocess.run(
        [ffmpeg_path, "-hide_banner", "-i", url], capture_output=True, text=True, timeout=60
    ).stderr
    streams = re.findall(r"Stream #0:\d+.*?: (Video|Audio|Subtitle): (\w+)", listing)
    assert sorted(streams) == [
        ("Audio", "aac"), ("Audio", "aac"),
        ("Subtitle", "webvtt"), ("Subtitle", "webvtt"),
        ("Video", "h264"),
    ], listing  # fmt: skip
    decoded = subprocess.run(
        [ffmpeg_path, "-hide_banner", "-nostdin", "-loglevel", "error", "-xerror",
         "-i", url, "-map", "0", "-c:s", "webvtt", "-f", "null", "-"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert decoded.returncode == 0 and decoded.stderr == "", decoded.stderr
    print(f"ffmpeg decoded {len(streams)} renditions of {url} without error: {streams}")


@pytest.fixture
def serve_url(stack: Stack, hlsjs_file: Path) -> Iterator[str]:
    with serving(stack, hlsjs_file) as url:
        yield url


def test_with_a_ui_password_only_a_logged_in_browser_gets_the_player_and_its_playlists(
    stack: Stack, mirrored: str, hlsjs_file: Path
) -> None:
    with (
        serving(stack, hlsjs_file, MIRROR_UI_PASSWORD="player test password") as url,
        httpx.Client(base_url=url, timeout=30) as browser,
    ):
        page = browser.get(f"/play/{mirrored}")
        assert page.status_code == 401 and "Log in" in page.text
        playlist = browser.get(f"/play/{mirrored}/video.m3u8")
        assert playlist.status_code == 401 and "Signature=" not in playlist.text
        login = browser.post("/api/login", json={"password": "player test password"})
        assert login.status_code == 200, login.text
        assert browser.get(f"/play/{mirrored}").status_code == 200
        playlist = browser.get(f"/play/{mirrored}/video.m3u8")
        assert playlist.status_code == 200 and "Signature=" in playlist.text  # presigned


# Recorded before the page's own scripts run (an init script is not subject to its CSP).
CSP_RECORDER = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
    window.cspViolations.push(e.violatedDirective + " " + e.blockedURI);
});
"""


def _until(page: Any, expression: str, timeout_s: float) -> Any:
    """Poll `expression` in the page until it is truthy; its value. (Playwright's
    wait_for_function evaluates a string, which the page's CSP forbids: no unsafe-eval.)"""
    import time

    deadline = time.monotonic() + timeout_s
    while not (value := page.evaluate(expression)):
        assert time.monotonic() < deadline, f"not true within {timeout_s} s: {expression}"
        time.sleep(0.1)
    return value


@needs_chromium
@pytest.mark.parametrize("engine", ["hls.js", "native"])
def test_player_page_plays_switches_audio_and_shows_a_subtitle_cue(
    stack: Stack, mirrored: str, serve_url: str, tmp_path: Path, chromium: Browser, engine: str
) -> None:
    if engine == "native" and not _has_native_hls(chromium):
        pytest.skip("this Chromium has no native HLS (141+ has)")
    messages: list[str] = []
    with browser_page(chromium, viewport={"width": 1000, "height": 720}) as page:
        page.on("console", lambda message: messages.append(message.text))
        page.add_init_script(CSP_RECORDER)
        # Without ?engine= the page picks hls.js in Chromium; native is forced to check it.
        query = "" if engine == "hls.js" else "?engine=native"
        page.goto(f"{serve_url}/play/{mirrored}{query}")
        _until(page, "window.mirrorPlayer.audio().length === 2", 20)
        audio: list[dict[str, Any]] = page.evaluate("window.mirrorPlayer.audio()")
        assert [(t["language"], t["name"]) for t in audio] == [
            ("eng", "English Stereo"),
            ("fra", "Français \u2013 commentaire"),
        ]
        assert audio[0]["active"]
        page.evaluate("document.getElementById('video').play()")
        _until(page, "document.getElementById('video').currentTime > 3", 30)

        page.evaluate("window.mirrorPlayer.setAudio(1)")
        _until(page, "window.mirrorPlayer.audio()[1].active", 10)
        after_switch = page.evaluate("document.getElementById('video').currentTime")
        _until(
            page,
            f"document.getElementById('video').currentTime > {after_switch + 0.5}"
            " || document.getElementById('video').ended",
            15,
        )

        assert page.evaluate("window.mirrorPlayer.engine") == engine
        # The page's Content-Security-Policy let hls.js, the playlists and the bucket in.
        assert page.evaluate("window.cspViolations") == []
        shot = tmp_path / f"player-{engine}.png"
        if engine == "native":
            # Chromium's own HLS lists no SUBTITLES renditions (why the page picks
            # hls.js there); it plays and switches audio, which is what is checked.
            assert page.evaluate("window.mirrorPlayer.subtitles()") == []
            page.screenshot(path=str(shot))
            return
        subtitles = page.evaluate("window.mirrorPlayer.subtitles()")
        languages = sorted(s["language"] for s in subtitles)
        assert languages == ["eng", "fre"], subtitles
        english = next(i for i, s in enumerate(subtitles) if s["language"] == "eng")
        page.evaluate(f"window.mirrorPlayer.setSubtitle({english})")
        page.evaluate(
            "(() => { const v = document.getElementById('video');"
            " v.currentTime = 1; return v.play(); })()"
        )
        cue = _until(
            page,
            """() => {
                    for (const track of document.getElementById('video').textTracks) {
                        if (track.mode === 'showing' && track.activeCues
                            && track.activeCues.length) return track.activeCues[0].text;
                    }
                    return null;
                }""",
            20,
        )
        assert cue == "Hello from mirror"
        # The page's own menus list the tracks and follow the switches.
        assert page.locator("#audio option").count() == 2
        assert page.eval_on_selector("#audio", "s => s.value") == "1"
        assert page.eval_on_selector("#subtitles", "s => s.value") == str(english)
        page.screenshot(path=str(shot))
        print(f"screenshot: {shot}")
        assert shot.stat().st_size > 0
        status = page.text_content("#status") or ""
        assert "failed" not in status, (status, messages)


def _has_native_hls(browser: Browser) -> bool:
    """Whether the running browser plays HLS itself: its own version, as the browser
    reports it (no second `chromium --version` process beside it)."""
    found = re.match(r"(\d+)\.", browser.version)
    return found is not None and int(found[1]) >= 141


def _object(stack: Stack, key: str) -> bytes:
    body: bytes = stack.s3.client.get_object(Bucket=stack.s3.bucket, Key=key)["Body"].read()
    return body


def test_output_format_mp4_keeps_todays_faststart_files_without_playlists(
    stack: Stack, playable_sample: SampleMedia
) -> None:
    item_id = stack.add_sample(playable_sample, name="Plain")
    stack.enqueue(item_id)
    stack.burst_in_process(MIRROR_OUTPUT_FORMAT="mp4")  # the setting's effect is the subject
    job = stack.job(item_id)
    assert job.status == "done", job.error
    assert job.hls_key is None and job.subtitle_keys == []
    assert [s["reason"] for s in job.skipped_streams or []] == [
        "text subtitle (subrip): output format mp4 writes no subtitles"
    ]
    root = f"mirror/{item_id}/"
    assert stack.object_keys() == [
        root + "audio/1-eng.m4a",
        root + "audio/2-fra.m4a",
        root + "manifest.json",
        root + "video.mp4",
    ]
    # faststart: the moov comes before the media data, no fragments.
    head = _object(stack, root + "video.mp4")[:64]
    assert head[4:8] == b"ftyp" and b"moov" in head and b"moof" not in head


@needs_chromium
def test_player_fetches_media_from_the_public_s3_url_when_the_internal_one_is_unreachable(
    stack: Stack, mirrored: str, hlsjs_file: Path, chromium: Browser
) -> None:
    """Compose: serve and the worker use the internal endpoint, the browser only reaches S3
    through another host name and port (a published port: here a TCP proxy)."""
    from tests.fixtures.tcp_proxy import TcpProxy

    internal = urlsplit(stack.s3.endpoint_url)
    assert internal.hostname is not None and internal.port is not None
    proxy = TcpProxy(internal.hostname, internal.port)
    public_origin = f"http://localhost:{proxy.port}"  # not the host name serve uses
    media_hosts: list[str] = []
    blocked: list[str] = []

    def unreachable(route: Route) -> None:
        blocked.append(route.request.url)
        route.abort("addressunreachable")

    try:
        with (
            serving(stack, hlsjs_file, MIRROR_S3_PUBLIC_URL=public_origin) as url,
            browser_page(chromium) as page,
        ):
            page.add_init_script(CSP_RECORDER)
            page.route(f"{stack.s3.endpoint_url}/**", unreachable)
            page.on(
                "request",
                lambda request: (
                    media_hosts.append(urlsplit(request.url).netloc)
                    if "X-Amz-Signature=" in request.url
                    else None
                ),
            )
            page.goto(f"{url}/play/{mirrored}")
            _until(page, "window.mirrorPlayer.audio().length === 2", 20)
            page.evaluate("document.getElementById('video').play()")
            _until(page, "document.getElementById('video').currentTime > 3", 30)
            assert page.evaluate("window.cspViolations") == []
    finally:
        proxy.close()
    assert blocked == []
    assert media_hosts and set(media_hosts) == {f"localhost:{proxy.port}"}, media_hosts
    print(f"{len(media_hosts)} media requests, all to {public_origin}; playback passed 3 s")


@needs_chromium
def test_hlsjs_switches_renditions_mid_play_without_a_stall(
    stack: Stack, playable_sample: SampleMedia, serve_url: str, chromium: Browser
) -> None:
    """MIRROR_RENDITIONS: the page lists every rendition, and a switch of hls.js's
    currentLevel mid-play goes on playing the new rendition with no buffer stall."""
    item_id = stack.jellyfin.add_item(
        playable_sample.path,
        name="Ladder",
        streams=playable_sample.streams,
        duration_s=playable_sample.duration_s,
    )
    stack.enqueue(item_id)
    stack.burst_in_process(MIRROR_RENDITIONS="source,180p,144p")
    job = stack.job(item_id)
    assert job.status == "done", job.error
    allow_browsers(stack)
    video = "document.getElementById('video')"
    with browser_page(chromium) as page:
        page.goto(f"{serve_url}/play/{item_id}")
        _until(page, "window.mirrorPlayer.levels().length === 3", 20)
        levels = page.evaluate("window.mirrorPlayer.levels()")
        assert sorted(level["height"] for level in levels) == [144, 180, 240], levels
        assert page.locator("#quality option").count() == 4  # Auto and each rendition
        page.evaluate(f"{video}.play()")
        _until(page, f"{video}.currentTime > 1", 30)
        lowest = min(range(3), key=lambda i: levels[i]["height"])
        stalls = page.evaluate("window.mirrorPlayer.stalls")  # a loaded machine's, before
        page.evaluate(f"window.mirrorPlayer.setLevel({lowest})")
        switched = page.evaluate(f"{video}.currentTime")
        # The new rendition's frames show (144 lines) and the clock keeps going.
        _until(page, f"{video}.videoHeight === 144", 20)
        _until(page, f"{video}.currentTime > {switched + 2} || {video}.ended", 20)
        assert page.evaluate("window.mirrorPlayer.stalls") == stalls
        assert "failed" not in (page.text_content("#status") or "")
