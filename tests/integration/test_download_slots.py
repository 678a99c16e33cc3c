"""MIRROR_JELLYFIN_MAX_DOWNLOADS over real Postgres: at most N holders, a dead or paused
holder's slot comes back, and a job waiting for a slot heartbeats `waiting`, stays clear
of the stall watchdog, and stops at once on a cancel or a shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from mirror.db.download_slots import DownloadSlots
from mirror.db.repository import JobRepository
from mirror.domain.errors import JobCancelled, ShutdownRequested, TransientError
from mirror.domain.progress import AbortSignal, Progress
from mirror.runner.heartbeat import Heartbeat

ITEM = "a" * 32


def slots(database_url: str, limit: int, *, hold_timeout_s: float = 60.0) -> DownloadSlots:
    return DownloadSlots(database_url, limit, hold_timeout_s=hold_timeout_s, ping_interval_s=0.2)


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@contextmanager
def held_slots(database_url: str, limit: int, count: int) -> Iterator[None]:
    """`count` slots held by other threads (other jobs) for the block."""
    release = threading.Event()
    holding = threading.Semaphore(0)

    def hold() -> None:
        with slots(database_url, limit).download_slot(
            uuid.uuid4(), on_progress=lambda _: None, abort=AbortSignal()
        ):
            holding.release()
            release.wait(60)

    threads = [threading.Thread(target=hold, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    for _ in range(count):
        assert holding.acquire(timeout=20), "a holder did not get its slot"
    try:
        yield
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=10)


def test_never_more_than_n_holders_and_every_waiter_gets_its_turn(database_url: str) -> None:
    lock = threading.Lock()
    holding, most, finished = 0, 0, 0
    notes: list[str] = []

    def job() -> None:
        nonlocal holding, most, finished

        def progress(p: Progress) -> None:
            with lock:
                notes.append(f"{p.phase}: {p.note}")

        with slots(database_url, 2).download_slot(
            uuid.uuid4(), on_progress=progress, abort=AbortSignal()
        ):
            with lock:
                holding += 1
                most = max(most, holding)
            time.sleep(0.3)
            with lock:
                holding -= 1
        with lock:
            finished += 1

    threads = [threading.Thread(target=job) for _ in range(6)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    elapsed = time.monotonic() - began
    assert finished == 6
    assert most == 2
    assert elapsed >= 0.85  # three rounds of two 0.3 s holds
    assert "waiting: waiting for a download slot (2 of 2 in use)" in notes


def test_without_a_free_slot_nothing_is_held(database_url: str) -> None:
    """The one-statement take locks at most one key, and none when all are taken."""
    with held_slots(database_url, 2, 2):
        abort = AbortSignal()
        seen: list[Progress] = []

        def progress(p: Progress) -> None:
            seen.append(p)
            abort.trigger(ShutdownRequested("enough"))

        with (
            pytest.raises(ShutdownRequested),
            slots(database_url, 2).download_slot(uuid.uuid4(), on_progress=progress, abort=abort),
        ):
            raise AssertionError("got a third slot of two")
        assert seen[0].phase == "waiting"


HOLDER = textwrap.dedent(
    """
    import sys, time, uuid
    from mirror.db.download_slots import DownloadSlots
    from mirror.domain.progress import AbortSignal
    url, hold_timeout = sys.argv[1], float(sys.argv[2])
    abort = AbortSignal()
    gate = DownloadSlots(url, 1, hold_timeout_s=hold_timeout, ping_interval_s=0.2)
    with gate.download_slot(uuid.uuid4(), on_progress=lambda _: None, abort=abort):
        print("holding", flush=True)
        abort.wait(120)
    print("stopped:", abort.reason, flush=True)
    """
)


def start_holder(database_url: str, hold_timeout_s: float) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, database_url, str(hold_timeout_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "holding"
    return process


def seconds_to_get_the_slot(database_url: str, timeout: float = 30) -> float:
    began = time.monotonic()
    abort = AbortSignal()
    timer = threading.Timer(timeout, lambda: abort.trigger(TransientError("no slot in time")))
    timer.start()
    try:
        with slots(database_url, 1).download_slot(
            uuid.uuid4(), on_progress=lambda _: None, abort=abort
        ):
            return time.monotonic() - began
    finally:
        timer.cancel()


def test_a_killed_holders_slot_frees_with_its_connection(database_url: str) -> None:
    holder = start_holder(database_url, hold_timeout_s=60)  # the idle timeout plays no part
    killer = threading.Timer(1.0, lambda: os.kill(holder.pid, signal.SIGKILL))
    killer.start()
    try:
        waited = seconds_to_get_the_slot(database_url)
    finally:
        killer.cancel()
        holder.kill()
        holder.communicate(timeout=10)
    # The slot was held until the kill (1 s) and came back at once, not after 60 s.
    assert 0.9 <= waited < 5, waited


def test_a_paused_holder_loses_its_slot_and_then_stops_its_download(database_url: str) -> None:
    holder = start_holder(database_url, hold_timeout_s=2)
    os.kill(holder.pid, signal.SIGSTOP)
    try:
        waited = seconds_to_get_the_slot(database_url)
        # Postgres drops the silent holder's connection after its 2 s hold timeout.
        assert 1.5 <= waited < 15, waited
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    output, _ = holder.communicate(timeout=20)
    # Resumed, it finds its slot gone and stops rather than download without one.
    assert "stopped: lost the download slot" in output, output


@pytest.fixture
def waiting_job(
    repo: JobRepository, database_url: str
) -> Iterator[tuple[JobRepository, Heartbeat]]:
    """A claimed job with a running heartbeat (stall timeout 0.5 s) and both slots taken."""
    repo.enqueue([ITEM])
    lease = repo.claim_next("test:1:0")
    assert lease is not None
    heartbeat = Heartbeat(
        repo, lease.job_id, lease.token, interval=0.2, stall_timeout=0.5, lease_timeout=30
    )
    with held_slots(database_url, 2, 2), heartbeat:
        yield repo, heartbeat


def wait_for_slot_in_thread(
    database_url: str, heartbeat: Heartbeat
) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def run() -> None:
        try:
            with slots(database_url, 2).download_slot(
                heartbeat.job_id, on_progress=heartbeat, abort=heartbeat.abort
            ):
                raised.append(AssertionError("got a slot while both were held"))
        except BaseException as error:
            raised.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


def test_a_job_waiting_for_a_slot_says_so_outlives_the_stall_timeout_and_stops_on_cancel(
    database_url: str, waiting_job: tuple[JobRepository, Heartbeat]
) -> None:
    repo, heartbeat = waiting_job
    thread, raised = wait_for_slot_in_thread(database_url, heartbeat)
    wait_until(
        lambda: (repo.get(heartbeat.job_id).heartbeat_data or {}).get("phase") == "waiting",
        10,
        "heartbeat_data phase waiting",
    )
    data = repo.get(heartbeat.job_id).heartbeat_data or {}
    assert data["note"] == "waiting for a download slot (2 of 2 in use)"
    beat_before = repo.get(heartbeat.job_id).heartbeat_at
    time.sleep(1.5)  # three stall timeouts of waiting: still alive, still beating
    assert not heartbeat.abort.is_set(), heartbeat.abort.reason
    assert thread.is_alive()
    assert repo.get(heartbeat.job_id).heartbeat_at != beat_before

    repo.cancel(heartbeat.job_id)
    began = time.monotonic()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert time.monotonic() - began < 3
    assert len(raised) == 1 and isinstance(raised[0], JobCancelled), raised


def test_a_job_waiting_for_a_slot_stops_at_once_on_shutdown(
    database_url: str, waiting_job: tuple[JobRepository, Heartbeat]
) -> None:
    _, heartbeat = waiting_job
    thread, raised = wait_for_slot_in_thread(database_url, heartbeat)
    wait_until(lambda: heartbeat.latest() is not None, 10, "the waiting report")
    began = time.monotonic()
    heartbeat.abort.trigger(ShutdownRequested("worker shutting down"))
    thread.join(timeout=10)
    assert time.monotonic() - began < 1.0
    assert len(raised) == 1 and isinstance(raised[0], ShutdownRequested), raised
