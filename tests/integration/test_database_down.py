"""Postgres down: every adapter class of mirror.db answers with the domain's error.

The queue's classes raise `DatabaseUnavailable` (mirror.db.engine.raises_unavailable),
the download slots a `TransientError` for the job, the listener reconnects quietly; none
lets SQLAlchemy's or psycopg's error out, so mirror.web and mirror.cli never import them
(an import-linter contract). "Down" is a closed port: refused at once, nothing to start.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

import mirror.db
from mirror.db import migrations
from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import DashboardQueries
from mirror.db.download_slots import DownloadSlots
from mirror.db.engine import make_engine, translates_driver_errors
from mirror.db.listen import JobListener
from mirror.db.mirrored import MirroredItems
from mirror.db.removals import Removals
from mirror.db.repository import JobRepository
from mirror.db.sessions import EndedSessionStore
from mirror.db.slot_leases import LeasedDownloadSlots
from mirror.db.stats import QueueStats
from mirror.domain.errors import TransientError
from mirror.domain.jobs import DatabaseUnavailable
from mirror.domain.progress import AbortSignal

ITEM = "c0ffee00c0ffee00c0ffee00c0ffee00"

# One statement per class that raises DatabaseUnavailable; its other public methods are
# checked to be wrapped the same way (test_every_public_method_is_translated).
QUERIES: dict[type, Callable[[Any], object]] = {
    JobRepository: lambda repo: repo.latest_for_item(ITEM),
    AttemptLog: lambda log: log.attempts_of(uuid.uuid4()),
    DashboardQueries: lambda queries: queries.overview(),
    MirroredItems: lambda mirrored: list(mirrored.done_jobs(None)),  # a generator
    Removals: lambda removals: removals.pending(),
    EndedSessionStore: lambda sessions: sessions.has_ended("session"),
    QueueStats: lambda stats: stats.jobs_by_status(),
}
# Classes that translate on their own terms (the slots: TransientError; the listener
# never raises), each taken against the closed port below.
OWN_TERMS = {DownloadSlots, LeasedDownloadSlots, JobListener}


@pytest.fixture(scope="module")
def closed_url() -> str:
    """A Postgres URL on a port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/mirror"


@pytest.fixture
def down(closed_url: str) -> Iterator[Engine]:
    engine = make_engine(closed_url, pool_size=1)
    yield engine
    engine.dispose()


def _adapter_classes() -> set[type]:
    """Every class of mirror.db built on an engine or a database URL."""
    found = set()
    for module_info in pkgutil.iter_modules(mirror.db.__path__, "mirror.db."):
        module = importlib.import_module(module_info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or cls.__init__ is object.__init__:
                continue
            params = inspect.signature(cls.__init__).parameters
            if "engine" in params or "database_url" in params:
                found.add(cls)
    return found


def test_every_adapter_class_is_taken_here() -> None:
    assert _adapter_classes() == set(QUERIES) | OWN_TERMS


@pytest.mark.parametrize("cls", list(QUERIES), ids=lambda cls: cls.__name__)
def test_a_statement_on_a_down_database_raises_database_unavailable(
    cls: type, down: Engine
) -> None:
    with pytest.raises(DatabaseUnavailable) as raised:
        QUERIES[cls](cls(down))
    assert "refused" in raised.value.detail.lower() or "connect" in raised.value.detail.lower()


@pytest.mark.parametrize("cls", list(QUERIES), ids=lambda cls: cls.__name__)
def test_every_public_method_is_translated(cls: type) -> None:
    bare = [
        name
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and not translates_driver_errors(member)
    ]
    assert bare == []


def test_a_migration_on_a_down_database_raises_database_unavailable(down: Engine) -> None:
    with pytest.raises(DatabaseUnavailable):
        migrations.upgrade(down)


def test_a_download_slot_on_a_down_database_is_a_transient_error(
    closed_url: str, down: Engine
) -> None:
    gates = [
        DownloadSlots(closed_url, 1, hold_timeout_s=5, ping_interval_s=1),
        LeasedDownloadSlots(down, 1, holder="w", lease_s=5, renew_interval_s=1),
    ]
    for gate in gates:
        with (
            pytest.raises(TransientError, match="Postgres"),
            gate.download_slot(uuid.uuid4(), on_progress=lambda _: None, abort=AbortSignal()),
        ):
            pass


def test_the_listener_rides_out_a_down_database(closed_url: str) -> None:
    wake, stopping = threading.Event(), threading.Event()
    listener = threading.Thread(
        target=JobListener(closed_url, reconnect_s=0.05), args=(wake, stopping)
    )
    listener.start()
    stopping.wait(0.2)  # a few refused connections
    stopping.set()
    listener.join(10)
    assert not listener.is_alive() and not wake.is_set()
