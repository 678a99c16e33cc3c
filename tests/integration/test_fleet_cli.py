"""`mirror pause` / `mirror resume` and the banner of `mirror jobs`: the command's `main`
in this process (exit code, stdout, stderr) on real Postgres; the process itself is run
by tests/e2e/test_fleet_pause_worker.py."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mirror import wiring
from mirror.cli import commands
from mirror.db.repository import JobRepository
from mirror.domain.jobs import FleetMode
from mirror.settings import Settings

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_mirror(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    opened: list[wiring.Database] = []
    real_database = wiring.database

    def database(settings: Settings, *, check: bool = True) -> wiring.Database:
        opened.append(real_database(settings, check=check))  # closed after the command
        return opened[-1]

    def run(*args: str, database_url: str | None = None, **env: str) -> Ran:
        with monkeypatch.context() as patch:
            patch.setattr(wiring, "database", database)
            for name in [k for k in os.environ if k.startswith("MIRROR_")]:
                patch.delenv(name)
            if database_url is not None:
                patch.setenv("MIRROR_DATABASE_URL", database_url)
            for name, value in env.items():
                patch.setenv(name, value)
            patch.setattr(sys, "argv", ["mirror", *args])
            try:
                commands.main()
                code = 0
            except SystemExit as exit:
                code = int(exit.code or 0)
            finally:
                while opened:
                    opened.pop().dispose()
        out = capsys.readouterr()
        return Ran(code, out.out, out.err)

    return run


def test_pause_drain_and_resume_print_one_line_each_and_exit_0(
    database_url: str, repo: JobRepository, run_mirror: Any
) -> None:
    repo.enqueue([ITEM])
    lines = []
    for args in (
        ["pause", "--reason", "disk swap"],
        ["pause"],
        ["pause", "--drain"],
        ["resume"],
        ["resume"],
    ):
        result = run_mirror(*args, database_url=database_url)
        assert result.returncode == 0, result.stderr
        assert result.stderr == "" and result.stdout.count("\n") == 1
        lines.append(result.stdout.strip())
    assert lines[0] == "paused: nothing running, 1 queued wait"
    assert lines[1].startswith("already paused: nothing running, 1 queued wait (since ")
    assert lines[1].endswith(": disk swap)")
    assert lines[2] == "paused (drain): none running, 1 queued wait"
    assert lines[3] == "resumed: workers claim again; 1 queued, 0 running"
    assert lines[4] == "not paused: 1 queued, 0 running"
    assert repo.fleet_state().mode is FleetMode.RUNNING


def test_jobs_shows_a_banner_while_paused_or_outside_the_active_hours_but_json_stays_json(
    database_url: str, repo: JobRepository, run_mirror: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.enqueue([ITEM])
    plain = run_mirror("jobs", database_url=database_url)
    assert not plain.stdout.startswith(("fleet", "outside"))
    repo.set_fleet_mode(FleetMode.DRAINING, changed_by="alice@host", reason="kernel update")
    drained = run_mirror("jobs", database_url=database_url).stdout.splitlines()[0]
    assert (
        drained.startswith("fleet draining (since ") and "by alice@host: kernel update" in drained
    )
    assert "no new claims, none running (mirror resume)" in drained

    later = datetime.now(UTC) + timedelta(hours=2)
    window = f"{later:%H}:00-{(later + timedelta(hours=1)):%H}:00"  # shut for the next hour
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        closed = run_mirror("jobs", database_url=database_url, MIRROR_ACTIVE_HOURS=window)
    finally:
        monkeypatch.undo()
        time.tzset()
    first = closed.stdout.splitlines()[0]
    assert f"outside MIRROR_ACTIVE_HOURS={window}" in first
    assert f"claim nothing until {later:%H}:00" in first
    as_json = run_mirror("jobs", "--json", database_url=database_url)
    assert [row["item_id"] for row in json.loads(as_json.stdout)] == [ITEM]


def test_bad_usage_and_a_bad_active_hours_value_exit_2_with_one_line(
    database_url: str, run_mirror: Any
) -> None:
    too_long = run_mirror("pause", "--reason", "x" * 501, database_url=database_url)
    assert too_long.returncode == 2 and "--reason: at most 500 characters" in too_long.stderr
    bad = run_mirror("pause", database_url=database_url, MIRROR_ACTIVE_HOURS="25:00-07:00")
    assert bad.returncode == 2
    assert (
        bad.stderr.strip()
        == "mirror: MIRROR_ACTIVE_HOURS: '25:00-07:00': 25:00 is not a time of day"
    )
    no_database = run_mirror("resume")
    assert no_database.returncode == 2 and "MIRROR_DATABASE_URL is not set" in no_database.stderr
