"""The in-memory fakes (mirror/testing/fakes.py) answer like the adapters they stand in for.

One scenario per fake, run on the fake and on the real adapter against Postgres: a fake
that drifts from its adapter fails here, not in the unit tests that rely on it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from mirror.db.repository import JobRepository
from mirror.jobs import Fence
from mirror.testing.fakes import InMemoryBeatQueue

ITEM = "c0ffee00c0ffee00c0ffee00c0ffee00"


@dataclass
class BeatSubject:
    """What the heartbeat scenario drives: the queue, its job, and the two interventions."""

    beat: Callable[[uuid.UUID, uuid.UUID], Fence]
    job_id: uuid.UUID
    token: uuid.UUID
    cancel: Callable[[], object]
    take_over: Callable[[], object]


def real_queue(repo: JobRepository) -> BeatSubject:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None

    def take_over() -> None:  # the reaper hands the job on; a new attempt claims it
        repo.return_stale_to_new(0.0)
        assert repo.claim_next("other") is not None

    return BeatSubject(
        beat=lambda job, token: repo.heartbeat(job, token, {"phase": "download"}),
        job_id=lease.job_id,
        token=lease.token,
        cancel=lambda: repo.cancel(lease.job_id),
        take_over=take_over,
    )


def fake_queue(repo: JobRepository) -> BeatSubject:
    job_id, token = uuid.uuid4(), uuid.uuid4()
    fake = InMemoryBeatQueue(job_id, token)
    return BeatSubject(
        beat=lambda job, tok: fake.heartbeat(job, tok, {"phase": "download"}),
        job_id=job_id,
        token=token,
        cancel=fake.cancel,
        take_over=fake.take_over,
    )


@pytest.mark.parametrize("make", [real_queue, fake_queue], ids=["JobRepository", "fake"])
def test_heartbeat_fences_the_same_way(
    make: Callable[[JobRepository], BeatSubject], repo: JobRepository
) -> None:
    subject = make(repo)
    assert subject.beat(subject.job_id, subject.token) is Fence.OK
    assert subject.beat(subject.job_id, uuid.uuid4()) is Fence.LEASE_LOST  # a stranger's token
    subject.cancel()
    assert subject.beat(subject.job_id, subject.token) is Fence.CANCELLED


@pytest.mark.parametrize("make", [real_queue, fake_queue], ids=["JobRepository", "fake"])
def test_a_taken_over_job_answers_lease_lost(
    make: Callable[[JobRepository], BeatSubject], repo: JobRepository
) -> None:
    subject = make(repo)
    subject.take_over()
    assert subject.beat(subject.job_id, subject.token) is Fence.LEASE_LOST
