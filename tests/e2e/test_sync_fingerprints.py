"""`mirror sync` re-mirrors a file only when its bytes changed (issue 25, points 1, 5, 7):
the fingerprint is the media source's id, size and ETag, never a path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.versions import source_path_resolved
from tests.fixtures.stack import Stack


def sync(stack: Stack, *args: str) -> dict[str, Any]:
    result = stack.mirror_here("sync", "--library", "Movies", "--json", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_sync_twice_on_a_symlinked_library_queues_nothing_the_second_time(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    """Jellyfin 10.11.3+: the media source's Path is the link's target, the item's the link."""
    stack.jellyfin.version = "10.11.3"
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
        resolved_source_path=source_path_resolved(stack.jellyfin.version),
    )

    assert sync(stack)["queued"] == 1
    stack.burst_in_process()
    done = stack.job(item_id)
    assert done.status == "done" and done.source is not None
    assert done.source["path"] == str(target)  # what /Download served: the target

    again = sync(stack)
    assert again["queued"] == 0 and again["items"]["unchanged"] == [item_id], again
    assert stack.job(item_id).id == done.id


def test_a_touched_file_is_probed_and_kept_and_new_content_of_the_same_size_is_changed(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    """A new mtime changes the ETag (MD5 of DateModified); the first and last MiB decide."""
    stack.jellyfin.add_library("Movies")
    touched_path, edited_path = tmp_path / "touched.mkv", tmp_path / "edited.mkv"
    for path in (touched_path, edited_path):
        path.write_bytes(sample_h264_aac.path.read_bytes())
    touched, edited = (
        stack.jellyfin.add_item(
            path, name=path.stem, streams=sample_h264_aac.streams,
            duration_s=sample_h264_aac.duration_s,
        )
        for path in (touched_path, edited_path)
    )  # fmt: skip
    assert sync(stack)["queued"] == 2
    stack.burst_in_process()
    before = {item: stack.job(item) for item in (touched, edited)}
    for job in before.values():
        assert job.status == "done" and job.source is not None
        assert str(job.source["content_probe"]).startswith("sha256:")

    later = touched_path.stat().st_mtime + 3600
    os.utime(touched_path, (later, later))  # `touch`: same bytes
    data = bytearray(edited_path.read_bytes())
    data[-10] ^= 0xFF  # same size, other content at its end
    edited_path.write_bytes(bytes(data))
    os.utime(edited_path, (later, later))

    report = sync(stack)
    assert report["items"]["unchanged"] == [touched] and report["touched"] == [touched]
    assert report["items"]["changed"] == [edited] and report["queued"] == 1
    assert [c.split()[0] for c in report["changes"][edited]] == ["etag"]
    assert stack.job(touched).id == before[touched].id  # no re-mirror
    mirrored, refreshed = before[touched].source, stack.job(touched).source
    assert mirrored is not None and refreshed is not None
    assert refreshed["etag"] != mirrored["etag"]  # the row took the touched file's ETag
    assert refreshed["content_probe"] == mirrored["content_probe"]
    assert stack.job(edited).status == "new"

    again = sync(stack)  # the row holds the new ETag now: nothing left to probe
    assert again["touched"] == [] and touched in again["items"]["unchanged"]


def test_a_renamed_file_gets_a_server_side_copy_of_its_mirror_under_the_new_id(
    stack: Stack, sample_large_h264: SampleMedia, tmp_path: Path
) -> None:
    """Jellyfin: a new path is a new item id; the old item leaves in the same scan."""
    stack.jellyfin.add_library("Movies")
    old_path = tmp_path / "Old Name (2020).mkv"
    old_path.write_bytes(sample_large_h264.path.read_bytes())
    streams, duration = sample_large_h264.streams, sample_large_h264.duration_s
    old_id = stack.jellyfin.add_item(old_path, name="Old", streams=streams, duration_s=duration)
    sync(stack)
    stack.burst_in_process()
    old_job = stack.job(old_id)
    assert old_job.status == "done" and old_job.source is not None
    old_keys = sorted(k for k in stack.object_keys() if k.startswith(f"mirror/{old_id}/"))

    new_path = tmp_path / "New Name (2020).mkv"
    old_path.rename(new_path)
    stack.jellyfin.remove_item(old_id)
    new_id = stack.jellyfin.add_item(new_path, name="New", streams=streams, duration_s=duration)
    served_before = stack.jellyfin.downloads_bytes_served

    report = sync(stack)
    assert report["renamed"] == {new_id: old_id}, report
    assert report["queued"] == 0 and report["items"]["removed"] == [old_id]
    probe_bytes = stack.jellyfin.downloads_bytes_served - served_before
    assert probe_bytes <= 2 * 1024 * 1024 < sample_large_h264.size  # two ranges, no download

    new_job = stack.job(new_id)
    assert new_job.status == "done" and new_job.source is not None
    assert new_job.source["content_probe"] == old_job.source["content_probe"]
    assert new_job.video is not None and new_job.video["key"] == f"mirror/{new_id}/video.mp4"
    assert new_job.manifest_key == f"mirror/{new_id}/manifest.json"
    new_keys = sorted(k for k in stack.object_keys() if k.startswith(f"mirror/{new_id}/"))
    assert new_keys == [k.replace(old_id, new_id) for k in old_keys]
    body = stack.s3.client.get_object(Bucket=stack.s3.bucket, Key=new_job.manifest_key)
    manifest = json.loads(body["Body"].read())
    assert manifest["item"] == {"id": new_id, "name": "New"}
    assert old_id not in json.dumps(manifest)
    verified = stack.mirror_here("verify", new_id, "--deep")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert sync(stack)["items"]["unchanged"] == [new_id]  # and nothing queued
