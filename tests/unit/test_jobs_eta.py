"""The time-left column of `mirror jobs --watch`, from heartbeat_data alone."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mirror.domain.jobs import JobRecord
from mirror.views import job_eta, jobs_table, phase_eta, speed_text

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_download_eta_is_bytes_left_at_the_reported_speed() -> None:
    data = {"phase": "download", "bytes_done": 2_000_000_000, "bytes_total": 7_000_000_000}
    assert phase_eta({**data, "speed_bps": 50_000_000}) == pytest.approx(100.0)
    assert phase_eta({**data, "speed_bps": 500_000}) == pytest.approx(10_000.0)


def test_transcode_eta_is_media_time_left_at_ffmpeg_speed() -> None:
    data = {"phase": "transcode", "duration_s": 3000.0, "percent": 40.0, "speed_factor": 2.5}
    assert phase_eta(data) == pytest.approx(1800 / 2.5)
    without_percent = {"phase": "transcode", "duration_s": 100.0, "out_time_s": 60.0}
    assert phase_eta({**without_percent, "speed_factor": 4}) == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        ({"speed_bps": 45_123_456}, "45.1 MB/s"),
        ({"speed_factor": 27.9}, "27.9x"),
        ({"speed_factor": 1.0}, "1x"),
        ({"speed": "45.1 MB/s"}, "45.1 MB/s"),  # rows written before speeds were numbers
        ({"speed": "2.5x"}, "2.5x"),
        ({}, ""),
        (None, ""),
    ],
)
def test_speed_is_formatted_from_the_stored_number(data: dict[str, Any] | None, shown: str) -> None:
    assert speed_text(data) == shown


def test_percent_and_elapsed_time_are_the_fallback() -> None:
    assert phase_eta({"percent": 25.0}, elapsed_s=60.0) == pytest.approx(180.0)
    assert phase_eta({"percent": 25.0, "speed_bps": 0, "bytes_done": 5}, 60.0) == 180.0


@pytest.mark.parametrize(
    "data",
    [
        None,
        {},
        {"phase": "download", "bytes_done": 10},  # no total, no speed
        {"phase": "transcode", "percent": 0.0},  # nothing done yet: no rate to go by
        {"phase": "transcode", "speed_factor": None, "duration_s": 10.0},
        {"phase": "download", "speed": "45.1 MB/s", "bytes_done": 1, "bytes_total": 9},  # old row
        {"phase": "upload", "percent": True},  # not a number
    ],
)
def test_unknowable_eta_is_none(data: dict[str, Any] | None) -> None:
    assert phase_eta(data, elapsed_s=30.0) is None


def _record(status: str, data: dict[str, Any] | None, taken_ago_s: float = 60.0) -> JobRecord:
    return JobRecord(
        id=uuid.uuid4(),
        item_id="a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21",
        status=status,
        priority=0,
        attempts=1,
        max_attempts=3,
        run_after=NOW,
        worker_id="host:1:0",
        lease_token=None,
        taken_at=NOW - timedelta(seconds=taken_ago_s),
        heartbeat_at=NOW,
        heartbeat_data=data,
        video_key=None,
        audio_keys=None,
        error=None,
        created_at=NOW,
        updated_at=NOW,
        finished_at=None,
    )


def test_job_eta_uses_time_since_claim_only_in_the_first_phase() -> None:
    assert job_eta(_record("processing", {"phase": "download", "percent": 50.0}), NOW) == "1m"
    # In later phases the claim time includes earlier phases: no guess from it.
    assert job_eta(_record("processing", {"phase": "upload", "percent": 50.0}), NOW) == ""
    assert job_eta(_record("done", {"phase": "upload", "percent": 100.0}), NOW) == ""


def test_eta_column_only_in_the_live_table() -> None:
    records = [_record("processing", {"phase": "download", "percent": 50.0})]
    plain = [column.header for column in jobs_table(records, NOW).columns]
    live = [column.header for column in jobs_table(records, NOW, with_eta=True).columns]
    assert "eta" not in plain
    assert live == [*plain[:8], "eta", *plain[8:]]
