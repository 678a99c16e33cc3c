"""What the browser tests share: Debian's Chromium, players from npm, `mirror serve`.

Chromium is Debian's (`/usr/bin/chromium`, installed by .ci/run), driven by Playwright's
driver, never a downloaded browser: one per xdist worker (the `chromium` fixture, a plugin
of tests/conftest.py), each test in a context of its own (`browser_page`). Players come
from their npm packages at pinned versions, installed once into a cache directory by the
tests' set-up (never copied into the repo); without npm the tests that need them are
skipped with the reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.fixtures.stack import Stack, serving_in_process

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--enable-blink-features=AudioVideoTracks",
]
NPM_CACHE = Path(os.environ.get("MIRROR_TEST_CACHE", Path.home() / ".cache" / "mirror-tests"))
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed here"
)


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """The worker's one Chromium (and Playwright driver), launched by the first browser
    test that asks for it and shared by every later one.

    Each launch costs ~0.45 CPU-s, and each `sync_playwright()` a Node driver's start on
    top: a browser per test or module made 15 of each per run of the browser modules
    (`-n 2`), one per worker makes 2. A new context per test (`browser_page`)
    keeps apart what a fresh browser kept apart: cookies, storage, cache, routes, init
    scripts and permissions. Hence also one set of launch arguments for all (a test that
    needs more asks its context for it, as the routed player pages ask for local network
    access). Playwright's sync API cannot be nested in a thread, so no test starts its
    own `sync_playwright()`: they all take this one. While it lives, Playwright marks its
    asyncio loop as the running one of the worker's main thread between calls, so no
    later test of the worker can `asyncio.run()` there (none does; a thread can).
    Without Debian's chromium nothing is launched and the test is skipped (the browser
    tests carry `needs_chromium` as well, which skips them before their other fixtures).
    """
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed here")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def browser_page(browser: Browser, **context_options: Any) -> Iterator[Page]:
    """A page in a new context of `browser` (`context_options` as `Browser.new_context`
    takes them), the context closed on the way out, also on a failure: the shared browser
    must not carry one test's cookies, routes or pages into the next."""
    context = browser.new_context(**context_options)
    try:
        yield context.new_page()
    finally:
        context.close()


def npm_file(package: str, version: str, relative: str) -> Path:
    """`relative` inside `package@version` from npm, installed into the cache if missing.

    xdist workers ask for the same package at once: one installs under a file lock while
    the others wait, then find it (two npm runs into one folder broke each other)."""
    target = NPM_CACHE / f"{package}-{version}"
    path = target / "node_modules" / package / relative
    if path.is_file():
        return path
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed: {package} cannot be fetched for the browser test")
    NPM_CACHE.mkdir(parents=True, exist_ok=True)
    with (NPM_CACHE / f"{package}-{version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.is_file():
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--ignore-scripts",
                 "--prefix", str(target), f"{package}@{version}"],
                check=True, capture_output=True, timeout=300,
            )  # fmt: skip
    return path


@contextlib.contextmanager
def serving(stack: Stack, hlsjs_file: Path, **env: str) -> Iterator[str]:
    """What `mirror serve` serves, on a free port; yields its base URL. In a thread of
    this process (tests/fixtures/stack.py: serving_in_process): the browser is the
    subject here; test_red_team.py and the canary start `mirror serve` itself."""
    environment = stack.env(
        MIRROR_HLSJS_PATH=str(hlsjs_file),
        MIRROR_LOG_LEVEL="INFO",
        MIRROR_WEBHOOK_SECRET="not-used-here",
        **env,
    )
    with serving_in_process(environment) as url:
        yield url


def allow_browsers(stack: Stack) -> None:
    """The bucket CORS rule the README gives browsers on another origin."""
    stack.s3.client.put_bucket_cors(
        Bucket=stack.s3.bucket,
        CORSConfiguration={
            "CORSRules": [
                {
                    "AllowedOrigins": ["*"],
                    "AllowedMethods": ["GET", "HEAD"],
                    "AllowedHeaders": ["*"],
                    "ExposeHeaders": ["Content-Length", "Content-Range", "ETag"],
                    "MaxAgeSeconds": 3600,
                }
            ]
        },
    )
