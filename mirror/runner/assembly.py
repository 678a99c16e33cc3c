"""One worker, assembled: the claim loop around `run_attempt`, and each attempt's log.

`mirror worker` (mirror.wiring.build_worker) and the in-process tests
(tests/fixtures/inprocess.py) both build their worker here, so how an attempt is run and
logged cannot drift between them; only the parts they pass in differ (the real adapters,
or fakes of the same Protocols).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from mirror.domain.jobs import Lease
from mirror.domain.logs import get_logger
from mirror.domain.progress import AbortSignal
from mirror.runner.attempt import (
    AttemptHistory,
    AttemptPolicy,
    AttemptQueue,
    Outcome,
    Pipeline,
    run_attempt,
)
from mirror.runner.worker import JobQueue, Listen, Worker, WorkerConfig


class WorkerQueue(JobQueue, AttemptQueue, Protocol):
    """The queue of both loops: claims and the reaper (the worker), the fenced end states
    (each attempt). JobRepository satisfies it, and so does the in-memory fake."""


def assemble_worker(
    queue: WorkerQueue,
    pipeline: Pipeline,
    policy: AttemptPolicy,
    config: WorkerConfig,
    *,
    history: AttemptHistory | None,
    listen: Listen | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> Worker:
    """The worker that runs each claimed job as one attempt of `pipeline` under `policy`;
    `on_outcome` hears how every attempt ended (tests count them)."""
    job_log = get_logger("mirror.job")

    def run_one(lease: Lease, abort: AbortSignal) -> Outcome:
        log = job_log.bind(job=lease.job_id, item=lease.job.item_id, attempt=lease.job.attempts)
        outcome = run_attempt(
            lease, abort, queue=queue, pipeline=pipeline, policy=policy, log=log, history=history
        )
        log.info("attempt ended: %s", outcome.value)
        if on_outcome is not None:
            on_outcome(outcome)
        return outcome

    return Worker(queue, run_one, config, listen=listen)
