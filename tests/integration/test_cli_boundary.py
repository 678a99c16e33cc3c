"""The CLI's one boundary: whatever goes wrong is one line on stderr, never a traceback
unless asked for (--debug or MIRROR_LOG_LEVEL=DEBUG)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mirror.demo.stand_in.server import JellyfinStandIn
from tests.fixtures import launcher

# Each test starts `mirror` processes: with the e2e tests, out of `make test-fast`.
pytestmark = pytest.mark.e2e


def run_mirror(
    *args: str, database_url: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """`mirror <args>` as a process of its own, with only the MIRROR_* given: forked from
    tests/fixtures/launcher.py's preloaded server (the start of a fresh interpreter is
    test_debug_is_documented_in_help's)."""
    return launcher.run(args, _environment(database_url, **env), timeout=60)


def _environment(database_url: str | None, **env: str) -> dict[str, str]:
    if database_url is not None:
        env = {"MIRROR_DATABASE_URL": database_url, **env}
    return launcher.shell_environment(**env)


# botocore refuses this region when the worker builds its S3 client: an error no mirror
# code foresees, so it reaches the boundary as it is.
UNFORESEEN = {
    "MIRROR_JELLYFIN_URL": "http://127.0.0.1:9",
    "MIRROR_JELLYFIN_API_KEY": "CANARYkey1",
    "MIRROR_S3_BUCKET": "media",
    "MIRROR_S3_REGION": "us east 1",
}


def test_an_unforeseen_error_is_one_line_and_exit_1(database_url: str) -> None:
    result = run_mirror("worker", "--burst", database_url=database_url, **UNFORESEEN)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "mirror: unexpected error: InvalidRegionError: Provided region_name 'us east 1' doesn't "
        "match a supported format. (run with --debug for the traceback)"
    ]


@pytest.mark.parametrize(("args", "env"), [(("--debug",), {}), ((), {"MIRROR_LOG_LEVEL": "DEBUG"})])
def test_the_traceback_comes_with_debug_or_debug_log_level(
    database_url: str, args: tuple[str, ...], env: dict[str, str]
) -> None:
    result = run_mirror(*args, "worker", "--burst", database_url=database_url, **UNFORESEEN, **env)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1].startswith("mirror: unexpected error: InvalidRegionError: ")
    assert "--debug" not in lines[-1]
    assert "CANARY" not in result.stderr


def test_debug_is_documented_in_help() -> None:
    """A fresh interpreter's `python -m mirror.cli`, as the other tests' forks are not."""
    result = subprocess.run(
        [sys.executable, "-m", "mirror.cli", "--help"],
        capture_output=True, text=True, env=_environment(None), timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0 and "--debug" in result.stdout
    assert "python -m mirror.cli" in result.stdout  # its usage line names how it started


def test_help_reflows_the_docstrings_paragraphs_to_the_terminal() -> None:
    """Docstrings are wrapped at 100 columns in the source; `--help` joins a paragraph's
    lines and wraps them anew (it used to break at every source line as well: ragged)."""
    result = run_mirror("sync", "--help", COLUMNS="200")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "A run that would remove more than 50 items or 10% of the mirrored items" in text
    lines = [line.strip(" │") for line in result.stdout.splitlines()]
    assert any(
        "A run that would remove more than 50 items or 10% of the mirrored items" in line
        for line in lines
    ), result.stdout


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"MIRROR_DATABASE_URL": "postgresql://mirror:CANARYpw@127.0.0.1:54x/mirror"},
            "mirror: MIRROR_DATABASE_URL: the port must be a number, e.g. host:5432 "
            "(got 'postgresql://mirror:***@127.0.0.1:54x/mirror')",
        ),
        (
            {"MIRROR_JELLYFIN_API_KEY": "CANARYkéy"},
            "mirror: MIRROR_JELLYFIN_API_KEY: contains a non-ASCII character (U+00E9) at "
            "position 8; copy the secret again without it",
        ),
        (
            {"MIRROR_JELLYFIN_URL": "http://[::1:8096"},
            "mirror: MIRROR_JELLYFIN_URL: is not a valid URL (Invalid IPv6 URL), "
            "got 'http://[::1:8096'",
        ),
    ],
)
def test_bad_settings_that_used_to_crash_are_one_line_and_exit_2(
    env: dict[str, str], line: str
) -> None:
    result = run_mirror("enqueue", "--library", "Movies", **env)
    assert (result.returncode, result.stderr.splitlines()) == (2, [line])


def test_a_redirect_loop_from_jellyfin_is_one_line_and_exit_1(
    database_url: str, jellyfin: JellyfinStandIn
) -> None:
    jellyfin.fail_next(302, times=1000, path_prefix="/Library")
    result = run_mirror(
        "enqueue",
        "--library",
        "Movies",
        database_url=database_url,
        MIRROR_JELLYFIN_URL=jellyfin.url,
        MIRROR_JELLYFIN_API_KEY=jellyfin.api_key,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "mirror: Jellyfin redirected GET /Library/VirtualFolders more than 20 times (a redirect "
        "loop): check MIRROR_JELLYFIN_URL (http or https, the base path, a proxy's rules)"
    )
    assert "Traceback" not in result.stderr
