"""How an attempt's ending becomes the job's fate, on real Postgres."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from sqlalchemy import Engine, text

from mirror.db.repository import JobRepository
from mirror.domain.errors import (
    InsufficientSpace,
    PermanentError,
    ShutdownRequested,
    Stalled,
    TransientError,
)
from mirror.domain.jobs import Lease, Mirrored
from mirror.domain.logs import get_logger
from mirror.domain.progress import AbortSignal
from mirror.runner.attempt import AttemptPolicy, Outcome, run_attempt
from mirror.runner.heartbeat import Heartbeat
from tests.fixtures.postgres import seconds_until_run_after

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
POLICY = AttemptPolicy(heartbeat_interval=0.5, stall_timeout=30, stale_timeout=30, retry_backoff=60)


def attempt_with(
    repo: JobRepository, error: Exception | None, abort: AbortSignal | None = None
) -> tuple[Outcome, Lease]:
    lease = repo.claim_next("w")
    assert lease is not None

    def pipeline(lease: Lease, heartbeat: Heartbeat) -> Mirrored:
        if error is not None:
            raise error
        return Mirrored(video_key="v", audio_keys=[])

    outcome = run_attempt(
        lease,
        abort or AbortSignal(),
        queue=repo,
        pipeline=pipeline,
        policy=POLICY,
        log=get_logger("test", job=lease.job_id),
    )
    return outcome, lease


def test_permanent_error_fails_the_job_at_once(repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    outcome, lease = attempt_with(repo, PermanentError("item x not found in Jellyfin"))
    job = repo.get(lease.job_id)
    assert outcome is Outcome.FAILED
    assert (job.status, job.error, job.attempts) == ("failed", "item x not found in Jellyfin", 1)


@pytest.mark.parametrize(
    "error", [TransientError("Jellyfin answered 502"), Stalled("stalled: no progress")]
)
def test_transient_errors_go_back_with_backoff_until_attempts_run_out(
    engine: Engine, repo: JobRepository, error: Exception
) -> None:
    repo.enqueue([ITEM], max_attempts=2)
    outcome, lease = attempt_with(repo, error)
    assert outcome is Outcome.RETRY
    job = repo.get(lease.job_id)
    assert (job.status, job.error) == ("new", str(error))
    assert 50 < seconds_until_run_after(engine, lease.job_id) <= 60
    with engine.begin() as conn:
        conn.execute(text("UPDATE media_mirror.jobs SET run_after = now()"))
    outcome, lease = attempt_with(repo, error)
    assert outcome is Outcome.FAILED
    assert repo.get(lease.job_id).status == "failed"


def test_low_disk_releases_without_using_an_attempt(
    engine: Engine, repo: JobRepository, caplog: pytest.LogCaptureFixture
) -> None:
    repo.enqueue([ITEM])
    message = "not enough free space in /w: need 9.0 GiB, have 1.0 GiB, missing 8.0 GiB"
    with caplog.at_level(logging.WARNING):
        outcome, lease = attempt_with(repo, InsufficientSpace(message))
    assert outcome is Outcome.WAITING
    job = repo.get(lease.job_id)
    assert (job.status, job.attempts, job.error) == ("new", 0, message)
    assert seconds_until_run_after(engine, lease.job_id) > 50  # no claim/release loop
    assert "missing 8.0 GiB" in caplog.text


def test_shutdown_releases_at_once(engine: Engine, repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    abort = AbortSignal()
    abort.trigger(ShutdownRequested("worker shutting down"))
    outcome, lease = attempt_with(repo, RuntimeError("ffmpeg killed"), abort)
    assert outcome is Outcome.RELEASED
    job = repo.get(lease.job_id)
    assert (job.status, job.attempts) == ("new", 0)
    assert seconds_until_run_after(engine, lease.job_id) <= 0


def test_cancelled_job_stays_cancelled(repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None
    repo.cancel(lease.job_id)

    def pipeline(lease: Lease, heartbeat: Heartbeat) -> Mirrored:
        heartbeat.checkpoint()
        return Mirrored(video_key="v", audio_keys=[])

    outcome = run_attempt(
        lease, AbortSignal(), queue=repo, pipeline=pipeline, policy=POLICY, log=get_logger("t")
    )
    assert outcome is Outcome.CANCELLED
    assert repo.get(lease.job_id).status == "cancelled"


def test_unexpected_error_is_retried_with_its_type_named(repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    outcome, lease = attempt_with(repo, KeyError("Codec"))
    assert outcome is Outcome.RETRY
    assert repo.get(lease.job_id).error == "unexpected error: KeyError: 'Codec'"


def _returning(
    mirrored: Mirrored, before_return: Callable[[Lease], object] | None = None
) -> Callable[[Lease, Heartbeat], Mirrored]:
    def pipeline(lease: Lease, heartbeat: Heartbeat) -> Mirrored:
        if before_return is not None:
            before_return(lease)
        return mirrored

    return pipeline


def test_run_attempt_records_done_with_what_the_pipeline_returned(repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None
    mirrored = Mirrored(
        video_key=f"mirror/{ITEM}/video.mp4",
        audio_keys=[{"key": f"mirror/{ITEM}/audio/1-eng.m4a", "stream_index": 1}],
        manifest_key=f"mirror/{ITEM}/manifest.json",
    )
    outcome = run_attempt(
        lease,
        AbortSignal(),
        queue=repo,
        pipeline=_returning(mirrored),
        policy=POLICY,
        log=get_logger("t"),
    )
    assert outcome is Outcome.DONE
    job = repo.get(lease.job_id)
    assert (job.status, job.video_key, job.manifest_key) == (
        "done",
        mirrored.video_key,
        mirrored.manifest_key,
    )
    assert job.audio_keys == mirrored.audio_keys


def test_a_cancel_during_the_upload_wins_over_done(repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None
    pipeline = _returning(
        Mirrored(video_key="v", audio_keys=[]), lambda held: repo.cancel(held.job_id)
    )
    outcome = run_attempt(
        lease, AbortSignal(), queue=repo, pipeline=pipeline, policy=POLICY, log=get_logger("t")
    )
    assert outcome is Outcome.CANCELLED
    assert repo.get(lease.job_id).status == "cancelled"
