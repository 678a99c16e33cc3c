"""A mirror that converges: sync re-mirrors replaced files and prunes removed items,
verify catches missing and corrupted objects, import-manifests rebuilds lost rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from sqlalchemy import text

from mirror.demo.media import SampleMedia
from tests.fixtures.stack import Stack, mirrored_keys


def sync(stack: Stack, *args: str) -> dict[str, Any]:
    result = stack.mirror_here("sync", "--library", "Movies", "--json", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def burst(stack: Stack) -> None:
    """The worker's part, in this process like the commands under test (`mirror_here`)."""
    stack.burst_in_process()


def keys_of(stack: Stack, item_id: str) -> list[str]:
    return [key for key in stack.object_keys() if key.startswith(f"mirror/{item_id}/")]


def add(stack: Stack, sample: SampleMedia, path: Path, name: str) -> str:
    shutil.copyfile(sample.path, path)
    return stack.jellyfin.add_item(
        path, name=name, streams=sample.streams, duration_s=sample.duration_s
    )


def test_sync_remirrors_a_replaced_file_and_deletes_a_removed_item(
    stack: Stack,
    sample_h264_aac: SampleMedia,
    sample_large_h264: SampleMedia,
    tmp_path: Path,
) -> None:
    stack.jellyfin.add_library("Movies")
    replaced = add(stack, sample_h264_aac, tmp_path / "replaced.mkv", "Replaced")
    removed = add(stack, sample_h264_aac, tmp_path / "removed.mkv", "Removed")

    first = sync(stack)
    assert first["counts"]["new"] == 2 and first["queued"] == 2
    burst(stack)
    old = stack.job(replaced)
    assert old.status == "done" and old.source is not None
    assert old.source["size"] == sample_h264_aac.size and old.source["etag"]
    assert sync(stack)["counts"] == {
        "new": 0, "changed": 0, "removed": 0, "restored": 0, "unchanged": 2, "failed": 0,
        "queued": 0, "skipped": 0,
    }  # fmt: skip

    # A better release replaces the file: new size, new ETag.
    shutil.copyfile(sample_large_h264.path, tmp_path / "replaced.mkv")
    print(stack.mirror_here("sync", "--library", "Movies", "--dry-run").stdout)
    dry = sync(stack, "--dry-run")
    assert dry["items"]["changed"] == [replaced] and dry["queued"] == 0
    assert any(change.startswith("size ") for change in dry["changes"][replaced])
    assert stack.job(replaced).id == old.id  # nothing queued by a dry run

    assert sync(stack)["queued"] == 1
    burst(stack)
    new = stack.job(replaced)
    assert new.id != old.id and new.status == "done"
    assert new.source is not None and new.source["size"] == sample_large_h264.size
    assert new.video is not None and old.video is not None
    assert new.video["size"] != old.video["size"]
    head = stack.s3.client.head_object(Bucket=stack.s3.bucket, Key=new.video["key"])
    assert head["ContentLength"] == new.video["size"]

    # The other item leaves Jellyfin: reported, then deleted with --delete.
    stack.jellyfin.remove_item(removed)
    objects = keys_of(stack, removed)
    assert objects == mirrored_keys(stack.job(removed))
    reported = sync(stack)
    assert reported["items"]["removed"] == [removed]
    assert keys_of(stack, removed) == objects and stack.job(removed).status == "done"

    # 1 of 2 mirrored items is over the default limit (10 %): --force; no grace.
    table = stack.mirror_here(
        "sync", "--library", "Movies", "--delete", "--force", MIRROR_DELETE_GRACE="0"
    )
    assert table.returncode == 0, table.stderr
    print(table.stdout)
    deleted = sync(stack, "--delete")
    assert deleted["counts"]["removed"] == 0 and deleted["deleted_objects"] == 0
    assert keys_of(stack, removed) == []
    assert stack.job(removed).status == "removed"
    assert sync(stack, "--delete")["counts"]["removed"] == 0
    assert f"{len(objects)} object(s) deleted" in table.stdout
    assert keys_of(stack, replaced) == mirrored_keys(stack.job(replaced))


def test_verify_catches_missing_and_corrupted_objects_and_requeue_fixes_them(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    stack.jellyfin.add_library("Movies")
    deleted = add(stack, sample_h264_aac, tmp_path / "a.mkv", "Deleted object")
    corrupted = add(stack, sample_h264_aac, tmp_path / "b.mkv", "Corrupted object")
    sync(stack)
    burst(stack)
    assert stack.mirror_here("verify", "--all").returncode == 0

    audio_key = (stack.job(deleted).audio_keys or [])[0]["key"]
    stack.s3.client.delete_object(Bucket=stack.s3.bucket, Key=audio_key)
    video = stack.job(corrupted).video
    assert video is not None
    stack.s3.client.put_object(Bucket=stack.s3.bucket, Key=video["key"], Body=b"\0" * video["size"])

    shallow = stack.mirror_here("verify", "--all", "--json")
    assert shallow.returncode == 1
    report = json.loads(shallow.stdout)
    assert report["problems"] == [
        {"item_id": deleted, "key": audio_key, "problem": "missing", "detail": ""}
    ]

    deep = stack.mirror_here("verify", "--all", "--deep", "--requeue")
    assert deep.returncode == 1
    print(deep.stdout)
    assert "checksum mismatch" in deep.stdout and "missing" in deep.stdout
    assert "queued a re-mirror of 2 item(s)" in deep.stdout
    assert stack.job(deleted).status == stack.job(corrupted).status == "new"

    burst(stack)
    fixed = stack.mirror_here("verify", deleted, corrupted, "--deep")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_import_manifests_restores_the_rows_of_a_dropped_database(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    stack.jellyfin.add_library("Movies")
    items = [add(stack, sample_h264_aac, tmp_path / f"{n}.mkv", f"Movie {n}") for n in range(2)]
    sync(stack)
    burst(stack)
    before = {item: stack.job(item) for item in items}

    with stack.repo.engine.begin() as conn:
        conn.execute(text("DROP SCHEMA media_mirror CASCADE"))
    assert stack.mirror_here("db", "upgrade").returncode == 0
    result = stack.mirror_here("db", "import-manifests")
    assert result.returncode == 0, result.stderr
    assert "2 manifest(s)" in result.stdout and "2 job(s) restored" in result.stdout

    for item, old in before.items():
        job = stack.job(item)
        assert (job.id, job.status, job.attempts) == (old.id, "done", old.attempts)
        assert (job.video, job.audio_keys, job.source) == (old.video, old.audio_keys, old.source)
        assert job.manifest_key == old.manifest_key
    again = stack.mirror_here("db", "import-manifests")
    assert "0 job(s) restored, 2 skipped" in again.stdout
    assert stack.mirror_here("verify", "--all").returncode == 0
    assert sync(stack)["counts"]["unchanged"] == 2
