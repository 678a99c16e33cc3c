"""ItemDeleted with MIRROR_DELETE_REMOVED: marks under the delete guard, never deletes.

A burst of deliveries is what an offline library mount looks like from the webhook: past
10 % of the mirror (the default limit) they are held back, and nothing is marked.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Engine
from werkzeug.test import Client

from mirror.db.mirrored import MirroredItems
from mirror.db.removals import Removals
from mirror.db.repository import JobRepository
from mirror.db.stats import QueueStats
from mirror.domain.manifest import RestoredJob
from mirror.web.removed_items import item_remover
from mirror.web.serve import SECRET_HEADER, MirrorWeb, WebhookPolicy

SECRET = "s3cret"


def _mirror(engine: Engine, count: int) -> list[str]:
    items = [uuid.uuid4().hex for _ in range(count)]
    for item_id in items:
        key = f"mirror/{item_id}/video.mp4"
        job = RestoredJob(
            job_id=uuid.uuid4(),
            item_id=item_id,
            attempts=1,
            video_key=key,
            video={"key": key},
            audio_keys=[],
            source=None,
            manifest_key=f"mirror/{item_id}/manifest.json",
            finished_at=None,
        )
        assert MirroredItems(engine).restore(job)
    return items


def _deliver(client: Client, item_id: str) -> dict[str, Any]:
    body = {"NotificationType": "ItemDeleted", "ItemId": item_id, "ItemType": "Movie"}
    response = client.post("/hooks/jellyfin", json=body, headers={SECRET_HEADER: SECRET})
    assert response.status_code == 202
    answer: dict[str, Any] = response.json or {}
    return answer


def _web(engine: Engine) -> Client:
    policy = WebhookPolicy(secret=SECRET, item_types=("Movie",), delete_removed=True)
    remover = item_remover(Removals(engine), lambda _item_id: False)  # gone from Jellyfin
    return Client(MirrorWeb(JobRepository(engine), QueueStats(engine), policy, remover))


def test_a_burst_of_item_deleted_past_ten_percent_is_held_back(engine: Engine) -> None:
    items = _mirror(engine, 20)
    client = _web(engine)
    repo = JobRepository(engine)

    answers = [_deliver(client, item_id) for item_id in items[:4]]

    assert [answer["status"] for answer in answers] == [
        "removed", "removed", "held back", "held back"
    ]  # fmt: skip
    assert answers[2]["reason"].startswith("3 of 20 mirrored items (15%) is over the limit")
    assert [repo.latest_for_item(i).status for i in items[:4]] == [
        "removed", "removed", "done", "done"
    ]  # fmt: skip
    assert Removals(engine).pending() == 2
    metrics = client.get("/metrics").text
    assert 'mirror_webhook_item_deleted_total{action="held back"} 2.0' in metrics


def test_item_deleted_cancels_a_queued_first_job_whatever_the_limit(engine: Engine) -> None:
    repo = JobRepository(engine)
    item_id = uuid.uuid4().hex
    repo.enqueue([item_id])
    lease = repo.claim_next("host:1:0")
    assert lease is not None

    answer = _deliver(_web(engine), item_id)

    assert answer["status"] == "cancelled"
    job = repo.latest_for_item(item_id)
    assert job.status == "cancelled" and job.error is not None
    assert "deleted in Jellyfin" in job.error
    assert Removals(engine).due(0) == [item_id]  # its uploads go with the next purge


def test_item_added_before_the_grace_ends_gives_the_mirror_back(engine: Engine) -> None:
    (item_id,) = _mirror(engine, 1)
    Removals(engine).mark_gone([item_id])  # as sync --delete or ItemDeleted does
    repo = JobRepository(engine)
    assert repo.latest_for_item(item_id).status == "removed"

    body = {"NotificationType": "ItemAdded", "ItemId": item_id, "ItemType": "Movie"}
    response = _web(engine).post("/hooks/jellyfin", json=body, headers={SECRET_HEADER: SECRET})

    assert response.json == {"status": "already mirrored", "item_id": item_id}
    job = repo.latest_for_item(item_id)
    assert (job.status, job.removed_at, job.objects_deleted_at) == ("done", None, None)
    assert Removals(engine).due(0) == [] and len(repo.list()) == 1
