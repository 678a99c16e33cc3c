"""Jobs that are not ready (Jellyfin has not probed the item, the disk is short).

Each wait is a release without an attempt, the delay doubles with every wait in a row
(capped), the row shows what it waits for, and a wait with a limit ends in `failed`.
"""

from __future__ import annotations

import uuid

from sqlalchemy import Engine, text

from mirror.db.attempt_log import AttemptLog
from mirror.db.repository import JobRepository
from mirror.domain.errors import InsufficientSpace, NotReady, TransientError
from mirror.domain.jobs import Fence, Lease, Mirrored
from mirror.domain.logs import get_logger
from mirror.domain.progress import AbortSignal
from mirror.runner.attempt import AttemptPolicy, Outcome, run_attempt
from mirror.runner.heartbeat import Heartbeat
from tests.fixtures.postgres import seconds_until_run_after

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
POLICY = AttemptPolicy(heartbeat_interval=0.5, stall_timeout=30, stale_timeout=30, retry_backoff=60)


def attempt_with(
    engine: Engine, repo: JobRepository, error: Exception, policy: AttemptPolicy = POLICY
) -> tuple[Outcome, Lease]:
    """Claim the job (due now) and end its attempt with `error`, history included."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE media_mirror.jobs SET run_after = now()"))
    lease = repo.claim_next("w")
    assert lease is not None

    def pipeline(lease: Lease, heartbeat: Heartbeat) -> Mirrored:
        raise error

    outcome = run_attempt(
        lease,
        AbortSignal(),
        queue=repo,
        pipeline=pipeline,
        policy=policy,
        log=get_logger("test", job=lease.job_id),
        history=AttemptLog(engine),
    )
    return outcome, lease


def unprobed(give_up_after: float | None = None) -> NotReady:
    return NotReady(
        "Jellyfin has not probed item x yet",
        phase="waiting for Jellyfin to probe",
        give_up_after=give_up_after,
        gave_up="Jellyfin has not probed item x within 1h",
    )


def test_each_wait_in_a_row_doubles_the_delay_without_using_an_attempt(
    engine: Engine, repo: JobRepository
) -> None:
    repo.enqueue([ITEM])
    delays = []
    for _ in range(3):
        outcome, lease = attempt_with(engine, repo, unprobed(give_up_after=3600))
        assert outcome is Outcome.WAITING
        delays.append(seconds_until_run_after(engine, lease.job_id))
    assert [round(d / 60) for d in delays] == [1, 2, 4]
    job = repo.get(lease.job_id)
    assert (job.status, job.attempts) == ("new", 0)
    assert job.error == "Jellyfin has not probed item x yet"
    assert job.heartbeat_data is not None
    assert job.heartbeat_data["phase"] == "waiting for Jellyfin to probe"
    assert job.heartbeat_data["waits"] == 3
    outcomes = [a.outcome for a in AttemptLog(engine).attempts_of(job.id)]
    assert outcomes == ["waiting"] * 3


def test_the_delay_is_capped_at_an_hour(engine: Engine, repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    slow = AttemptPolicy(
        heartbeat_interval=0.5, stall_timeout=30, stale_timeout=30, retry_backoff=2000
    )
    attempt_with(engine, repo, InsufficientSpace("not enough free space"), slow)
    _, lease = attempt_with(engine, repo, InsufficientSpace("not enough free space"), slow)
    assert 3590 < seconds_until_run_after(engine, lease.job_id) <= 3600
    job = repo.get(lease.job_id)
    assert job.heartbeat_data is not None and job.heartbeat_data["phase"] == "waiting for disk"


def test_another_outcome_between_waits_starts_the_delay_afresh(
    engine: Engine, repo: JobRepository
) -> None:
    repo.enqueue([ITEM])
    attempt_with(engine, repo, unprobed())
    attempt_with(engine, repo, unprobed())
    attempt_with(engine, repo, TransientError("Jellyfin answered 503"))
    _, lease = attempt_with(engine, repo, unprobed())
    assert round(seconds_until_run_after(engine, lease.job_id) / 60) == 1


def test_a_job_that_waited_past_its_limit_fails_with_the_reason(
    engine: Engine, repo: JobRepository
) -> None:
    repo.enqueue([ITEM])
    with engine.begin() as conn:
        conn.execute(text("UPDATE media_mirror.jobs SET created_at = now() - interval '2 hours'"))
    outcome, lease = attempt_with(engine, repo, unprobed(give_up_after=3600))
    assert outcome is Outcome.FAILED
    job = repo.get(lease.job_id)
    assert (job.status, job.attempts) == ("failed", 1)
    assert job.error == "Jellyfin has not probed item x within 1h"
    assert job.finished_at is not None


def test_a_wait_without_a_limit_never_fails(engine: Engine, repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    with engine.begin() as conn:
        conn.execute(text("UPDATE media_mirror.jobs SET created_at = now() - interval '30 days'"))
    outcome, lease = attempt_with(engine, repo, InsufficientSpace("not enough free space"))
    assert outcome is Outcome.WAITING
    assert repo.get(lease.job_id).status == "new"


def test_a_lost_lease_changes_nothing(engine: Engine, repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None
    fence, status = repo.release_until_ready(
        lease.job_id, uuid.uuid4(), note="n", phase="waiting for disk", first_delay_s=1
    )
    assert (fence, status) == (Fence.LEASE_LOST, None)
    assert repo.get(lease.job_id).status == "processing"


def test_metrics_count_the_jobs_waiting_for_disk(engine: Engine, repo: JobRepository) -> None:
    from mirror.db.stats import QueueStats
    from mirror.web.metrics import PHASE_BUCKETS, snapshot_metrics

    repo.enqueue([ITEM])
    attempt_with(engine, repo, InsufficientSpace("not enough free space"))
    snapshot = QueueStats(engine).snapshot(PHASE_BUCKETS)
    assert snapshot.waiting == {"waiting for disk": 1}
    [family] = [m for m in snapshot_metrics(snapshot) if m.name == "mirror_jobs_waiting"]
    values = {sample.labels["phase"]: sample.value for sample in family.samples}
    assert values == {"waiting for disk": 1, "waiting for Jellyfin to probe": 0}
