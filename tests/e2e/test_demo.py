"""`mirror demo` as a newcomer runs it: a subprocess with no MIRROR_* variable at all.

The demo starts real servers (an embedded Postgres as a separate process, SeaweedFS and the
Jellyfin stand-in in-process) and ffmpeg; these tests check that it mirrors the samples
and that nothing it started outlives it: no process still naming its temp folder, and
the folder itself gone, on success and on Ctrl-C alike.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mirror.db.engine import make_engine
from mirror.db.repository import JobRepository
from mirror.web.player import HLSJS_VERSION
from tests.e2e.browser_support import CHROMIUM, browser_page, npm_file

if TYPE_CHECKING:
    from playwright.sync_api import Browser

KEY = re.compile(r"demo/[0-9a-f]{32}/(video\.mp4|audio/\d+-[a-z]+\.m4a)")
TEMP_DIR = re.compile(r"everything runs here, in (\S+)")
PGDATA = re.compile(r"embedded \(pgserver\) in (\S+),")


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh shell: no MIRROR_*/AWS_* settings, temp files in tmp_path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIRROR_", "AWS_", "PYTEST"))}
    temp = tmp_path / "tmp"
    temp.mkdir()
    env.update(TMPDIR=str(temp), PYTHONUNBUFFERED="1", **extra)
    return env


def run_demo(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mirror.cli", "demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )


def processes_naming(path: str) -> list[str]:
    """Command lines of live processes that mention `path` (postgres -D, ffmpeg -i ...)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        if path in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found


def assert_nothing_left(output: str, tmp_path: Path) -> None:
    match = TEMP_DIR.search(output)
    assert match, output
    demo_dir = match[1]
    assert demo_dir.startswith(str(tmp_path)), demo_dir  # TMPDIR was honoured
    assert not Path(demo_dir).exists(), "the demo's temp folder was not removed"
    assert list((tmp_path / "tmp").iterdir()) == []
    assert processes_naming(demo_dir) == []
    pgdata = PGDATA.search(output)
    if pgdata:  # under pytest's long tmp_path it sits in a short folder in /tmp instead
        assert not Path(pgdata[1]).exists(), "the embedded Postgres data was not removed"
        assert processes_naming(pgdata[1]) == [], "a postgres process outlived the demo"


def assert_mirrored_the_samples(out: str) -> None:
    """What the demo prints once both samples are mirrored (embedded Postgres)."""
    assert PGDATA.search(out), out
    # Per item: video, 2 audio tracks, the subtitle, 5 playlists (hls), the manifest.
    assert re.search(r"^done: 2 of 2 jobs mirrored, 26 S3 objects", out, re.MULTILINE), out
    assert len(set(re.findall(r"demo/[0-9a-f]{32}/master\.m3u8", out))) == 2, out
    keys = {match[0] for match in KEY.finditer(out)}
    assert sum(key.endswith("video.mp4") for key in keys) == 2, out
    assert sum(key.endswith(".m4a") for key in keys) == 4, out
    assert re.search(r"│ demo/[0-9a-f]{32}/video\.mp4\s+│\s+[\d.]+ KiB │", out), out
    assert "failed" not in out


def test_demo_uses_mirror_database_url_when_set(database_url: str, tmp_path: Path) -> None:
    result = run_demo(clean_env(tmp_path, MIRROR_DATABASE_URL=database_url))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Postgres: MIRROR_DATABASE_URL" in result.stdout
    assert "pgserver" not in result.stdout

    engine = make_engine(database_url)
    try:
        jobs = JobRepository(engine).list(limit=10)
    finally:
        engine.dispose()
    assert sorted(job.status for job in jobs) == ["done", "done"]
    assert all(job.video_key and job.video_key in result.stdout for job in jobs)
    assert_nothing_left(result.stdout, tmp_path)


def test_demo_refuses_a_database_with_queued_jobs(database_url: str, tmp_path: Path) -> None:
    """The demo's worker would take real jobs (and real workers the demo's)."""
    engine = make_engine(database_url)
    try:
        JobRepository(engine).enqueue(["0123456789abcdef0123456789abcdef"])
    finally:
        engine.dispose()
    result = run_demo(clean_env(tmp_path, MIRROR_DATABASE_URL=database_url))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1
    assert "has 1 queued or running job(s)" in result.stderr
    assert_nothing_left(result.stdout, tmp_path)


@pytest.mark.parametrize(
    ("signum", "after"), [(signal.SIGINT, "✓ queue"), (signal.SIGTERM, "✓ Postgres")]
)
def test_an_interrupted_demo_stops_everything(
    signum: signal.Signals, after: str, tmp_path: Path
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "mirror.cli", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(tmp_path),
    )
    seen: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            if line.startswith(after):
                process.send_signal(signum)
                break
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = "".join(seen) + out
    assert any(line.startswith(after) for line in seen), output + err
    assert process.returncode == 130, output + err
    assert err == "mirror: demo interrupted; everything it started is stopped and removed\n"
    assert_nothing_left(output, tmp_path)


def test_demo_help_names_the_extra_with_its_brackets() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mirror.cli", "demo", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert "pip install 'mirror[demo]'" in result.stdout, result.stdout


def test_demo_mirrors_the_samples_with_no_configuration_then_serves_until_ctrl_c(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """What a newcomer runs, opens, then watches: the samples mirrored with no settings
    (embedded Postgres), the dashboard, and the demo's /play page playing from the demo's
    own S3 in Chromium (where it is installed). One demo run for all: each costs an
    embedded Postgres, SeaweedFS and two transcodes; the demo without --serve, which ends
    by itself, runs in test_demo_uses_mirror_database_url_when_set."""
    import httpx

    env = clean_env(tmp_path)
    if CHROMIUM.exists():
        hlsjs = npm_file("hls.js", HLSJS_VERSION, "dist/hls.min.js")  # no CDN in tests
        env["MIRROR_HLSJS_PATH"] = str(hlsjs)
    process = subprocess.Popen(
        [sys.executable, "-m", "mirror.cli", "demo", "--serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    seen: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:  # each line as it comes; the demo is bounded by 240 s
            seen.append(line)
            if line.startswith("serving until Ctrl-C"):
                break
        output = "".join(seen)
        dashboard = re.search(r"^dashboard +(http://127\.0\.0\.1:\d+)/$", output, re.M)
        plays = re.findall(r"^play +(http://\S+/play/([0-9a-f]{32}))$", output, re.M)
        assert dashboard and len(plays) == 2, output
        with httpx.Client(timeout=30) as http:
            assert http.get(dashboard[1] + "/").status_code == 200
            jobs = http.get(dashboard[1] + "/api/jobs")
            assert jobs.status_code == 200 and all(item in jobs.text for _, item in plays)
            for page_url, _ in plays:
                page = http.get(page_url)
                assert page.status_code == 200 and "<video" in page.text, page.text
                master = http.get(page_url + "/master.m3u8")
                assert master.status_code == 200 and "#EXTM3U" in master.text, master.text
                variant = next(line for line in master.text.splitlines() if line.endswith(".m3u8"))
                media = http.get(f"{page_url}/{variant}")
                assert media.status_code == 200, media.text
                signed = [
                    u for u in media.text.splitlines() if u.startswith("http") and "Signature=" in u
                ]
                assert signed, media.text
                segment = http.get(signed[0], headers={"Range": "bytes=0-99"})
                assert segment.status_code in (200, 206) and segment.content, segment.text
        if CHROMIUM.exists():  # the worker's browser, only asked for where there is one
            plays_in_chromium(request.getfixturevalue("chromium"), plays[0][0])
        ports = {int(p) for p in re.findall(r"http://127\.0\.0\.1:(\d+)", output)}
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = "".join(seen) + out
    assert process.returncode == 0, output + err
    assert err == ""
    assert "every server the demo started is stopped" in out, output + err
    assert_mirrored_the_samples(output)  # the summary line comes after Ctrl-C
    assert len(ports) >= 2  # the web app and the Jellyfin stand-in at least (and S3)
    for port in ports:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert_nothing_left(output, tmp_path)


def plays_in_chromium(browser: Browser, url: str) -> None:
    """The /play page at `url` plays past 2 s in Chromium."""
    with browser_page(browser) as page:
        page.goto(url)
        page.evaluate("document.getElementById('video').play()")
        deadline = time.monotonic() + 30
        expression = "document.getElementById('video').currentTime > 2"
        while not page.evaluate(expression):  # the page's CSP forbids wait_for_function
            assert time.monotonic() < deadline, page.text_content("#status")
            time.sleep(0.1)
