"""Items that are not one media file, items with several versions, items not ready yet:
through the worker in this process (moved from tests/e2e/test_item_kinds.py and
test_waiting_jobs.py, same assertions).

Real Jellyfin lists .strm links, disc images, folder rips and missing episodes next to
plain files; none of them may be downloaded, and each fails at once naming what it is.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.jellyfin.client import JellyfinClient
from tests.fixtures.inprocess import InProcess


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
    return value


@pytest.mark.parametrize(
    ("options", "kind"),
    [
        ({"protocol": "Http"}, ".strm link"),
        ({"video_type": "Iso"}, "ISO image"),
        ({"video_type": "Dvd"}, "DVD folder"),
        ({"video_type": "BluRay"}, "Blu-ray folder"),
        ({"location_type": "Virtual", "item_type": "Episode"}, "virtual item (missing episode)"),
    ],
)
def test_non_file_item_fails_at_once_naming_its_kind_without_a_download(
    inproc: InProcess,
    sample_h264_aac: SampleMedia,
    tmp_path: Path,
    options: dict[str, Any],
    kind: str,
) -> None:
    path = sample_h264_aac.path
    if options.get("protocol") == "Http":
        path = tmp_path / "Remote.strm"
        path.write_text("http://media.example/stream.mkv\n")
    elif options.get("video_type") in ("Dvd", "BluRay"):
        path = tmp_path / "Disc"
        (path / "VIDEO_TS").mkdir(parents=True)
    item = inproc.fake_media.add_item(
        path, name="Odd One", streams=sample_h264_aac.streams, duration_s=4.0, **options
    )
    inproc.enqueue(item)

    inproc.run_burst()

    job = inproc.job(item)
    assert job.status == "failed"
    assert job.attempts == 1
    assert job.error is not None
    article = "an" if kind == "ISO image" else "a"
    assert f"is {article} {kind}, not a media file" in job.error
    assert "nothing was downloaded" in job.error
    assert inproc.fake_media.download_requests == []
    assert inproc.fake_store.object_keys() == []


def test_folder_item_fails_naming_it_a_folder(inproc: InProcess) -> None:
    series = inproc.fake_media.add_folder("Some Show", item_type="Series")
    inproc.enqueue(series)

    inproc.run_burst()

    job = inproc.job(series)
    assert job.status == "failed"
    assert job.error is not None and "is a folder (Series)" in job.error
    assert inproc.fake_media.download_requests == []


def test_multi_version_item_mirrors_its_own_source_and_records_it(
    inproc: InProcess, sample_h264_aac: SampleMedia, sample_mpeg4_mp3: SampleMedia
) -> None:
    # Jellyfin lists the other versions BEFORE the item's own source.
    item = inproc.add(sample_h264_aac, "Two Cuts", other_versions=[sample_mpeg4_mp3.path])
    inproc.enqueue(item)

    inproc.run_burst()

    job = inproc.job(item)
    assert job.status == "done", job.error
    assert job.attempts == 1
    assert job.source is not None
    assert job.source["media_source_id"] == item
    assert job.source["path"] == str(sample_h264_aac.path)
    assert job.source["size"] == sample_h264_aac.size
    assert inproc.fake_media.download_requests == [item]


@pytest.fixture
def real_client(jellyfin: JellyfinStandIn) -> Iterator[JellyfinClient]:
    with JellyfinClient(jellyfin.url, jellyfin.api_key, retry_initial_wait=0.05) as client:
        yield client


def test_symlinked_file_on_jellyfin_10_11_3_fails_naming_the_server_bug(
    inproc: InProcess,
    jellyfin: JellyfinStandIn,
    real_client: JellyfinClient,
    sample_h264_aac: SampleMedia,
    tmp_path: Path,
) -> None:
    # The bug is in how the real client reads a real server: the stand-in, over HTTP.
    inproc.media = real_client
    jellyfin.version = "10.11.3"
    link = tmp_path / "Linked.mkv"
    link.symlink_to(sample_h264_aac.path)
    # Real 10.11.1-4 servers report the target's size and send the link's: a mismatch.
    item = jellyfin.add_item(
        link,
        name="Linked",
        streams=sample_h264_aac.streams,
        duration_s=4.0,
        symlink_bug=True,
        reported_size=sample_h264_aac.size,
    )
    inproc.enqueue(item)

    inproc.run_burst()

    job = inproc.job(item)
    assert (job.status, job.attempts) == ("failed", 1)
    assert job.error is not None
    assert "#15279" in job.error and "10.11.5" in job.error and "symlink" in job.error
    assert "rescan" not in job.error
    assert len(jellyfin.download_requests()) == 1
    assert inproc.fake_store.object_keys() == []


def test_unprobed_item_waits_without_an_attempt_then_is_mirrored_once_probed(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    item = inproc.add(sample_h264_aac, "Just Added", probed=False)
    inproc.enqueue(item)
    worker = inproc.start()

    def waited_twice() -> bool:
        job = inproc.job(item)
        return job.status == "new" and (job.heartbeat_data or {}).get("waits", 0) >= 2

    wait_for(waited_twice, 30, "two waits for Jellyfin's probe")
    job = inproc.job(item)
    assert job.attempts == 0
    assert job.error is not None and "Jellyfin has not probed" in job.error
    assert job.heartbeat_data is not None
    assert job.heartbeat_data["phase"] == "waiting for Jellyfin to probe"
    # retry_backoff 0.5 s, then 1 s: the delay grows
    assert job.heartbeat_data["retry_in_s"] >= 2 * inproc.retry_backoff
    assert inproc.fake_media.download_requests == []

    inproc.fake_media.mark_probed(item)
    wait_for(lambda: inproc.job(item).status == "done", 60, "the mirror after the probe")
    worker.stop()
    assert worker.join()
    job = inproc.job(item)
    assert job.attempts == 1
    history = inproc.attempt_outcomes(item)
    assert history[-1] == "done" and set(history[:-1]) == {"waiting"}
    assert len(inproc.fake_media.download_requests) == 1


def test_item_unprobed_past_the_timeout_fails_with_that_reason(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    item = inproc.add(sample_h264_aac, "Never Probed", probed=False)
    inproc.unprobed_timeout = 1.0
    inproc.enqueue(item)  # the timeout counts from the job's creation
    worker = inproc.start()

    wait_for(lambda: inproc.job(item).status == "failed", 30, "the job to give up")
    worker.stop()
    assert worker.join()
    job = inproc.job(item)
    assert job.error is not None
    assert "Jellyfin has not probed" in job.error and "within 1s" in job.error
    assert "MIRROR_UNPROBED_TIMEOUT" in job.error
    assert job.attempts == 1
    assert "waiting" in inproc.attempt_outcomes(item)
    assert inproc.fake_media.download_requests == []


def test_item_larger_than_the_whole_disk_fails_for_good(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    inproc.work_dir.mkdir(parents=True, exist_ok=True)
    disk = shutil.disk_usage(inproc.work_dir).total
    item = inproc.add(sample_h264_aac, "Enormous", reported_size=disk * 2)
    inproc.enqueue(item)

    inproc.run_burst()

    job = inproc.job(item)
    assert (job.status, job.attempts) == ("failed", 1)
    assert job.error is not None and "can never fit" in job.error
    assert inproc.fake_media.download_requests == []


def test_a_local_path_strm_listed_as_a_plain_file_fails_at_once_without_a_download(
    inproc: InProcess, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    """Jellyfin 10.11.7+: a .strm naming a local file is Protocol File and not remote;
    its source Path is the target and its Container "strm" (BaseItem.GetVersionInfo)."""
    strm = tmp_path / "Local.strm"
    strm.write_text(f"{sample_h264_aac.path}\n")
    item = inproc.fake_media.add_item(
        strm,
        name="Local Link",
        streams=sample_h264_aac.streams,
        duration_s=4.0,
        strm_target=str(sample_h264_aac.path),
        strm_remote=False,
    )
    inproc.enqueue(item)

    inproc.run_burst()

    job = inproc.job(item)
    assert (job.status, job.attempts) == ("failed", 1)
    assert job.error is not None and "is a .strm link, not a media file" in job.error
    assert inproc.fake_media.download_requests == []


def test_a_known_item_whose_file_is_missing_is_retried_and_its_job_says_why(
    inproc: InProcess, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    path = tmp_path / "Movie.mp4"
    shutil.copyfile(sample_h264_aac.path, path)
    item = inproc.fake_media.add_item(
        path, name="Movie", streams=sample_h264_aac.streams, duration_s=4.0
    )
    path.rename(tmp_path / "away.mp4")  # the share is offline; Jellyfin keeps the item
    inproc.retry_backoff = 0.3
    inproc.enqueue(item)

    inproc.run_burst()

    job = inproc.job(item)
    assert (job.status, job.attempts) == ("new", 1)  # back in the queue, with backoff
    assert job.error is not None
    assert job.error.startswith("source file missing on the server: ")
    assert "check that the share or NAS holding it is mounted and awake" in job.error
    (tmp_path / "away.mp4").rename(path)  # the share is back
    wait_for(lambda: inproc.run_burst() and inproc.job(item).status == "done", 30, "the retry")
