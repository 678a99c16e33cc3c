"""Byte progress and stopping of an upload run across threads; S3Storage's face."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from s3transfer.futures import TransferCoordinator, TransferFuture, TransferMeta

from mirror.errors import ConfigError, JobCancelled
from mirror.progress import Progress
from mirror.s3.storage import MiB, S3Storage
from mirror.s3.upload_run import ByteTally, RunSubscriber, UploadRun


def test_tally_sum_is_exact_with_negative_deltas_from_many_threads() -> None:
    tally = ByteTally()
    threads_n, rounds = 8, 5000
    start = threading.Barrier(threads_n)

    def feed(seed: int) -> None:
        start.wait()
        for i in range(rounds):
            # a part sends 3 chunks, a retry rewinds 2 of them, then sends them again
            delta = (seed + i) % 7 + 1
            tally.add(delta)
            tally.add(delta)
            tally.add(-delta)
            tally.add(delta)

    threads = [threading.Thread(target=feed, args=(n,)) for n in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    expected = sum(2 * ((n + i) % 7 + 1) for n in range(threads_n) for i in range(rounds))
    assert tally.done == expected


def test_tally_add_returns_running_total() -> None:
    tally = ByteTally()
    assert tally.add(10) == 10
    assert tally.add(-4) == 6
    assert tally.done == 6


def test_repr_names_the_bucket_and_endpoint_and_no_credentials() -> None:
    storage = S3Storage(
        "bucket",
        endpoint_url="http://127.0.0.1:9",
        access_key_id="AKIDEXAMPLE",
        secret_access_key="very-secret-value",
    )
    # What log lines and tracebacks show of a storage: exactly this, never a key.
    assert repr(storage) == "S3Storage(bucket='bucket', endpoint='http://127.0.0.1:9')"


def test_half_given_credentials_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="together"):
        S3Storage("bucket", access_key_id="AKIDEXAMPLE")


def test_parts_below_s3_minimum_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="5 MiB"):
        S3Storage("bucket", part_size=MiB)


def _tracked_futures(run: UploadRun, count: int) -> list[TransferCoordinator]:
    """Real s3transfer futures wired to the run the way TransferManager wires them."""
    subscriber = RunSubscriber(run)
    coordinators = []
    for _ in range(count):
        coordinator = TransferCoordinator()
        future = TransferFuture(TransferMeta(), coordinator)
        coordinator.add_done_callback(subscriber.on_done, future=future)
        run.add_future(future)
        coordinators.append(coordinator)
    return coordinators


def _in_thread(action: Callable[[], None]) -> None:
    worker = threading.Thread(target=action, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "deadlocked"


def test_stopping_cancels_transfers_that_have_not_started_without_deadlock() -> None:
    run = UploadRun(total=10, count=2, on_progress=lambda progress: None)
    coordinators = _tracked_futures(run, 2)  # status: not-started

    _in_thread(run.stop)

    assert run.all_done.is_set()
    assert [coordinator.status for coordinator in coordinators] == ["cancelled"] * 2
    assert run.first_failure is None  # a cancellation is not a failure to report


def test_one_failed_transfer_cancels_the_others() -> None:
    run = UploadRun(total=10, count=2, on_progress=lambda progress: None)
    failing, other = _tracked_futures(run, 2)
    failing.set_status_to_running()
    other.set_status_to_running()

    def fail() -> None:
        failing.set_exception(OSError("disk gone"))
        failing.announce_done()

    _in_thread(fail)

    assert isinstance(run.first_failure, OSError)
    assert other.status == "cancelled"


def test_raising_progress_callback_is_kept_and_stops_the_run() -> None:
    def refuse(progress: Progress) -> None:
        raise JobCancelled("cancelled")

    run = UploadRun(total=10, count=1, on_progress=refuse)
    (coordinator,) = _tracked_futures(run, 1)
    coordinator.set_status_to_running()

    run.record_bytes(5)  # must not raise in the (s3transfer) calling thread

    assert isinstance(run.callback_error, JobCancelled)
    assert run.wake.is_set()
    assert coordinator.status == "cancelled"
