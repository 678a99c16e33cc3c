"""Items that are not one media file, and items with several versions, through a worker.

Real Jellyfin lists .strm links, disc images, folder rips and missing episodes next to
plain files; none of them may be downloaded, and each fails at once naming what it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mirror.demo.media import SampleMedia
from tests.fixtures.stack import Stack


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
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path, options: dict[str, Any], kind: str
) -> None:
    path = sample_h264_aac.path
    if options.get("protocol") == "Http":
        path = tmp_path / "Remote.strm"
        path.write_text("http://media.example/stream.mkv\n")
    elif options.get("video_type") in ("Dvd", "BluRay"):
        path = tmp_path / "Disc"
        (path / "VIDEO_TS").mkdir(parents=True)
    item = stack.jellyfin.add_item(
        path, name="Odd One", streams=sample_h264_aac.streams, duration_s=4.0, **options
    )
    stack.mirror("enqueue", item)
    stack.jellyfin.clear_request_log()

    result = stack.mirror("worker", "--burst")

    assert result.returncode == 0, result.stderr[-2000:]
    job = stack.job(item)
    assert job.status == "failed"
    assert job.attempts == 1
    assert job.error is not None
    article = "an" if kind == "ISO image" else "a"
    assert f"is {article} {kind}, not a media file" in job.error
    assert "nothing was downloaded" in job.error
    assert stack.jellyfin.download_requests() == []
    assert stack.object_keys() == []


def test_folder_item_fails_naming_it_a_folder(stack: Stack) -> None:
    series = stack.jellyfin.add_folder("Some Show", item_type="Series")
    stack.mirror("enqueue", series)

    stack.mirror("worker", "--burst")

    job = stack.job(series)
    assert job.status == "failed"
    assert job.error is not None and "is a folder (Series)" in job.error
    assert stack.jellyfin.download_requests() == []


def test_multi_version_item_mirrors_its_own_source_and_records_it(
    stack: Stack, sample_h264_aac: SampleMedia, sample_mpeg4_mp3: SampleMedia
) -> None:
    # Jellyfin lists the other versions BEFORE the item's own source.
    item = stack.jellyfin.add_item(
        sample_h264_aac.path,
        name="Two Cuts",
        streams=sample_h264_aac.streams,
        duration_s=4.0,
        other_versions=[sample_mpeg4_mp3.path],
    )
    stack.mirror("enqueue", item)

    result = stack.mirror("worker", "--burst")

    assert result.returncode == 0, result.stderr[-2000:]
    job = stack.job(item)
    assert job.status == "done", job.error
    assert job.attempts == 1
    assert job.source is not None
    assert job.source["media_source_id"] == item
    assert job.source["path"] == str(sample_h264_aac.path)
    assert job.source["size"] == sample_h264_aac.size
    [download] = stack.jellyfin.download_requests()
    assert item in download.path


def test_symlinked_file_on_jellyfin_10_11_3_fails_naming_the_server_bug(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    stack.jellyfin.version = "10.11.3"
    link = tmp_path / "Linked.mkv"
    link.symlink_to(sample_h264_aac.path)
    # Real 10.11.1-4 servers report the target's size and send the link's: a mismatch.
    item = stack.jellyfin.add_item(
        link,
        name="Linked",
        streams=sample_h264_aac.streams,
        duration_s=4.0,
        symlink_bug=True,
        reported_size=sample_h264_aac.size,
    )
    stack.mirror("enqueue", item)

    result = stack.mirror("worker", "--burst")

    assert result.returncode == 0, result.stderr[-2000:]
    job = stack.job(item)
    assert (job.status, job.attempts) == ("failed", 1)
    assert job.error is not None
    assert "#15279" in job.error and "10.11.5" in job.error and "symlink" in job.error
    assert "rescan" not in job.error
    assert len(stack.jellyfin.download_requests()) == 1
    assert stack.object_keys() == []
