"""The composition root: builds the real adapters from settings, in one place.

Everything else receives what it needs (a repository, a client, a storage) instead of
reading settings or constructing adapters itself, so tests can pass their own.
"""

from __future__ import annotations

import os
import socket

from sqlalchemy import Engine

from mirror.db.engine import check_schema, make_engine
from mirror.db.repository import JobRepository
from mirror.settings import Settings


def database_engine(settings: Settings, *, check: bool = True) -> Engine:
    """Engine for MIRROR_DATABASE_URL; with `check`, fail fast if the schema is missing."""
    engine = make_engine(settings.database_url_required, pool_size=settings.concurrency + 2)
    if check:
        try:
            check_schema(engine)
        except BaseException:
            engine.dispose()
            raise
    return engine


def job_repository(settings: Settings) -> JobRepository:
    return JobRepository(database_engine(settings))


def worker_name(slot: int | None = None) -> str:
    """`host:pid` for the process, `host:pid:n` for one of its job slots (for people)."""
    base = f"{socket.gethostname()}:{os.getpid()}"
    return base if slot is None else f"{base}:{slot}"
