"""MIRROR_PGBOUNCER=transaction against a real PgBouncer (transaction pooling) in front of
the test Postgres: what breaks without the mode (prepared statements, session advisory
locks, LISTEN), and that its replacements (no prepared statements, download slots as
leased rows, polling) hold."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, text

from mirror.db.download_slots import DownloadSlots
from mirror.db.engine import POOLER_HINT, make_engine
from mirror.db.listen import JobListener
from mirror.db.repository import JobRepository
from mirror.db.slot_leases import LeasedDownloadSlots
from mirror.domain.errors import ShutdownRequested, TransientError
from mirror.domain.jobs import DatabaseUnavailable, Fence
from mirror.domain.progress import AbortSignal, Progress
from mirror.pipeline.download_gate import DownloadGate
from tests.fixtures.pgbouncer import StartPgBouncer


@pytest.fixture
def bouncer_url(database_url: str, start_pgbouncer: StartPgBouncer) -> str:
    """The test database through PgBouncer with ONE server connection: every client
    shares it, so what one session leaves behind, the next client meets."""
    return start_pgbouncer(pool_mode="transaction", pool_size=1).url_for(database_url)


@pytest.fixture
def engines(bouncer_url: str) -> Iterator[Callable[..., Engine]]:
    made: list[Engine] = []

    def make(*, transaction_pooling: bool) -> Engine:
        engine = make_engine(bouncer_url, pool_size=1, transaction_pooling=transaction_pooling)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.dispose()


def beat_from_two_workers(first: JobRepository, second: JobRepository) -> None:
    """Two workers' heartbeats, ten each, alternating: the same statement from two
    client connections over one server connection."""
    first.enqueue(["a" * 32, "b" * 32])
    leases = [first.claim_next("w1:0"), second.claim_next("w2:0")]
    for _ in range(10):
        for repo, lease in zip((first, second), leases, strict=True):
            assert lease is not None
            assert repo.heartbeat(lease.job_id, lease.token, {"phase": "download"}) is Fence.OK


def test_without_the_mode_prepared_statements_collide_and_the_error_says_why(
    engines: Callable[..., Engine],
) -> None:
    first = JobRepository(engines(transaction_pooling=False))
    second = JobRepository(engines(transaction_pooling=False))
    with pytest.raises(DatabaseUnavailable) as raised:
        beat_from_two_workers(first, second)
    message = str(raised.value)
    assert "prepared statement" in message, message
    assert POOLER_HINT in message, message


def test_with_the_mode_nothing_is_prepared_and_the_beats_go_through(
    engines: Callable[..., Engine],
) -> None:
    first = JobRepository(engines(transaction_pooling=True))
    second = JobRepository(engines(transaction_pooling=True))
    beat_from_two_workers(first, second)
    with first.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM pg_prepared_statements")).scalar() == 0


def take_two(gate: Callable[[], DownloadGate]) -> tuple[list[int], list[str]]:
    """Hold a slot of one, then try a second one for 1 s: (slots got, notes seen). A
    waiter reports `waiting` at its first try, so a second is plenty to see it."""
    got: list[int] = []
    notes: list[str] = []

    def note(progress: Progress) -> None:
        notes.append(str(progress.note))

    with gate().download_slot(uuid.uuid4(), on_progress=note, abort=AbortSignal()):
        got.append(1)
        abort = AbortSignal()
        timer = threading.Timer(1.0, lambda: abort.trigger(ShutdownRequested("gave up")))
        timer.start()
        try:
            with gate().download_slot(uuid.uuid4(), on_progress=note, abort=abort):
                got.append(2)
        except ShutdownRequested:
            pass
        finally:
            timer.cancel()
    return got, notes


def test_without_the_mode_a_slot_of_one_is_handed_out_twice(bouncer_url: str) -> None:
    # The advisory lock stays on the shared server connection, whose session now holds it
    # for whoever comes next: the second taker's pg_try_advisory_lock succeeds too.
    got, _ = take_two(lambda: DownloadSlots(bouncer_url, 1, hold_timeout_s=30, ping_interval_s=0.2))
    assert got == [1, 2]


def test_with_the_mode_a_slot_of_one_is_held_once_and_the_second_waits(
    engines: Callable[..., Engine],
) -> None:
    engine = engines(transaction_pooling=True)
    got, notes = take_two(
        lambda: LeasedDownloadSlots(engine, 1, holder="test", lease_s=30, renew_interval_s=0.2)
    )
    assert got == [1]
    assert "waiting for a download slot (1 of 1 in use)" in notes
    with engine.connect() as conn:  # released at the end of the block
        assert conn.execute(text("SELECT count(*) FROM media_mirror.download_slots")).scalar() == 0


def test_listen_hears_nothing_behind_transaction_pooling(
    database_url: str, bouncer_url: str
) -> None:
    """Why the mode polls: a NOTIFY reaches the server connection that ran LISTEN, which
    PgBouncer gave back to its pool, not the client waiting for it."""
    repo = JobRepository(make_engine(database_url, pool_size=1))
    heard: dict[str, bool] = {}
    try:
        for name, url in (("direct", database_url), ("pgbouncer", bouncer_url)):
            wake, stopping = threading.Event(), threading.Event()
            listener = threading.Thread(
                target=JobListener(url, reconnect_s=0.2), args=(wake, stopping), daemon=True
            )
            listener.start()
            time.sleep(0.5)  # LISTEN sent
            repo.enqueue([uuid.uuid4().hex])
            # Generous for the direct listener (it returns at once when woken); the
            # deaf one waits it out.
            heard[name] = wake.wait(1.5)
            stopping.set()
            listener.join(timeout=5)
    finally:
        repo.engine.dispose()
    assert heard == {"direct": True, "pgbouncer": False}


def test_leased_slots_hold_the_cap_across_two_workers(
    engines: Callable[..., Engine],
) -> None:
    gates = [
        LeasedDownloadSlots(
            engines(transaction_pooling=True), 2, holder=f"w{n}", lease_s=30, renew_interval_s=0.1
        )
        for n in range(2)
    ]
    lock = threading.Lock()
    holding, most, finished = 0, 0, 0

    def job(gate: LeasedDownloadSlots) -> None:
        nonlocal holding, most, finished
        with gate.download_slot(uuid.uuid4(), on_progress=lambda _: None, abort=AbortSignal()):
            with lock:
                holding += 1
                most = max(most, holding)
            time.sleep(0.3)
            with lock:
                holding -= 1
        with lock:
            finished += 1

    threads = [threading.Thread(target=job, args=(gates[n % 2],)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert (finished, most) == (6, 2)


def test_a_silent_holders_lease_expires_its_slot_goes_on_and_it_stops(
    engines: Callable[..., Engine],
) -> None:
    engine = engines(transaction_pooling=True)
    # Renews every 1.5 s a lease of 1 s: silent for longer than its lease, as a paused
    # worker would be.
    silent = LeasedDownloadSlots(engine, 1, holder="silent", lease_s=1.0, renew_interval_s=1.5)
    live = LeasedDownloadSlots(engine, 1, holder="live", lease_s=30, renew_interval_s=0.2)
    abort = AbortSignal()
    with silent.download_slot(uuid.uuid4(), on_progress=lambda _: None, abort=abort):
        began = time.monotonic()
        with live.download_slot(uuid.uuid4(), on_progress=lambda _: None, abort=AbortSignal()):
            waited = time.monotonic() - began
            assert abort.wait(5), "the silent holder did not notice its lost slot"
    assert 0.7 <= waited < 4, waited
    assert isinstance(abort.reason, TransientError)
    assert "lost the download slot" in str(abort.reason)
