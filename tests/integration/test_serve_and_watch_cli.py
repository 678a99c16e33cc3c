"""`mirror serve` and `mirror jobs --watch` as people run them: subprocesses and signals."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

# Each test starts `mirror` processes: with the e2e tests, out of `make test-fast`.
pytestmark = pytest.mark.e2e

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"


def _environment(database_url: str, **extra: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MIRROR_")}
    environment["MIRROR_DATABASE_URL"] = database_url
    environment.update(extra)
    return environment


def _start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mirror.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Subprocesses of a test; any still running at the end are killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


def _lines(stream: object) -> queue.Queue[str]:
    """The lines of a pipe as they come, read in a thread so waiting has a deadline."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_for_line(lines: queue.Queue[str], pattern: str, timeout: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.1)
        except queue.Empty:
            continue
        seen.append(line)
        match = re.search(pattern, line)
        if match:
            return match
    raise AssertionError(f"no line matching {pattern!r} in {seen}")


def test_serve_answers_healthz_and_stops_on_sigterm(
    database_url: str, processes: list[subprocess.Popen[str]]
) -> None:
    server = _start(
        "serve", "--port", "0", env=_environment(database_url, MIRROR_WEBHOOK_SECRET="s3cret")
    )
    processes.append(server)
    stderr = _lines(server.stderr)
    url = _wait_for_line(stderr, r"serving on (http://127\.0\.0\.1:\d+)").group(1)
    response = httpx.get(f"{url}/healthz", timeout=30)
    assert response.status_code == 200 and response.json()["status"] == "ok"
    hook = httpx.post(
        f"{url}/hooks/jellyfin",
        content=json.dumps({"NotificationType": "ItemAdded", "ItemId": ITEM, "ItemType": "Movie"}),
        headers={"X-Mirror-Secret": "s3cret", "Content-Type": "text/plain"},
        timeout=30,
    )
    assert hook.status_code == 202 and hook.json()["status"] == "queued"
    _wait_for_line(stderr, rf"item={ITEM} .*webhook queued")
    # No MIRROR_JELLYFIN_URL: the title search and library page say what to set.
    search = httpx.get(f"{url}/api/jellyfin/search", params={"q": "x"}, timeout=30)
    assert search.status_code == 503 and "MIRROR_JELLYFIN_URL" in search.json()["error"]
    libraries = httpx.get(f"{url}/libraries", timeout=30)
    assert libraries.status_code == 200 and "MIRROR_JELLYFIN_URL" in libraries.text
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 0


def test_serve_without_webhook_secret_exits_2_with_one_line(database_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mirror.cli", "serve", "--port", "0"],
        capture_output=True,
        text=True,
        env=_environment(database_url),
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("mirror: MIRROR_WEBHOOK_SECRET is not set")
    assert result.stderr.count("\n") == 1


def _connections_of_mirror(database_url: str) -> int:
    """Connections mirror processes hold to this test's database (their application_name)."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = :db AND application_name = 'mirror'"
                    ),
                    {"db": make_url(database_url).database},
                ).scalar_one()
            )
    finally:
        engine.dispose()


def test_jobs_watch_redraws_until_ctrl_c_and_exits_0(
    database_url: str, processes: list[subprocess.Popen[str]]
) -> None:
    enqueue = subprocess.run(
        [sys.executable, "-m", "mirror.cli", "enqueue", ITEM],
        capture_output=True,
        text=True,
        env=_environment(database_url),
        timeout=60,
        check=False,
    )
    assert enqueue.returncode == 0, enqueue.stderr
    watch = _start("jobs", "--watch", env=_environment(database_url))
    processes.append(watch)
    deadline = time.monotonic() + 30
    while _connections_of_mirror(database_url) == 0:  # it has read the table at least once
        assert watch.poll() is None, watch.communicate()
        assert time.monotonic() < deadline, "mirror jobs --watch never queried the database"
        time.sleep(0.1)
    time.sleep(1.5)  # let it redraw at least once more
    watch.send_signal(signal.SIGINT)
    stdout, stderr = watch.communicate(timeout=30)
    assert watch.returncode == 0, stderr
    assert "Traceback" not in stderr
    for header in ("job", "item", "status", "phase", "speed", "eta", "beat", "tries", "error"):
        assert header in stdout
    assert ITEM in stdout and "Ctrl-C to stop" in stdout


def test_jobs_watch_with_json_is_a_usage_error(database_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mirror.cli", "jobs", "--watch", "--json"],
        capture_output=True,
        text=True,
        env=_environment(database_url),
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "--watch" in result.stderr
