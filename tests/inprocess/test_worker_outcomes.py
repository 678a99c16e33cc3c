"""The worker loop and every outcome of an attempt, in this process on the fakes.

Worker + run_attempt + MirrorPipeline with real ffmpeg; Jellyfin, S3 and the queue in
memory. What needs real processes and signals (kill -9, SIGTERM to a process, several
processes racing) stays in tests/e2e; the tests here moved from there are named in their
docstrings.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from mirror.demo.media import SampleMedia, corrupt_copy, describe_streams
from mirror.domain.errors import TransientError
from mirror.domain.item import ServedFile
from mirror.domain.jobs import DatabaseUnavailable, Fence
from mirror.domain.objects import Upload
from mirror.domain.progress import AbortSignal, ProgressCallback
from mirror.runner.attempt import Outcome
from mirror.testing.fake_s3 import InMemoryObjectStore
from tests.fixtures.inprocess import InProcess
from tests.fixtures.stack import mirrored_keys

UNKNOWN = "0123456789abcdef0123456789abcdef"


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)
    return value


def phase_of(inproc: InProcess, item: str) -> str | None:
    job = inproc.job(item)
    return (job.heartbeat_data or {}).get("phase") if job.status == "processing" else None


class Journal:
    """Records, in order, every port call of one run (Jellyfin, S3, the queue's done)."""

    def __init__(self, inproc: InProcess) -> None:
        self.calls: list[str] = []
        self.phases: list[str] = []
        media, store, queue = inproc.media, inproc.store, inproc.queue
        journal = self

        class Media:
            def get_item(self, item_id: str) -> Any:
                journal.calls.append("get_item")
                return media.get_item(item_id)

            def download(self, item_id: str, dest: Path, **kwargs: Any) -> ServedFile:
                journal.calls.append("download")
                return media.download(item_id, dest, **kwargs)

            def fetch_subtitle(self, item_id: str, source: str, index: int) -> bytes:
                journal.calls.append("fetch_subtitle")
                return media.fetch_subtitle(item_id, source, index)

        class Store:
            def check_bucket(self) -> None:
                journal.calls.append("check_bucket")
                store.check_bucket()

            def abort_stale_multipart_uploads(self, keys: Any) -> int:
                journal.calls.append("abort_stale_multipart_uploads")
                return store.abort_stale_multipart_uploads(keys)

            def stream_files(
                self,
                uploads: Sequence[Upload],
                *,
                follow: bool,
                on_progress: ProgressCallback,
                abort: AbortSignal,
            ) -> Any:
                journal.calls.append("stream_files")
                return store.stream_files(
                    uploads, follow=follow, on_progress=on_progress, abort=abort
                )

            def put_bytes(self, key: str, body: bytes, content_type: str) -> None:
                journal.calls.append(f"put_bytes {key.rsplit('/', 1)[-1]}")
                store.put_bytes(key, body, content_type)

        real_heartbeat, real_done = queue.heartbeat, queue.mark_done

        def heartbeat(job_id: Any, token: Any, progress: dict[str, Any] | None) -> Fence:
            if progress and (not self.phases or self.phases[-1] != progress["phase"]):
                self.phases.append(progress["phase"])
            return real_heartbeat(job_id, token, progress)  # type: ignore[no-any-return]

        def mark_done(*args: Any, **kwargs: Any) -> Fence:
            journal.calls.append("mark_done")
            return real_done(*args, **kwargs)  # type: ignore[no-any-return]

        queue.heartbeat, queue.mark_done = heartbeat, mark_done
        inproc.media, inproc.store = Media(), Store()


# -- step order and the outputs ------------------------------------------------------------


def test_a_job_runs_its_steps_in_order_and_ends_done_with_every_output(
    inproc: InProcess, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    store = inproc.fake_store
    item = inproc.add(sample_h264_aac, "Remux Sample")
    inproc.enqueue(item)
    journal = Journal(inproc)

    assert inproc.run_burst() == [Outcome.DONE]

    assert journal.calls == [
        "get_item",
        "check_bucket",  # before any byte is downloaded
        "download",  # on its own thread; planning waits for its first bytes
        "abort_stale_multipart_uploads",
        "stream_files",  # every upload (outputs, then playlists) in one run, invisible
        "put_bytes manifest.json",  # the last object
        "mark_done",  # only once everything is in S3
    ]
    # progress written while it ran, phase by phase; the upload's last figures with done
    # (phases overlap: a short transcode may fall between two throttled writes)
    assert journal.phases[0] == "download" and journal.phases[-1] == "upload"
    assert journal.phases == sorted(journal.phases, key=["download", "transcode", "upload"].index)
    job = inproc.job(item)
    assert job.heartbeat_data is not None and job.heartbeat_data["phase"] == "upload"
    assert (job.status, job.attempts, job.error) == ("done", 1, None)
    assert job.heartbeat_data is not None and job.heartbeat_data["percent"] == 100.0
    assert store.object_keys() == mirrored_keys(job)
    assert job.video is not None
    body = store.body(f"mirror/{item}/video.mp4")
    assert (job.video["size"], job.video["sha256"]) == (len(body), hashlib.sha256(body).hexdigest())
    video = tmp_path / "video.mp4"
    video.write_bytes(body)
    assert [s.codec for s in describe_streams(video, inproc.ffmpeg_path)] == ["h264"]
    assert [e["key"] for e in job.audio_keys or []] == [
        f"mirror/{item}/audio/1-eng.m4a",
        f"mirror/{item}/audio/2-fra.m4a",
    ]
    assert inproc.attempt_outcomes(item) == ["done"]
    [attempt] = inproc.queue.attempts_of(job.id)
    assert attempt.stats.bytes_downloaded == sample_h264_aac.size
    assert attempt.stats.bytes_uploaded and attempt.stats.heartbeat_writes
    assert list(inproc.work_dir.iterdir()) == []


# -- the burst run ----------------------------------------------------------------------------


def test_a_burst_run_ends_at_once_when_nothing_is_queued(inproc: InProcess) -> None:
    started = time.monotonic()
    assert inproc.run_burst(concurrency=2) == []
    assert time.monotonic() - started < 2


def test_a_burst_run_ends_when_every_job_has_settled_in_two_slots(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    """Also tests/e2e/test_worker_lifecycle.py's concurrency test: two slots, side by side."""
    items = [inproc.add(sample_h264_aac, f"Item {n}") for n in range(3)]
    bad = UNKNOWN
    inproc.enqueue(*items, bad)
    inproc.fake_media.throttle(sample_h264_aac.size * 2)  # ~0.5 s per download
    running: set[str] = set()
    seen_together = threading.Event()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            now = {i for i in items if inproc.job(i).status == "processing"}
            running.update(now)
            if len(now) >= 2:
                seen_together.set()
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    outcomes = inproc.run_burst(concurrency=2)
    stop.set()
    watcher.join()

    assert sorted(o.value for o in outcomes) == ["done", "done", "done", "failed"]
    assert seen_together.is_set()  # two jobs ran at the same time
    assert all(inproc.job(i).status == "done" for i in items)
    holders = [str(inproc.job(i).worker_id).rsplit(":", 1) for i in items]
    assert {process for process, _ in holders} == {f"{socket.gethostname()}:{os.getpid()}"}
    assert {slot for _, slot in holders} == {"0", "1"}  # one process, two slots


# -- every outcome ------------------------------------------------------------------------------


def test_an_unknown_item_fails_with_not_found_and_writes_nothing(inproc: InProcess) -> None:
    """Moved from tests/e2e/test_mirror_end_to_end.py."""
    inproc.enqueue(UNKNOWN)
    assert inproc.run_burst() == [Outcome.FAILED]
    job = inproc.job(UNKNOWN)
    assert job.status == "failed"
    assert job.error is not None and "not found in Jellyfin" in job.error
    assert job.attempts == 1
    assert inproc.fake_store.object_keys() == []


def test_corrupt_media_fails_with_ffmpegs_reason(
    inproc: InProcess, tmp_path: Path, sample_h264_aac: SampleMedia
) -> None:
    """Moved from tests/e2e/test_mirror_end_to_end.py."""
    broken = corrupt_copy(sample_h264_aac.path, tmp_path / "broken.mkv")
    item = inproc.fake_media.add_item(
        broken, name="Broken", streams=sample_h264_aac.streams, duration_s=4.0
    )
    inproc.enqueue(item)
    assert inproc.run_burst() == [Outcome.FAILED]
    job = inproc.job(item)
    assert job.status == "failed"
    assert job.error is not None and "ffmpeg failed" in job.error
    assert "Invalid data found" in job.error
    assert inproc.fake_store.object_keys() == []
    assert list(inproc.work_dir.iterdir()) == []


def test_item_without_video_fails_before_downloading(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    """Moved from tests/e2e/test_mirror_end_to_end.py."""
    audio_only = tuple(s for s in sample_h264_aac.streams if s.type != "Video")
    item = inproc.add(sample_h264_aac, "Audio book", streams=audio_only)
    inproc.enqueue(item)
    assert inproc.run_burst() == [Outcome.FAILED]
    job = inproc.job(item)
    assert job.status == "failed"
    assert job.error is not None and "no video stream" in job.error
    assert inproc.fake_media.download_requests == []


def test_download_cut_three_times_completes_in_one_attempt_by_resuming(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    """Moved from tests/e2e/test_mirror_end_to_end.py (the client's own resume is tested
    on the stand-in by test_fake_conformance.py and tests/integration/test_jellyfin_*)."""
    item = inproc.add(sample_h264_aac)
    size = sample_h264_aac.size
    inproc.fake_media.cut_after(size // 4, times=3)
    inproc.enqueue(item)
    assert inproc.run_burst() == [Outcome.DONE]
    job = inproc.job(item)
    assert (job.status, job.attempts) == ("done", 1), job.error
    assert len(inproc.fake_media.download_requests) == 4
    assert inproc.fake_media.bytes_served < 1.3 * size


def test_a_transient_failure_is_retried_after_the_backoff_and_then_done(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    item = inproc.add(sample_h264_aac)
    inproc.fake_store.fail_next("finish", TransientError("S3 upload failed: 503"))
    inproc.retry_backoff = 0.3
    inproc.enqueue(item)

    # A burst run ends when nothing is claimable: the job waits out its backoff.
    assert inproc.run_burst() == [Outcome.RETRY]
    job = inproc.job(item)
    assert (job.status, job.attempts, job.error) == ("new", 1, "S3 upload failed: 503")
    assert inproc.fake_store.object_keys() == []
    time.sleep(0.3)
    assert inproc.run_burst() == [Outcome.DONE]

    job = inproc.job(item)
    assert (job.status, job.attempts, job.error) == ("done", 2, None)
    assert inproc.attempt_outcomes(item) == ["retry", "done"]
    assert inproc.fake_store.object_keys() == mirrored_keys(job)


def test_transient_failures_fail_the_job_once_its_attempts_are_used_up(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    item = inproc.add(sample_h264_aac)
    inproc.fake_media.fail_downloads(TransientError("Jellyfin answered 502"), times=100)
    inproc.retry_backoff = 0.05
    inproc.enqueue(item, max_attempts=2)

    assert inproc.run_burst() == [Outcome.RETRY]
    time.sleep(0.05)
    assert inproc.run_burst() == [Outcome.FAILED]

    job = inproc.job(item)
    assert (job.status, job.attempts) == ("failed", 2)
    assert job.error == "Jellyfin answered 502 (attempts used up: 2 of 2)"
    assert inproc.fake_store.object_keys() == []


def test_a_stalled_download_is_aborted_by_the_stall_timeout_and_retried(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    """Moved from tests/e2e/test_faults_services.py."""
    item = inproc.add(sample_h264_aac)
    inproc.fake_media.stall_downloads(True)
    inproc.stall_timeout = 1.0
    inproc.heartbeat_interval = 0.2
    inproc.enqueue(item)
    worker = inproc.start()
    wait_for(lambda: inproc.fake_media.download_requests, 30, "the download")
    wait_for(lambda: inproc.job(item).status == "new", 30, "the stall to be noticed")
    job = inproc.job(item)
    assert job.error is not None and "stalled" in job.error and "download" in job.error
    inproc.fake_media.stall_downloads(False)
    wait_for(lambda: inproc.job(item).status == "done", 60, "the retry")
    worker.stop()
    assert worker.join()
    assert inproc.attempt_outcomes(item) == ["retry", "done"]
    assert inproc.outcomes == [Outcome.RETRY, Outcome.DONE]


def test_too_little_disk_releases_without_using_an_attempt(
    inproc: InProcess, sample_h264_aac: SampleMedia, caplog: pytest.LogCaptureFixture
) -> None:
    """Moved from tests/e2e/test_faults_services.py."""
    item = inproc.add(sample_h264_aac)
    inproc.free_space_reserve = 1000 * 10**12
    inproc.enqueue(item)
    assert inproc.run_burst() == [Outcome.WAITING]
    job = inproc.job(item)
    assert (job.status, job.attempts) == ("new", 0)
    assert job.run_after > job.updated_at  # no claim/release loop
    assert "missing" in caplog.text and "need" in caplog.text
    assert job.error is not None and "not enough free space" in job.error
    assert inproc.fake_media.download_requests == []
    assert inproc.attempt_outcomes(item) == ["waiting"]
    assert job.heartbeat_data is not None
    assert job.heartbeat_data["phase"] == "waiting for disk"


def test_missing_bucket_fails_the_job_naming_the_bucket(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    """Moved from tests/e2e/test_faults_services.py (S3Storage's answer to a missing bucket
    is checked against the fake's in test_fake_conformance.py)."""
    item = inproc.add(sample_h264_aac)
    inproc.store = InMemoryObjectStore("no-such-bucket", exists=False)
    inproc.enqueue(item)
    assert inproc.run_burst() == [Outcome.FAILED]
    job = inproc.job(item)
    assert job.status == "failed"
    assert job.error == "S3 bucket 'no-such-bucket' does not exist"
    assert inproc.fake_media.download_requests == []  # found out before downloading


def test_a_job_cancelled_while_it_downloads_stops_and_writes_nothing(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    item = inproc.add(sample_h264_aac)
    inproc.fake_media.throttle(sample_h264_aac.size // 20)  # a 20 s download
    inproc.heartbeat_interval = 0.2
    inproc.enqueue(item)
    worker = inproc.start(burst=True)
    wait_for(lambda: phase_of(inproc, item) == "download", 30, "the download")
    inproc.queue.cancel(inproc.job(item).id)
    assert worker.join(30)
    assert inproc.outcomes == [Outcome.CANCELLED]
    job = inproc.job(item)
    assert (job.status, job.attempts) == ("cancelled", 1)
    assert inproc.fake_store.object_keys() == []
    assert inproc.attempt_outcomes(item) == ["cancelled"]


def test_an_attempt_that_lost_its_lease_touches_nothing(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    """The reaper handed the job on while this attempt downloaded: it stops, and neither
    its outputs nor its fate are written (the new holder's row stays as it is)."""
    item = inproc.add(sample_h264_aac)
    inproc.fake_media.throttle(sample_h264_aac.size // 20)
    inproc.heartbeat_interval = 0.2
    inproc.enqueue(item)
    worker = inproc.start(burst=True)
    wait_for(lambda: phase_of(inproc, item) == "download", 30, "the download")
    job_id = inproc.job(item).id
    inproc.queue.make_stale(job_id)
    [rescued] = inproc.queue.return_stale_to_new(5)
    assert rescued.status == "new"
    other = inproc.queue.claim_next("other-host:1:0")
    assert other is not None
    assert wait_for(lambda: Outcome.LEASE_LOST in inproc.outcomes, 30, "the lost lease")
    worker.stop()
    assert worker.join(30)
    job = inproc.job(item)
    assert (job.status, job.worker_id, job.lease_token) == (
        "processing",
        "other-host:1:0",
        other.token,
    )
    assert inproc.fake_store.object_keys() == []
    # the reaper closed the lost attempt's history row ("stale"); the new one runs
    assert inproc.attempt_outcomes(item) == ["stale", None]


def test_a_database_blip_at_done_is_ridden_out_in_the_same_attempt(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    """The in-process half of tests/e2e/test_faults_postgres.py's done-vs-blip: mark_done
    meets an outage with every output in S3, and is retried until it lands."""
    item = inproc.add(sample_h264_aac)
    inproc.enqueue(item)
    queue, store = inproc.queue, inproc.fake_store
    real_put = store.put_bytes

    def put_then_go_down(key: str, body: bytes, content_type: str) -> None:
        real_put(key, body, content_type)
        queue.fail_with = DatabaseUnavailable("database unavailable", "connection refused")
        threading.Timer(0.5, lambda: setattr(queue, "fail_with", None)).start()

    store.put_bytes = put_then_go_down  # type: ignore[method-assign]
    assert inproc.run_burst() == [Outcome.DONE]
    job = inproc.job(item)
    assert (job.status, job.attempts) == ("done", 1)
    assert inproc.attempt_outcomes(item) == ["done"]


# -- shutdown -------------------------------------------------------------------------------


def assert_released_then_done(inproc: InProcess, item: str) -> None:
    job = inproc.job(item)
    assert (job.status, job.attempts, job.worker_id) == ("new", 0, None), job.error
    assert inproc.run_burst() == [Outcome.DONE]
    assert inproc.job(item).status == "done"
    assert inproc.attempt_outcomes(item) == ["released", "done"]


def stop_and_time(inproc: InProcess, worker: Any) -> float:
    stopped = time.monotonic()
    worker.stop()
    assert worker.join(30)
    return time.monotonic() - stopped


def test_a_stop_while_jellyfin_metadata_is_silent_releases_the_job_within_the_grace(
    inproc: InProcess, sample_h264_aac: SampleMedia, caplog: pytest.LogCaptureFixture
) -> None:
    """Moved from tests/e2e/test_shutdown.py (SIGTERM to a process: test_faults_crashes)."""
    caplog.set_level(logging.INFO)
    item = inproc.add(sample_h264_aac)
    inproc.fake_media.stall_metadata(True)
    inproc.shutdown_grace = 0.5
    inproc.enqueue(item)
    worker = inproc.start()
    wait_for(lambda: inproc.fake_media.metadata_waiting > 0, 30, "the metadata request")
    took = stop_and_time(inproc, worker)
    assert took < inproc.shutdown_grace + 3  # the silent call does not hold it up
    assert inproc.outcomes == [Outcome.RELEASED]
    assert "released to the queue for shutdown" in caplog.text
    inproc.fake_media.stall_metadata(False)
    assert_released_then_done(inproc, item)


def test_a_stop_while_the_s3_bucket_check_is_silent_releases_the_job_within_the_grace(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    """Moved from tests/e2e/test_shutdown.py."""
    item = inproc.add(sample_h264_aac)
    inproc.fake_store.stall_bucket_check(True)
    inproc.shutdown_grace = 0.5
    inproc.enqueue(item)
    worker = inproc.start()
    wait_for(lambda: inproc.fake_store.bucket_checks_held > 0, 30, "the bucket check")
    took = stop_and_time(inproc, worker)
    assert took < inproc.shutdown_grace + 3
    inproc.fake_store.stall_bucket_check(False)
    assert inproc.fake_media.download_requests == []
    assert_released_then_done(inproc, item)


def test_a_job_that_ends_within_the_grace_is_done_not_released(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    item = inproc.add(sample_h264_aac)
    inproc.fake_media.throttle(sample_h264_aac.size)  # a download of about 1 s
    inproc.shutdown_grace = 30
    inproc.enqueue(item, UNKNOWN.replace("01", "ab"))
    worker = inproc.start()
    wait_for(lambda: phase_of(inproc, item) == "download", 30, "the download")
    took = stop_and_time(inproc, worker)
    assert took < 20
    assert inproc.outcomes == [Outcome.DONE]  # and the other job was never claimed
    assert inproc.job(item).status == "done"
    assert inproc.job(UNKNOWN.replace("01", "ab")).status == "new"


def test_a_second_stop_cuts_the_grace_short(
    inproc: InProcess, sample_h264_aac: SampleMedia, caplog: pytest.LogCaptureFixture
) -> None:
    """Moved from tests/e2e/test_shutdown.py."""
    caplog.set_level(logging.INFO)
    item = inproc.add(sample_h264_aac)
    inproc.fake_media.throttle(sample_h264_aac.size // 100)  # a download of ~100 s
    inproc.shutdown_grace = 60
    inproc.enqueue(item)
    worker = inproc.start()
    wait_for(lambda: phase_of(inproc, item) == "download", 30, "the download")
    worker.stop()
    wait_for(lambda: "stop requested" in caplog.text, 10, "the first stop")
    took = stop_and_time(inproc, worker)
    assert took < 8  # not the 60 s grace
    assert "another stop request: aborting running jobs now" in caplog.text
    inproc.fake_media.throttle(None)
    assert_released_then_done(inproc, item)


def test_an_attempt_that_ignores_the_abort_is_released_by_the_worker(
    inproc: InProcess, sample_h264_aac: SampleMedia, caplog: pytest.LogCaptureFixture
) -> None:
    """A call that never returns: after grace and abort_wait the worker puts the job back
    itself, so it never exits holding a job."""
    caplog.set_level(logging.INFO)
    item = inproc.add(sample_h264_aac)
    never, entered = threading.Event(), threading.Event()
    media = inproc.fake_media

    def stuck(*args: Any, **kwargs: Any) -> ServedFile:
        entered.set()
        never.wait(30)  # deaf to the abort signal
        return ServedFile(0)

    media.download = stuck  # type: ignore[method-assign]
    inproc.shutdown_grace, inproc.abort_wait = 0.2, 0.5
    inproc.enqueue(item)
    worker = inproc.start()
    wait_for(entered.is_set, 30, "the download")
    took = stop_and_time(inproc, worker)
    never.set()
    assert took < 5
    assert "released the job to the queue" in caplog.text
    assert inproc.job(item).status == "new"
