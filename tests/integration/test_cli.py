"""The `mirror` commands as people run them: real Postgres, output and exit codes.

Run through the CLI's entry point in this process (tests/fixtures/stack.py:
mirror_in_process); the process itself is tested in test_cli_boundary.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.fixtures.stack import mirror_in_process

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"


def run_mirror(
    *args: str, database_url: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MIRROR_")}
    if database_url is not None:
        environment["MIRROR_DATABASE_URL"] = database_url
    environment.update(env)
    return mirror_in_process(args, environment)


def test_enqueue_twice_gives_one_job(database_url: str) -> None:
    first = run_mirror("enqueue", ITEM, database_url=database_url)
    second = run_mirror("enqueue", ITEM.upper(), database_url=database_url)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.split()[2] == "new"
    assert "already queued (new)" in second.stdout
    assert first.stdout.split()[0] == second.stdout.split()[0]
    listing = run_mirror("jobs", "--json", database_url=database_url)
    assert len(json.loads(listing.stdout)) == 1


def test_jobs_json_is_valid_json_with_the_contract_fields(database_url: str) -> None:
    run_mirror("enqueue", ITEM, "0123456789abcdef0123456789abcdef", database_url=database_url)
    result = run_mirror("jobs", "--json", "--status", "new", database_url=database_url)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {row["item_id"] for row in rows} == {ITEM, "0123456789abcdef0123456789abcdef"}
    assert {"status", "attempts", "heartbeat_data", "error", "run_after"} <= set(rows[0])
    assert "lease_token" not in rows[0]


def test_unknown_job_id_exits_1_with_one_clear_line(database_url: str) -> None:
    for command in (["show"], ["cancel"], ["retry"]):
        result = run_mirror(
            *command, "11111111-2222-3333-4444-555555555555", database_url=database_url
        )
        assert result.returncode == 1
        assert result.stderr.strip().count("\n") == 0
        assert "no job with id" in result.stderr
        assert "Traceback" not in result.stderr


def test_malformed_item_id_exits_2_and_inserts_nothing(database_url: str) -> None:
    result = run_mirror("enqueue", ITEM, "not-an-item", database_url=database_url)
    assert result.returncode == 2
    assert "not a Jellyfin item id: 'not-an-item'" in result.stderr
    listing = run_mirror("jobs", "--json", database_url=database_url)
    assert json.loads(listing.stdout) == []


def test_show_by_item_cancel_and_retry(database_url: str) -> None:
    job_id = run_mirror("enqueue", ITEM, database_url=database_url).stdout.split()[0]
    shown = run_mirror("show", ITEM, "--json", database_url=database_url)
    assert json.loads(shown.stdout)["id"] == job_id
    assert run_mirror("cancel", job_id, database_url=database_url).returncode == 0
    again = run_mirror("cancel", job_id, database_url=database_url)
    assert again.returncode == 1 and "already cancelled" in again.stderr
    assert run_mirror("retry", job_id, database_url=database_url).returncode == 0
    table = run_mirror("jobs", database_url=database_url)
    assert ITEM in table.stdout and "new" in table.stdout
    details = run_mirror("show", job_id, database_url=database_url)
    assert "attempts" in details.stdout and ITEM in details.stdout


def test_reap_reports_what_it_did(database_url: str) -> None:
    result = run_mirror("reap", database_url=database_url)
    assert result.returncode == 0
    assert "0 stale job(s) handled" in result.stdout


def test_bad_settings_exit_2_naming_the_variable(database_url: str) -> None:
    result = run_mirror("jobs", database_url=database_url, MIRROR_STALE_TIMEOUT="soon")
    assert result.returncode == 2
    assert result.stderr.startswith("mirror: MIRROR_STALE_TIMEOUT")
    result = run_mirror(
        "jobs",
        database_url=database_url,
        MIRROR_STALE_TIMEOUT="30s",
        MIRROR_HEARTBEAT_INTERVAL="20s",
    )
    assert result.returncode == 2
    assert "MIRROR_HEARTBEAT_INTERVAL=20s" in result.stderr
    assert "MIRROR_STALE_TIMEOUT=30s" in result.stderr


def test_missing_database_url_exits_2() -> None:
    result = run_mirror("jobs")
    assert result.returncode == 2
    assert "MIRROR_DATABASE_URL is not set" in result.stderr


def test_config_file_typo_exits_2_with_a_suggestion(tmp_path: Path, database_url: str) -> None:
    config = tmp_path / "mirror.yaml"
    config.write_text("heartbeat_intervall: 5s\n")
    result = run_mirror("--config", str(config), "jobs", database_url=database_url)
    assert result.returncode == 2
    assert "did you mean 'heartbeat_interval'" in result.stderr


def test_unreachable_database_exits_1_without_traceback() -> None:
    result = run_mirror("jobs", database_url="postgresql://postgres@127.0.0.1:1/nothing")
    assert result.returncode == 1
    assert "cannot connect to Postgres" in result.stderr
    assert "Traceback" not in result.stderr
    # The migration's driver error arrives as DatabaseUnavailable too (the CLI knows no other).
    upgrade = run_mirror("db", "upgrade", database_url="postgresql://postgres@127.0.0.1:1/nothing")
    assert upgrade.returncode == 1
    assert (
        upgrade.stderr.startswith("mirror: database error: ") and "Traceback" not in upgrade.stderr
    )


def test_db_upgrade_creates_the_schema(empty_database_url: str) -> None:
    before = run_mirror("jobs", database_url=empty_database_url)
    assert before.returncode == 2 and "mirror db upgrade" in before.stderr
    upgraded = run_mirror("db", "upgrade", database_url=empty_database_url)
    assert upgraded.returncode == 0, upgraded.stderr
    after = run_mirror("jobs", "--json", database_url=empty_database_url)
    assert after.returncode == 0 and json.loads(after.stdout) == []


def test_worker_start_up_line_names_the_video_encoder(database_url: str, tmp_path: Path) -> None:
    """MIRROR_VIDEO_ENCODER, tested at start (a fake ffmpeg whose NVENC test encode passes)."""
    from tests.unit.test_video_encoders import fake_ffmpeg

    ffmpeg = fake_ffmpeg(tmp_path, working="h264_nvenc")
    result = run_mirror(
        "worker",
        "--burst",
        database_url=database_url,
        MIRROR_FFMPEG_PATH=ffmpeg,
        MIRROR_VIDEO_ENCODER="h264_nvenc",
        MIRROR_JELLYFIN_URL="http://127.0.0.1:9",
        MIRROR_JELLYFIN_API_KEY="not-used-here",
        MIRROR_S3_BUCKET="media",
        MIRROR_S3_ENDPOINT_URL="http://127.0.0.1:9",
    )
    assert result.returncode == 0, result.stderr
    assert "video encoder: h264_nvenc (MIRROR_VIDEO_ENCODER, test encode passed)" in result.stderr
    assert "concurrency=1 burst=True encoder=h264_nvenc" in result.stderr
