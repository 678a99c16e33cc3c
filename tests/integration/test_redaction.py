"""A secret inside an exception never reaches the job row, the attempt history or the log."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from mirror.db.attempt_log import AttemptLog
from mirror.db.repository import JobRepository
from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.jobs import Lease, Mirrored
from mirror.domain.logs import RedactSecrets, get_logger
from mirror.domain.progress import AbortSignal
from mirror.domain.redact import MASK, forget_secrets, register_secrets
from mirror.runner.attempt import AttemptPolicy, Outcome, run_attempt
from mirror.runner.heartbeat import Heartbeat

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
SECRET = "CANARY-int-9d2f"
POLICY = AttemptPolicy(heartbeat_interval=0.5, stall_timeout=30, stale_timeout=30, retry_backoff=0)


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """What the worker's log handler (with its redaction filter) would print."""
    register_secrets([SECRET])
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactSecrets())
    logging.getLogger().addHandler(handler)
    yield stream
    logging.getLogger().removeHandler(handler)
    forget_secrets()


def attempt_raising(repo: JobRepository, engine: Engine, error: Exception) -> Outcome:
    lease = repo.claim_next("w")
    assert lease is not None

    def pipeline(lease: Lease, heartbeat: Heartbeat) -> Mirrored:
        raise error

    log = get_logger("mirror.job", job=lease.job_id)
    return run_attempt(
        lease,
        AbortSignal(),
        queue=repo,
        pipeline=pipeline,
        policy=POLICY,
        log=log,
        history=AttemptLog(engine),
    )


def test_secret_quoted_by_an_adapter_is_masked_in_row_history_and_log(
    engine: Engine, repo: JobRepository, log_output: io.StringIO
) -> None:
    repo.enqueue([ITEM], max_attempts=3)
    header = f"Illegal header value b'MediaBrowser Token=\"{SECRET}\\n\"'"
    outcomes = [
        attempt_raising(repo, engine, TransientError(f"Jellyfin unreachable: {header}")),
        attempt_raising(repo, engine, RuntimeError(f"driver said {SECRET!r}")),
        attempt_raising(repo, engine, PermanentError(f"rejected key {SECRET}")),
    ]
    assert outcomes == [Outcome.RETRY, Outcome.RETRY, Outcome.FAILED]
    job = repo.latest_for_item(ITEM)
    assert job.error == f"rejected key {MASK}"
    history = [a.error for a in AttemptLog(engine).attempts_of(job.id)]
    assert history == [
        f"Jellyfin unreachable: Illegal header value b'MediaBrowser Token=\"{MASK}\\n\"'",
        f"driver said '{MASK}'",
        f"rejected key {MASK}",
    ]
    with engine.connect() as conn:
        everything = conn.execute(
            text(
                "SELECT (SELECT string_agg(j::text, ' ') FROM media_mirror.jobs j) || "
                "(SELECT string_agg(a::text, ' ') FROM media_mirror.job_attempts a)"
            )
        ).scalar_one()
    assert SECRET not in everything
    printed = log_output.getvalue()
    assert "Traceback" in printed  # the unexpected error is logged with its traceback
    assert SECRET not in printed
    assert printed.count(MASK) >= 4
