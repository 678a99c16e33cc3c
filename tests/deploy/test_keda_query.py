"""The chart's KEDA queries, run on a real Postgres through the connection KEDA gets.

The ScaledObject's query asks for ceil((due + running jobs) / slots per pod) worker pods,
the ScaledJob's for ceil(due jobs / slots per pod) Jobs; due is `mirror_jobs_due`'s
figure (status new, run_after passed), and nothing is due while the fleet is paused or
draining. Each query is taken from `helm template` output, with the connection string
from the rendered Secret, as KEDA would read them.
"""

from __future__ import annotations

import uuid

import psycopg
from sqlalchemy import Engine, text

from mirror.db.repository import JobRepository
from mirror.db.stats import QueueStats
from mirror.domain.jobs import FleetMode
from tests.deploy.chart import one, render, secret_data


def keda_answers(database_url: str, concurrency: int) -> tuple[int, int]:
    """(ScaledObject, ScaledJob) query results, as KEDA would get them."""
    answers = []
    for switch in ("keda.enabled", "keda.scaledJob.enabled"):
        manifests = render(
            **{
                switch: True,
                "secrets.values.MIRROR_DATABASE_URL": database_url,
                "worker.concurrency": concurrency,
            }
        )
        kind = "ScaledObject" if switch == "keda.enabled" else "ScaledJob"
        (trigger,) = one(manifests, kind)["spec"]["triggers"]
        (ref,) = one(manifests, "TriggerAuthentication")["spec"]["secretTargetRef"]
        connection = secret_data(one(manifests, "Secret", "-mirror"))[ref["key"]]
        with psycopg.connect(connection) as conn:  # a libpq URL, as pgx reads it
            row = conn.execute(trigger["metadata"]["query"]).fetchone()
        assert row is not None and isinstance(row[0], int)
        answers.append(row[0])
    return answers[0], answers[1]


def test_the_queries_count_due_and_running_jobs_per_slot_and_fall_to_zero(
    database_url: str, engine: Engine, repo: JobRepository
) -> None:
    assert keda_answers(database_url, 1) == (0, 0)  # an empty queue: scale to zero

    jobs = [r.job.id for r in repo.enqueue([uuid.uuid4().hex for _ in range(8)])]
    for _ in range(2):
        assert repo.claim_next("worker-a") is not None  # 2 running
    repo.cancel(jobs[-1])  # ended jobs count for nothing
    with engine.begin() as conn:  # a retry waiting out its backoff: not due yet
        conn.execute(
            text(
                "UPDATE media_mirror.jobs SET run_after = now() + interval '1 hour' WHERE id = :id"
            ),
            {"id": jobs[-2]},
        )
    # 8 queued: 2 running, 1 cancelled, 1 waiting, so 4 due.
    assert QueueStats(engine).snapshot(()).due == 4  # `mirror_jobs_due`
    assert keda_answers(database_url, 1) == (6, 4)
    assert keda_answers(database_url, 4) == (2, 1)  # ceil(6 / 4), ceil(4 / 4)

    # Paused or draining: nothing can be claimed, running jobs still count (a drain lets
    # them finish; a pause releases them at their next heartbeat, then none runs).
    for mode in (FleetMode.DRAINING, FleetMode.PAUSED):
        repo.set_fleet_mode(mode, changed_by="test")
        assert keda_answers(database_url, 1) == (2, 0), mode
    repo.set_fleet_mode(FleetMode.RUNNING, changed_by="test")
    assert keda_answers(database_url, 1) == (6, 4)


def test_a_job_stranded_by_a_dead_pod_keeps_one_worker_up_to_reap_it(
    database_url: str, repo: JobRepository
) -> None:
    """A pod killed without its release leaves its job `processing` until a reaper finds
    it stale: it counts as running, so KEDA keeps a worker that will reap it."""
    (enqueued,) = repo.enqueue([uuid.uuid4().hex])
    lease = repo.claim_next(f"dead-pod:{uuid.uuid4().hex[:6]}")
    assert lease is not None and lease.job.id == enqueued.job.id
    assert keda_answers(database_url, 2) == (1, 0)
