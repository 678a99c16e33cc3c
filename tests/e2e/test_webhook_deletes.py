"""The ItemDeleted deliveries Jellyfin and its webhook plugin really send, through `mirror
serve`'s app and server (MIRROR_DELETE_REMOVED=true) and the stand-in's plugin (v18, Jellyfin
10.11.11; see mirror/demo/stand_in/webhook.py for the sources).

- A file replaced in place keeps its id; the plugin's two queues send its ItemDeleted and
  ItemAdded in either order (jellyfin-plugin-webhook #327): the mirror stays.
- Deleting a Series sends one ItemDeleted, for the Series (Jellyfin up to 12.0-rc4): the
  mirrored episodes recorded under it are marked, counted one by one by the delete guard.

Mirrored items are rows restored as `mirror db import-manifests` writes them, so nothing
is transcoded; the stand-in only has to list what Jellyfin still has.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mirror.db.mirrored import MirroredItems
from mirror.db.removals import Removals
from mirror.db.titles import record_titles
from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.webhook import Delivered, WebhookPlugin
from mirror.domain.item import ItemTitle
from mirror.domain.manifest import RestoredJob
from tests.fixtures.stack import Stack, serving_in_process

SECRET = "hook-secret"
JELLYFIN = "10.11.11"  # reports a deleted folder only, not what was under it


def restore_done(stack: Stack, item_id: str, title: ItemTitle | None = None) -> None:
    """A done job row of `item_id`, as importing its manifest makes one."""
    video = f"mirror/{item_id}/video.mp4"
    restored = RestoredJob(
        job_id=uuid.uuid4(),
        item_id=item_id,
        attempts=1,
        video_key=video,
        video={"key": video, "size": 1},
        audio_keys=[],
        source=None,
        manifest_key=f"mirror/{item_id}/manifest.json",
        finished_at=None,
    )
    assert MirroredItems(stack.repo.engine).restore(restored)
    if title is not None:
        with stack.repo.engine.begin() as conn:
            record_titles(conn, {item_id: title})


def others_mirrored(stack: Stack, count: int) -> None:
    """Items mirrored elsewhere in the library, so a few removals stay under the guard."""
    for _ in range(count):
        restore_done(stack, uuid.uuid4().hex)


@pytest.fixture
def serve(stack: Stack) -> Iterator[str]:
    """`mirror serve` acting on ItemDeleted; yields its webhook URL."""
    yield from _serve(stack)


def _serve(stack: Stack, **env: str) -> Iterator[str]:
    """`mirror serve`'s app and server, in this process (the deliveries are the subject)."""
    environment = stack.env(MIRROR_WEBHOOK_SECRET=SECRET, MIRROR_DELETE_REMOVED="true", **env)
    with serving_in_process(environment) as url:
        yield f"{url}/hooks/jellyfin"


def plugin(url: str) -> WebhookPlugin:
    return WebhookPlugin(url, SECRET, version="v18")


def statuses(deliveries: list[Delivered]) -> list[tuple[str, int, object]]:
    return [(d.notification_type, d.status, d.answer.get("status")) for d in deliveries]


@pytest.mark.parametrize("first", ["ItemDeleted", "ItemAdded"])
def test_a_file_replaced_in_place_keeps_its_mirror_in_either_order(
    stack: Stack, sample_h264_aac: SampleMedia, serve: str, tmp_path: Path, first: str
) -> None:
    stack.jellyfin.version = JELLYFIN
    stack.jellyfin.add_library("Movies")
    item_id = stack.add_sample(sample_h264_aac, name="Replaced")
    restore_done(stack, item_id)
    others_mirrored(stack, 20)
    hook = plugin(serve)
    stack.jellyfin.connect_webhook(hook)

    replacement = tmp_path / "replacement.mp4"
    shutil.copyfile(sample_h264_aac.path, replacement)
    stack.jellyfin.replace_file(item_id, replacement)
    if first == "ItemDeleted":
        sent = hook.send_deleted() + hook.send_added()
    else:
        sent = hook.send_added() + hook.send_deleted()

    answers = dict((kind, (code, status)) for kind, code, status in statuses(sent))
    assert answers == {
        "ItemDeleted": (202, "still in Jellyfin"),
        "ItemAdded": (202, "already mirrored"),
    }
    job = stack.job(item_id)
    assert (job.status, job.removed_at) == ("done", None)
    assert Removals(stack.repo.engine).pending() == 0
    metrics = httpx.get(serve.replace("/hooks/jellyfin", "/metrics"), timeout=30).text
    assert 'mirror_webhook_item_deleted_total{action="still in Jellyfin"} 1.0' in metrics


def test_an_item_jellyfin_really_deleted_is_marked(
    stack: Stack, sample_h264_aac: SampleMedia, serve: str
) -> None:
    stack.jellyfin.version = JELLYFIN
    stack.jellyfin.add_library("Movies")
    item_id = stack.add_sample(sample_h264_aac, name="Deleted")
    restore_done(stack, item_id)
    others_mirrored(stack, 20)
    hook = plugin(serve)
    stack.jellyfin.connect_webhook(hook)

    stack.jellyfin.delete_item(item_id)

    assert statuses(hook.send_deleted()) == [("ItemDeleted", 202, "removed")]
    assert stack.job(item_id).status == "removed"


def test_when_jellyfin_cannot_be_asked_nothing_is_marked_and_the_answer_is_503(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    stack.jellyfin.version = JELLYFIN
    stack.jellyfin.add_library("Movies")
    item_id = stack.add_sample(sample_h264_aac, name="Unasked")
    restore_done(stack, item_id)
    others_mirrored(stack, 20)
    served = _serve(stack, MIRROR_JELLYFIN_URL="http://127.0.0.1:9")  # nothing listens
    url = next(served)
    try:
        hook = plugin(url)
        stack.jellyfin.connect_webhook(hook)
        stack.jellyfin.delete_item(item_id)
        (sent,) = hook.send_deleted()
    finally:
        served.close()

    assert (sent.status, sent.answer.get("status")) == (503, "not checked")
    assert "mirror sync --delete" in str(sent.answer.get("reason"))
    assert stack.job(item_id).status == "done"


def _series(stack: Stack, sample: SampleMedia, episodes: int) -> tuple[str, list[str]]:
    """A series of `episodes` mirrored episodes over two seasons; (series id, episodes)."""
    ids = []
    for n in range(episodes):
        season = 1 + n % 2
        episode_id = stack.jellyfin.add_episode(
            sample.path,
            series="Show",
            season=season,
            episode=n + 1,
            name=f"Episode {n + 1}",
            streams=sample.streams,
            duration_s=sample.duration_s,
        )
        facts = stack.jellyfin.catalog.item(episode_id)
        assert facts is not None
        title = ItemTitle(
            item_type="Episode",
            series_id=facts.extra["SeriesId"],
            season_id=facts.extra["SeasonId"],
            parent_id=facts.parent_id,
        )
        restore_done(stack, episode_id, title)
        ids.append(episode_id)
    series = stack.jellyfin.catalog.item(ids[0])
    assert series is not None
    return str(series.extra["SeriesId"]), ids


def test_deleting_a_series_marks_its_mirrored_episodes(
    stack: Stack, sample_h264_aac: SampleMedia, serve: str
) -> None:
    stack.jellyfin.version = JELLYFIN
    stack.jellyfin.add_library("Shows", "tvshows")
    series_id, episodes = _series(stack, sample_h264_aac, 3)
    others_mirrored(stack, 40)  # 3 of 43: under the guard's 10 %
    hook = plugin(serve)
    stack.jellyfin.connect_webhook(hook)

    deleted = stack.jellyfin.delete_item(series_id)
    sent = hook.send_deleted()

    assert len(deleted) == 3 + 2 + 1  # the episodes, both seasons, the series
    assert statuses(sent) == [("ItemDeleted", 202, "removed")]  # the Series alone
    assert sent[0].item_type == "Series" and sent[0].answer.get("items") == 3
    assert [stack.job(e).status for e in episodes] == ["removed"] * 3


def test_the_guard_counts_the_episodes_of_a_deleted_series_not_one(
    stack: Stack, sample_h264_aac: SampleMedia, serve: str
) -> None:
    stack.jellyfin.version = JELLYFIN
    stack.jellyfin.add_library("Shows", "tvshows")
    series_id, episodes = _series(stack, sample_h264_aac, 4)
    others_mirrored(stack, 16)  # 4 of 20 is 20 %; 1 of 20 would pass
    hook = plugin(serve)
    stack.jellyfin.connect_webhook(hook)

    stack.jellyfin.delete_item(series_id)
    (sent,) = hook.send_deleted()

    assert (sent.status, sent.answer.get("status")) == (202, "held back")
    assert str(sent.answer.get("reason")).startswith("4 of 20 mirrored items (20%)")
    assert [stack.job(e).status for e in episodes] == ["done"] * 4


def test_deleting_a_season_marks_only_its_episodes(
    stack: Stack, sample_h264_aac: SampleMedia, serve: str
) -> None:
    stack.jellyfin.version = JELLYFIN
    stack.jellyfin.add_library("Shows", "tvshows")
    _, episodes = _series(stack, sample_h264_aac, 4)  # seasons 1, 2, 1, 2
    others_mirrored(stack, 40)
    hook = plugin(serve)
    stack.jellyfin.connect_webhook(hook)
    first = stack.jellyfin.catalog.item(episodes[0])
    assert first is not None and first.parent_id is not None

    stack.jellyfin.delete_item(first.parent_id)  # Season 1
    sent = hook.send_deleted()

    assert statuses(sent) == [("ItemDeleted", 202, "removed")]
    assert sent[0].item_type == "Season" and sent[0].answer.get("items") == 2
    assert [stack.job(e).status for e in episodes] == ["removed", "done", "removed", "done"]


def test_jellyfin_12_rc5_reports_each_episode_and_then_the_series(
    stack: Stack, sample_h264_aac: SampleMedia, serve: str
) -> None:
    stack.jellyfin.version = "12.0-rc5"
    stack.jellyfin.add_library("Shows", "tvshows")
    series_id, episodes = _series(stack, sample_h264_aac, 2)
    others_mirrored(stack, 40)
    hook = plugin(serve)
    stack.jellyfin.connect_webhook(hook)

    stack.jellyfin.delete_item(series_id)
    sent = hook.send_deleted()

    # Descendants before the folder, in no set order (the plugin's queue is a dictionary):
    # whichever names an episode first marks it, the rest find it already removed.
    assert sorted(d.item_type for d in sent) == ["Episode", "Episode", "Season", "Season", "Series"]
    assert {d.answer.get("status") for d in sent} <= {"removed", "already removed"}
    assert sent[-1].item_type == "Series" and sent[-1].answer.get("status") == "already removed"
    assert [stack.job(e).status for e in episodes] == ["removed"] * 2
