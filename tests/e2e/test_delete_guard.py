"""No mass deletion: `mirror sync --delete` and ItemDeleted against a Jellyfin that
seems to have lost the library (empty listing, another server, a burst of removals).

Mirrored items are rows restored the way `mirror db import-manifests` writes them plus
a few objects each, so a mirror of 100 items costs no transcode; the running-job case
mirrors for real.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text
from werkzeug.test import Client

from mirror.db.mirrored import MirroredItems
from mirror.db.removals import Removals
from mirror.db.stats import QueueStats
from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.manifest import RestoredJob
from mirror.jellyfin.client import JellyfinClient
from mirror.web.removed_items import item_remover
from mirror.web.serve import SECRET_HEADER, MirrorWeb, WebhookPolicy
from tests.fixtures.stack import Stack

OBJECTS = ("manifest.json",)  # per mirrored item (the row names a video.mp4 too)


def stand_in_presence(jellyfin: JellyfinStandIn) -> Callable[[str], bool]:
    """What `mirror serve` asks before acting on ItemDeleted: is the item still listed?"""

    def present(item_id: str) -> bool:
        with JellyfinClient(jellyfin.url, jellyfin.api_key) as client:
            return item_id in client.existing_item_ids([item_id])

    return present


def mirror_items(stack: Stack, sample: SampleMedia, count: int) -> list[str]:
    """`count` items in the library "Movies", each with a done row and its objects."""
    stack.jellyfin.add_library("Movies")
    mirrored = MirroredItems(stack.repo.engine)
    items = []
    for n in range(count):
        item_id = stack.add_sample(sample, name=f"Movie {n:03}")
        keys = [f"mirror/{item_id}/{name}" for name in OBJECTS]
        for key in keys:
            stack.s3.client.put_object(Bucket=stack.s3.bucket, Key=key, Body=b"x")
        video = f"mirror/{item_id}/video.mp4"
        restored = RestoredJob(
            job_id=uuid.uuid4(),
            item_id=item_id,
            attempts=1,
            video_key=video,
            video={"key": video, "size": 1},
            audio_keys=[],
            source=None,
            manifest_key=keys[0],
            finished_at=None,
        )
        assert mirrored.restore(restored)
        items.append(item_id)
    return items


def sync_delete(stack: Stack, *args: str, **env: str) -> tuple[int, dict[str, Any], str]:
    result = stack.mirror_here("sync", "--library", "Movies", "--delete", "--json", *args, **env)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout), result.stderr


def keys_of(stack: Stack, item_id: str) -> list[str]:
    return [key for key in stack.object_keys() if key.startswith(f"mirror/{item_id}/")]


def statuses(stack: Stack, items: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item_id in items:
        status = stack.job(item_id).status
        counts[status] = counts.get(status, 0) + 1
    return counts


def test_an_empty_listing_or_another_server_deletes_nothing(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    items = mirror_items(stack, sample_h264_aac, 3)
    before = stack.object_keys()
    assert len(before) == 3 * len(OBJECTS)

    # A wrong MIRROR_JELLYFIN_URL: another server with a library of the same name.
    with JellyfinStandIn() as other:
        other.add_library("Movies")
        other.add_item(
            sample_h264_aac.path,
            name="Someone else's",
            streams=sample_h264_aac.streams,
            duration_s=sample_h264_aac.duration_s,
        )
        code, report, stderr = sync_delete(
            stack, MIRROR_JELLYFIN_URL=other.url, MIRROR_JELLYFIN_API_KEY=other.api_key
        )
    assert code == 1
    assert sorted(report["items"]["removed"]) == sorted(items)
    assert report["held_back"].startswith("3 of 3 mirrored items (100%) is over the limit")
    assert "nothing removed" in stderr and "--max-delete" in stderr

    # The library's mount went offline during a scan: Jellyfin lists nothing.
    for item_id in items:
        stack.jellyfin.remove_item(item_id)
    for flags in ((), ("--force",), ("--max-delete", "100%")):
        code, report, stderr = sync_delete(stack, *flags, MIRROR_DELETE_GRACE="0")
        assert code == 1, flags
        assert "the library listing is empty" in report["held_back"]
        assert "nothing removed: the library listing is empty" in stderr
    # A library Jellyfin no longer knows ends the run before anything is compared.
    missing = stack.mirror_here("sync", "--library", "Movies (old)", "--delete", "--force")
    assert missing.returncode == 1 and "no Jellyfin library named" in missing.stderr
    assert stack.object_keys() == before
    assert statuses(stack, items) == {"done": 3}


def test_eleven_of_a_hundred_gone_are_held_back_then_marked_then_purged_after_the_grace(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    items = mirror_items(stack, sample_h264_aac, 100)
    gone, comes_back = items[:11], items[0]
    for item_id in gone:
        stack.jellyfin.remove_item(item_id)
    everything = stack.object_keys()

    code, report, _ = sync_delete(stack)  # 11 % is over the default 10 %
    assert code == 1
    assert report["held_back"] == (
        "11 of 100 mirrored items (11%) is over the limit of 50 items or 10% of the mirrored items"
    )
    table = stack.mirror_here("sync", "--library", "Movies", "--delete", "--dry-run")
    assert table.returncode == 1
    assert "held back, nothing removed: 11 of 100" in table.stdout
    assert stack.object_keys() == everything and statuses(stack, items) == {"done": 100}

    dry = stack.mirror_here(
        "sync", "--library", "Movies", "--delete", "--max-delete", "20%", "--dry-run"
    )
    assert dry.returncode == 0, dry.stderr
    assert "would be marked removed" in dry.stdout
    assert statuses(stack, items) == {"done": 100}

    # Within --max-delete 20 %: marked, objects kept.
    code, report, _ = sync_delete(stack, "--max-delete", "20%")
    assert code == 0 and report["held_back"] is None
    assert sorted(report["items"]["removed"]) == sorted(gone)
    assert report["purged"] == [] and report["deleted_objects"] == 0
    assert statuses(stack, gone) == {"removed": 11}
    assert stack.object_keys() == everything  # within the grace: every object still there
    shown = stack.mirror_here("show", gone[1]).stdout
    assert "gone from Jellyfin" in shown and "not yet: after MIRROR_DELETE_GRACE" in shown

    # One comes back (the mount is back for it) before the grace ends: it keeps its mirror.
    stack.jellyfin.add_item(
        sample_h264_aac.path,
        name="Back",
        streams=sample_h264_aac.streams,
        duration_s=sample_h264_aac.duration_s,
        item_id=comes_back,
    )
    code, report, _ = sync_delete(stack)
    assert code == 0 and report["items"]["restored"] == [comes_back]
    assert stack.job(comes_back).status == "done"

    # The grace (7 days by default) runs out: the clock moves on by 8 days.
    with stack.repo.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE media_mirror.jobs SET removed_at = removed_at - interval '8 days' "
                "WHERE removed_at IS NOT NULL"
            )
        )
    code, report, _ = sync_delete(stack)
    assert code == 0
    assert sorted(report["purged"]) == sorted(gone[1:])
    assert report["deleted_objects"] == 10 * len(OBJECTS)
    for item_id in gone[1:]:
        assert keys_of(stack, item_id) == []
        assert stack.job(item_id).status == "removed"
    assert len(keys_of(stack, comes_back)) == len(OBJECTS)
    assert len(stack.object_keys()) == 90 * len(OBJECTS)
    with stack.repo.engine.connect() as conn:
        purged = conn.execute(
            text(
                "SELECT count(*) FROM media_mirror.job_status "
                "WHERE objects_deleted_at IS NOT NULL AND removed_at IS NOT NULL"
            )
        ).scalar_one()
    assert purged == 10
    assert "not yet" not in stack.mirror_here("show", gone[1]).stdout


def test_item_deleted_while_the_first_job_runs_cancels_it_and_leaves_no_objects(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    stack.jellyfin.add_library("Movies")
    keeper = stack.add_sample(sample_h264_aac, name="Keeper")  # the library stays listed
    item_id = stack.add_sample(sample_h264_aac, name="Deleted while mirroring")
    stack.enqueue(item_id)
    stack.jellyfin.throttle(20_000)  # about 9 s of download
    worker = stack.start_worker("--burst")
    # Its download under way: a delete before the worker's first request to Jellyfin
    # would fail the job at once (the item is gone), with nothing to cancel.
    stack.wait_for(
        lambda: (
            stack.job(item_id).status == "processing" and stack.jellyfin.downloads_bytes_served > 0
        ),
        timeout=60,
        what="the job's download to start",
    )

    engine = stack.repo.engine
    policy = WebhookPolicy(secret="s", item_types=("Movie",), delete_removed=True)
    remover = item_remover(Removals(engine), stand_in_presence(stack.jellyfin))
    web = MirrorWeb(stack.repo, QueueStats(engine), policy, remover)
    stack.jellyfin.remove_item(item_id)
    body = {"NotificationType": "ItemDeleted", "ItemId": item_id, "ItemType": "Movie"}
    answer = Client(web).post("/hooks/jellyfin", json=body, headers={SECRET_HEADER: "s"})
    assert answer.status_code == 202
    assert answer.json is not None and answer.json["status"] == "cancelled"
    stack.jellyfin.throttle(None)

    stack.wait_for(lambda: worker.poll() is not None, timeout=60, what="the worker to stop")
    job = stack.job(item_id)
    assert job.status == "cancelled", stack.log_of()
    assert job.error is not None and "deleted in Jellyfin" in job.error

    # The next sync --delete past the grace deletes whatever the attempt had uploaded.
    code, report, stderr = sync_delete(stack, MIRROR_DELETE_GRACE="0")
    assert code == 0, stderr
    assert report["purged"] == [item_id]
    assert keys_of(stack, item_id) == []
    assert stack.job(item_id).status == "cancelled"
    assert stack.job(keeper).status == "new"  # listed, never mirrored: queued
