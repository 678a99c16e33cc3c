"""`mirror sync` re-mirrors a file only when its bytes changed (issue 25, points 1, 5, 7):
the fingerprint is the media source's id, size and ETag, never a path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mirror.demo.media import SampleMedia
from tests.fixtures.stack import Stack


def sync(stack: Stack, *args: str) -> dict[str, Any]:
    result = stack.mirror("sync", "--library", "Movies", "--json", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_sync_twice_on_a_symlinked_library_queues_nothing_the_second_time(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    """Jellyfin 10.11.3+: the media source's Path is the link's target, the item's the link."""
    stack.jellyfin.add_library("Movies")
    (tmp_path / "store").mkdir()
    (tmp_path / "links").mkdir()
    target = tmp_path / "store" / "film.mkv"
    target.write_bytes(sample_h264_aac.path.read_bytes())
    link = tmp_path / "links" / "film.mkv"
    os.symlink(target, link)
    item_id = stack.jellyfin.add_item(
        link,
        name="Linked",
        streams=sample_h264_aac.streams,
        duration_s=sample_h264_aac.duration_s,
        resolved_source_path=True,
    )

    assert sync(stack)["queued"] == 1
    stack.burst_in_process()
    done = stack.job(item_id)
    assert done.status == "done" and done.source is not None
    assert done.source["path"] == str(target)  # what /Download served: the target

    again = sync(stack)
    assert again["queued"] == 0 and again["items"]["unchanged"] == [item_id], again
    assert stack.job(item_id).id == done.id
