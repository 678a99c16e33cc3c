"""Jobs that are not ready, through a real worker: unprobed items and items too big."""

from __future__ import annotations

import shutil

from mirror.db.attempt_log import AttemptLog
from mirror.demo.media import SampleMedia
from tests.fixtures.stack import Stack


def outcomes(stack: Stack, item: str) -> list[str | None]:
    job = stack.job(item)
    return [a.outcome for a in AttemptLog(stack.repo.engine).attempts_of(job.id)]


def test_unprobed_item_waits_without_an_attempt_then_is_mirrored_once_probed(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item = stack.jellyfin.add_item(
        sample_h264_aac.path,
        name="Just Added",
        streams=sample_h264_aac.streams,
        duration_s=4.0,
        probed=False,
    )
    stack.mirror("enqueue", item)
    stack.start_worker()

    def waited_twice() -> bool:
        job = stack.job(item)
        data = job.heartbeat_data or {}
        return job.status == "new" and data.get("waits", 0) >= 2

    stack.wait_for(waited_twice, 30, "two waits for Jellyfin's probe")
    job = stack.job(item)
    assert job.attempts == 0
    assert job.error is not None and "Jellyfin has not probed" in job.error
    assert job.heartbeat_data is not None
    assert job.heartbeat_data["phase"] == "waiting for Jellyfin to probe"
    assert job.heartbeat_data["retry_in_s"] >= 2.0  # 1 s, then 2 s: the delay grows
    assert stack.jellyfin.download_requests() == []

    stack.jellyfin.mark_probed(item)
    stack.wait_for(lambda: stack.job(item).status == "done", 60, "the mirror after the probe")
    job = stack.job(item)
    assert job.attempts == 1
    history = outcomes(stack, item)
    assert history[-1] == "done" and set(history[:-1]) == {"waiting"}
    assert len(stack.jellyfin.download_requests()) == 1


def test_item_unprobed_past_the_timeout_fails_with_that_reason(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item = stack.jellyfin.add_item(
        sample_h264_aac.path,
        name="Never Probed",
        streams=sample_h264_aac.streams,
        duration_s=4.0,
        probed=False,
    )
    stack.start_worker(MIRROR_UNPROBED_TIMEOUT="3s")
    # Queue only once the worker runs: the timeout counts from the job's creation.
    stack.wait_for(lambda: "started" in stack.log_of(), 30, "the worker to start")
    stack.mirror("enqueue", item)

    stack.wait_for(lambda: stack.job(item).status == "failed", 30, "the job to give up")
    job = stack.job(item)
    assert job.error is not None
    assert "Jellyfin has not probed" in job.error and "within 3s" in job.error
    assert "MIRROR_UNPROBED_TIMEOUT" in job.error
    assert job.attempts == 1
    assert "waiting" in outcomes(stack, item)
    assert stack.jellyfin.download_requests() == []


def test_item_larger_than_the_whole_disk_fails_for_good(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    stack.work_dir.mkdir(parents=True, exist_ok=True)
    disk = shutil.disk_usage(stack.work_dir).total
    item = stack.jellyfin.add_item(
        sample_h264_aac.path,
        name="Enormous",
        streams=sample_h264_aac.streams,
        duration_s=4.0,
        reported_size=disk * 2,
    )
    stack.mirror("enqueue", item)

    result = stack.mirror("worker", "--burst")

    assert result.returncode == 0, result.stderr[-2000:]
    job = stack.job(item)
    assert (job.status, job.attempts) == ("failed", 1)
    assert job.error is not None and "can never fit" in job.error
    assert stack.jellyfin.download_requests() == []
