"""Turning Jellyfin's JSON into MediaItem: pure functions, no server."""

from __future__ import annotations

import pytest

from mirror.domain.errors import PermanentError
from mirror.domain.item import MediaStream
from mirror.jellyfin.failures import RetryableError, RetryPolicy, parse_retry_after
from mirror.jellyfin.models import (
    parse_item_summary,
    parse_library,
    parse_media_item,
    parse_trickplay,
    require_item_id,
)

ITEM_ID = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"


def test_item_ids_in_any_guid_spelling_become_32_lowercase_hex() -> None:
    for spelling in (
        ITEM_ID,
        ITEM_ID.upper(),
        "A3F4C2E1-B5D6-4E0F-9C8B-7A6D5E4F3A21",
        "{a3f4c2e1-b5d6-4e0f-9c8b-7a6d5e4f3a21}",
        " a3f4c2e1-b5d6-4e0f-9c8b-7a6d5e4f3a21\n",
    ):
        assert require_item_id(spelling) == ITEM_ID


@pytest.mark.parametrize("bad", ["", "123", "../../System/Info", ITEM_ID + "0", "g" * 32])
def test_text_that_is_no_guid_is_a_permanent_error(bad: str) -> None:
    with pytest.raises(PermanentError, match="not a Jellyfin id"):
        require_item_id(bad)


def test_the_source_whose_id_is_the_item_id_is_mirrored_among_several_versions() -> None:
    other_version = {
        "Id": "0" * 32,
        "Container": "mp4",
        "Size": 1,
        "MediaStreams": [{"Index": 0, "Type": "Video", "Codec": "hevc"}],
    }
    own_version = {
        "Id": ITEM_ID.upper(),
        "Container": "mkv",
        "Size": 42,
        "MediaStreams": [
            {"Index": 1, "Type": "Audio", "Codec": "aac", "Channels": 2, "IsDefault": True},
            {"Index": 0, "Type": "Video", "Codec": "h264", "AverageFrameRate": 25},
        ],
    }
    item = parse_media_item(
        {
            "Id": ITEM_ID.upper(),
            "Name": "Two Versions",
            "Type": "Movie",
            "RunTimeTicks": 12_345_000_000,
            "MediaSources": [other_version, own_version],
        }
    )
    assert item.id == ITEM_ID
    assert (item.container, item.size, item.duration_s) == ("mkv", 42, 1234.5)
    assert item.streams == (
        MediaStream(index=0, type="Video", codec="h264", frame_rate=25.0),
        MediaStream(index=1, type="Audio", codec="aac", channels=2, is_default=True),
    )


def test_without_a_matching_source_the_first_one_is_used_and_missing_fields_are_none() -> None:
    item = parse_media_item(
        {
            "Id": ITEM_ID,
            "Type": "Episode",
            "MediaSources": [{"Id": "1" * 32, "MediaStreams": [{"Index": 0, "Type": "Audio"}]}],
        }
    )
    assert item.name == ITEM_ID  # no Name: the id is still something to show
    assert (item.size, item.duration_s, item.container) == (None, None, None)
    assert item.streams == (MediaStream(index=0, type="Audio"),)


def test_library_without_item_id_is_skipped() -> None:
    assert parse_library({"Name": "Broken"}) is None
    library = parse_library({"Name": "Films", "ItemId": ITEM_ID, "CollectionType": "movies"})
    assert library is not None and library.item_id == ITEM_ID


def test_retry_after_wins_over_backoff_but_is_capped() -> None:
    policy = RetryPolicy(attempts=5, initial_wait=0.5, max_wait=10)
    assert policy.wait_seconds(RetryableError("x", retry_after=3), 1) == 3
    assert policy.wait_seconds(RetryableError("x", retry_after=120), 1) == 10
    assert [policy.wait_seconds(RetryableError("x"), n) for n in (1, 2, 3, 9)] == [0.5, 1, 2, 10]


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert parse_retry_after("7") == 7
    assert parse_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", now=90) == 10
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_the_item_level_etag_is_never_part_of_a_fingerprint() -> None:
    """BaseItemDto.Etag hashes the item's metadata: every metadata save changes it."""
    data = {
        "Id": "a" * 32,
        "Name": "Film",
        "Type": "Movie",
        "Path": "/links/film.mkv",
        "Etag": "metadata-hash",
        "MediaSources": [{"Id": "a" * 32, "Path": "/store/film.mkv", "Size": 100}],
    }
    assert parse_media_item(data).etag is None
    summary = parse_item_summary(data)
    assert summary is not None
    assert summary.fingerprint() == {"media_source_id": "a" * 32, "size": 100}


def test_trickplay_of_the_mirrored_source_nearest_320_wide_is_read() -> None:
    source = "c" * 32

    def info(width: int, **changes: object) -> dict[str, object]:
        facts: dict[str, object] = {
            "Width": width, "Height": width * 9 // 16, "TileWidth": 10, "TileHeight": 10,
            "ThumbnailCount": 250, "Interval": 10000, "Bandwidth": 0,
        }  # fmt: skip
        return {**facts, **changes}

    item = {
        "Id": source,
        "MediaSources": [{"Id": source, "Size": 1}],
        # Jellyfin's keys: the media source id ("N" spelling), then the width as text.
        "Trickplay": {
            "dddddddd-dddd-dddd-dddd-dddddddddddd": {"320": info(320)},
            source: {"640": info(640), "480": info(480, Interval=5000)},
        },
    }
    tiles = parse_media_item(item).trickplay
    assert tiles is not None
    assert (tiles.media_source_id, tiles.width, tiles.height, tiles.count) == (
        source,
        480,
        270,
        250,
    )
    assert (tiles.columns, tiles.rows, tiles.interval_s) == (10, 10, 5.0)
    assert tiles.grid.sheets == 3
    # none for this source, an empty map (Jellyfin made none), or facts missing
    assert parse_media_item({**item, "Trickplay": {}}).trickplay is None
    other = {**item, "Trickplay": {"d" * 32: {"320": info(320)}}}
    assert parse_media_item(other).trickplay is None
    broken = {**item, "Trickplay": {source: {"320": info(320, Interval=None)}}}
    assert parse_media_item(broken).trickplay is None
    assert parse_trickplay(["not", "a", "map"], source) is None
