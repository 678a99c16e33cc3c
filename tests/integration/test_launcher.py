"""The forked `mirror` processes of tests/fixtures/launcher.py are what the worker, fault
and red-team tests take them for: processes of their own that see only the environment
they are given, exit with the command's status and die by signals."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.fixtures import launcher
from tests.fixtures.stack import Stack

# Each test starts `mirror` processes: with the e2e tests, out of `make test-fast`.
pytestmark = pytest.mark.e2e


def test_a_launched_process_sees_only_the_environment_it_is_given(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database URL set in the test's own process is not inherited: the command
    refuses to start without one, as a fresh `mirror` would."""
    monkeypatch.setenv("MIRROR_DATABASE_URL", database_url)
    result = launcher.run(["jobs"], launcher.shell_environment(), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "MIRROR_DATABASE_URL" in result.stderr
    given = launcher.run(["jobs"], launcher.shell_environment(MIRROR_DATABASE_URL=database_url), 60)
    assert given.returncode == 0, given.stderr


def test_a_launched_worker_is_its_own_process_and_dies_by_kill_9(stack: Stack) -> None:
    worker = stack.start_worker()
    try:
        assert (stack.log_dir / "worker.log").exists()  # as Popen's: there on return
        stack.wait_for(lambda: " started: " in stack.log_of(), 60, "the worker's start")
        assert worker.poll() is None, stack.log_of()
        assert worker.pid != os.getpid()
        assert Path(f"/proc/{worker.pid}").exists()
    finally:
        worker.send_signal(signal.SIGKILL)
        code = worker.wait(timeout=30)
    assert code == -signal.SIGKILL, stack.log_of()


def test_usage_lines_name_the_installed_command() -> None:
    result = launcher.run(["--help"], launcher.shell_environment(COLUMNS="120"), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Usage: mirror " in result.stdout
