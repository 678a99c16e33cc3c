"""The dashboard in headless Chromium (Debian's, driven by Playwright) while a real worker runs.

A throttled download makes the progress bar move slowly enough to watch; the job is
then cancelled from the page while ffmpeg runs, and must end `cancelled` with ffmpeg
gone. With MIRROR_UI_PASSWORD set, the page and every action need the login first. The
screenshot is saved in the test's tmp dir; with MIRROR_UPDATE_DOCS=1 it also replaces
docs/dashboard.png (the README shows it), so a plain test run never changes the tree.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mirror.demo.media import SampleMedia
from tests.e2e.browser_support import browser_page, needs_chromium
from tests.fixtures.stack import Stack, ffmpeg_pids, phase_of, serving_in_process

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.e2e
PASSWORD = "dashboard test password"
DOCS_SCREENSHOT = Path(__file__).parents[2] / "docs" / "dashboard.png"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served(stack: Stack) -> Iterator[str]:
    """What `mirror serve` serves, with a dashboard password; its base URL. From a thread of
    this process (serving_in_process): the page is the subject; test_red_team.py starts
    `mirror serve` itself."""
    environment = stack.env(MIRROR_WEBHOOK_SECRET="hook secret 123", MIRROR_UI_PASSWORD=PASSWORD)
    with serving_in_process(environment) as base:
        yield base


def logged_in(page: Page, served: str, shown: str) -> list[str]:
    """Log in on the dashboard at `served` and wait for `shown`; the page's console errors
    from then on collect in the list returned."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(served)
    page.fill("#password", PASSWORD)
    page.click("#login button")
    page.wait_for_selector(shown, timeout=15_000)
    return errors


def bar_width(page: object, job_id: str) -> float:
    """The progress bar's fill of the job's row, in percent of the bar (0 when absent)."""
    value = page.evaluate(  # type: ignore[attr-defined]
        """(id) => {
            const fill = document.querySelector(`tr.job[data-job-id="${id}"] .fill`);
            return fill ? parseFloat(fill.style.width || "0") : 0;
        }""",
        job_id,
    )
    return float(value)


@needs_chromium
def test_dashboard_shows_progress_and_cancels_a_running_job(
    stack: Stack,
    served: str,
    sample_slow: SampleMedia,
    tmp_path: Path,
    paced_ffmpeg: Callable[[float], str],
    chromium: Browser,
) -> None:
    item = stack.add_sample(sample_slow, name="Slow Sample")
    [job_id] = stack.enqueue(item)
    size = sample_slow.path.stat().st_size
    stack.jellyfin.throttle(max(size // 12, 64 * 1024))  # a download of about 12 s
    # A re-encode still running when the download is done, at little CPU: the 20 s clip
    # read at half speed (tests/fixtures/media.py) lasts 40 s unless cancelled.
    slow_transcode = {"MIRROR_VIDEO_CODEC": "libx264", "MIRROR_FFMPEG_PATH": paced_ffmpeg(0.5)}
    stack.start_worker(name="a", MIRROR_HEARTBEAT_INTERVAL="500ms", **slow_transcode)

    with browser_page(chromium, viewport={"width": 1280, "height": 720}) as page:
        # Before the login: the page is a login form and actions are refused.
        first = page.goto(served)
        assert first is not None and first.status == 401
        assert page.locator("#login").is_visible()
        refused = page.evaluate(
            "async (id) => (await fetch(`/api/jobs/${id}/cancel`, {method: 'POST'})).status",
            job_id,
        )
        assert refused == 401
        page.fill("#password", "wrong")
        page.click("#login button")
        stack.wait_for(
            lambda: "wrong password" in (page.locator("#message").text_content() or ""),
            10,
            "the wrong password message",
        )
        page.fill("#password", PASSWORD)
        page.click("#login button")
        page.wait_for_selector("#running", timeout=15_000)

        # The bar of the running job moves while the download arrives.
        page.wait_for_selector(f'tr.job[data-job-id="{job_id}"]', timeout=30_000)
        deadline = time.monotonic() + 30
        widths = [bar_width(page, job_id)]
        while time.monotonic() < deadline and not (
            len({w for w in widths if w > 0}) >= 3 and widths[-1] > min(w for w in widths if w > 0)
        ):
            page.wait_for_timeout(500)
            widths.append(bar_width(page, job_id))
        seen = [w for w in widths if w > 0]
        assert len(set(seen)) >= 3 and seen[-1] > seen[0], widths
        # Rows read by title (the attempt recorded it); the search box finds it by
        # part of its title, in another case, over all jobs, on the server.
        running_link = page.locator(f'tr.job[data-job-id="{job_id}"] a')
        assert running_link.text_content() == "Slow Sample"
        page.fill("#search-q", "SLOW samp")
        page.click("#search button")
        page.wait_for_selector("#search-results:not([hidden]) tbody a", timeout=10_000)
        found = page.locator("#search-results tbody a")
        assert found.count() == 1 and found.text_content() == "Slow Sample"
        assert found.get_attribute("href") == f"/jobs/{job_id}"
        screenshot = tmp_path / "dashboard.png"
        page.screenshot(path=str(screenshot), full_page=True)
        print(f"dashboard screenshot: {screenshot}")
        if os.environ.get("MIRROR_UPDATE_DOCS") == "1":
            shutil.copyfile(screenshot, DOCS_SCREENSHOT)

        # Cancel from the page once ffmpeg runs: the row says cancelled, ffmpeg is gone.
        stack.jellyfin.throttle(None)
        stack.wait_for(lambda: phase_of(stack, item) == "transcode", 60, "transcode")
        stack.wait_for(lambda: ffmpeg_pids(str(stack.work_dir)), 30, "ffmpeg")
        page.click(f'tr.job[data-job-id="{job_id}"] button.cancel')
        stack.wait_for(lambda: stack.job(item).status == "cancelled", 60, "cancelled row")
        stack.wait_for(lambda: not ffmpeg_pids(str(stack.work_dir)), 60, "ffmpeg to die")
        stack.wait_for(
            lambda: page.locator(f'tr.job[data-job-id="{job_id}"]').count() == 0,
            60,
            "the row to leave the running table",
        )
        stack.wait_for(
            lambda: "attempt ended: cancelled" in stack.log_of("a"), 60, "the attempt's end"
        )
        # The job page shows it as `mirror show` does, with its attempt history.
        page.goto(f"{served}/jobs/{job_id}")
        assert page.locator("#job-status").text_content() == "cancelled"
        assert page.locator("#attempts tbody tr").count() == 1
    assert stack.object_keys() == []
    print(f"progress bar widths seen: {widths}")


@needs_chromium
def test_mirror_item_box_finds_a_title_in_jellyfin_and_queues_it(
    stack: Stack, served: str, tmp_path: Path, chromium: Browser
) -> None:
    """Issue 21: type a title (not an id), pick it from Jellyfin's answers, see its job;
    a series queues its episodes; the library page counts them and mirrors the rest."""
    media = tmp_path / "media.mkv"
    media.write_bytes(b"x" * 4096)
    movies = stack.jellyfin.add_library("Films")
    shows = stack.jellyfin.add_library("Series", "tvshows")
    wanted = stack.jellyfin.add_item(
        media, name="Le Bureau des Légendes", streams=[], duration_s=60, library_id=movies,
        extra={"ProductionYear": 2015},
    )  # fmt: skip
    stack.jellyfin.add_item(media, name="Other", streams=[], duration_s=60, library_id=movies)
    series = stack.jellyfin.add_folder("Bureau (Show)", item_type="Series", library_id=shows)
    episodes = [
        stack.jellyfin.add_item(
            media,
            name=f"Episode {n}",
            streams=[],
            duration_s=60,
            item_type="Episode",
            library_id=shows,
            extra={"SeriesId": series, "SeriesName": "Bureau (Show)"},
        )
        for n in (1, 2)
    ]
    with browser_page(chromium) as page:
        errors = logged_in(page, served, "#running")

        page.fill("#enqueue-item", "bureau des legendes")  # no accent, any case
        page.click("#enqueue button")
        row = page.locator(f'#jellyfin-results tr.hit[data-item-id="{wanted}"]')
        row.wait_for(timeout=15_000)
        assert row.locator("td").nth(2).text_content() == "2015"
        row.locator("button.queue").click()
        row.locator("a.queued-job").wait_for(timeout=15_000)
        assert row.locator("a.queued-job").text_content() == "queued"
        job = stack.job(wanted)
        assert job.status == "new"
        row.locator("a.queued-job").click()
        page.wait_for_url(f"{served}/jobs/{job.id}", timeout=15_000)
        assert page.locator("#job-status").text_content() == "new"

        page.goto(served)
        page.fill("#enqueue-item", "bureau")
        page.click("#enqueue button")
        show_row = page.locator(f'#jellyfin-results tr.hit[data-item-id="{series}"]')
        show_row.wait_for(timeout=15_000)
        show_row.locator("button.queue").click()
        stack.wait_for(
            lambda: "2 queued" in (show_row.text_content() or ""), 15, "the series sweep"
        )
        assert {stack.job(e).status for e in episodes} == {"new"}
        page.screenshot(path=str(tmp_path / "search.png"), full_page=True)

        page.goto(f"{served}/libraries")
        films = page.locator(f'tr.library[data-library-id="{movies}"]')
        assert films.locator(".n-queued").text_content() == "1"
        assert films.locator(".n-not-mirrored").text_content() == "1"
        films.locator("button.mirror-rest").click()
        stack.wait_for(
            lambda: films.locator("button.mirror-rest").text_content() == "queued 1",
            60,
            "mirror the rest",
        )
        assert films.locator(".n-queued").text_content() == "2"
        page.screenshot(path=str(tmp_path / "libraries.png"), full_page=True)
        print(f"screenshots: {tmp_path / 'search.png'}, {tmp_path / 'libraries.png'}")
        assert len(stack.repo.list()) == 4
    # No CSP violation, no script error (the login page's 401 and /favicon.ico's 404 are
    # resources, not errors of the page's own).
    assert [e for e in errors if not e.startswith("Failed to load resource")] == []


@needs_chromium
def test_the_fleet_buttons_pause_drain_and_resume_every_worker(
    stack: Stack, served: str, chromium: Browser
) -> None:
    """Issue 24: the dashboard's Pause / Drain / Resume set the fleet's row, and the page
    shows the mode, who set it, and turns off the button of the mode it is in."""
    from mirror.domain.jobs import FleetMode

    with browser_page(chromium) as page:
        errors = logged_in(page, served, "#fleet")
        mode = page.locator("#fleet-mode")
        stack.wait_for(lambda: page.locator("#fleet-resume").is_disabled(), 60, "a poll")
        assert mode.text_content() == "running"
        for button, expected in (
            ("#fleet-pause", FleetMode.PAUSED),
            ("#fleet-drain", FleetMode.DRAINING),
            ("#fleet-resume", FleetMode.RUNNING),
        ):
            page.click(button)
            stack.wait_for(lambda e=expected: mode.text_content() == e.value, 10, expected)
            assert stack.repo.fleet_state().mode is expected
            assert page.locator(button).is_disabled()
            if expected is FleetMode.DRAINING:
                banner = page.locator("#fleet-banner").text_content() or ""
                assert banner.startswith("fleet draining (since ") and "by dashboard" in banner
    assert [e for e in errors if not e.startswith("Failed to load resource")] == []
