"""A pool that stays busy is an outage like a dropped connection: the repository raises
DatabaseUnavailable, and the durable writes ride it out once a connection frees.

(The e2e table-lock test used to wait out SQLAlchemy's 30 s pool timeout to reach this;
here the timeout is shortened on the engine itself.)
"""

from __future__ import annotations

import threading
import time

import pytest

from mirror.db.engine import make_engine
from mirror.db.repository import JobRepository
from mirror.domain.jobs import DatabaseUnavailable
from mirror.runner.outage import durably

ITEM = "c0ffee00c0ffee00c0ffee00c0ffee00"


def test_a_pool_timeout_is_an_outage_that_durable_statements_ride_out(database_url: str) -> None:
    engine = make_engine(database_url, pool_size=1, max_overflow=0)
    engine.pool._timeout = 0.3  # type: ignore[attr-defined]  # SQLAlchemy's default: 30 s
    repo = JobRepository(engine)
    try:
        repo.enqueue([ITEM])
        held = engine.connect()  # the only pooled connection, busy
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable) as raised:
            repo.claim_next("w:1:0")
        assert time.monotonic() - started < 5
        assert "QueuePool limit" in raised.value.detail

        threading.Timer(0.8, held.close).start()  # the busy statement ends
        lease = durably(lambda: repo.claim_next("w:1:0"), limit_s=10)
        assert lease is not None and lease.job.item_id == ITEM
    finally:
        engine.dispose()
