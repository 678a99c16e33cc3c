"""JellyfinClient.fetch_range against the stand-in: exactly the bytes asked for (an
MP4's tail, for its moov), or None when the server cannot serve that range."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.jellyfin.client import JellyfinClient


@pytest.fixture
def served(
    jellyfin: JellyfinStandIn, tmp_path: Path
) -> Iterator[tuple[JellyfinClient, str, bytes]]:
    data = os.urandom(300_000)
    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    item_id = jellyfin.add_item(path, name="Clip", streams=[], duration_s=1.0)
    with JellyfinClient(jellyfin.url, jellyfin.api_key) as client:
        yield client, item_id, data


def test_the_tail_of_the_file_comes_back_exactly(
    served: tuple[JellyfinClient, str, bytes], jellyfin: JellyfinStandIn
) -> None:
    client, item_id, data = served

    assert client.fetch_range(item_id, 250_000, 50_000) == data[250_000:]
    assert client.fetch_range(item_id, 10, 5) == data[10:15]
    assert [r.range for r in jellyfin.download_requests()] == ["bytes=250000-299999", "bytes=10-14"]


def test_a_range_past_the_end_is_none_not_an_error(
    served: tuple[JellyfinClient, str, bytes],
) -> None:
    client, item_id, data = served

    assert client.fetch_range(item_id, len(data) + 10, 100) is None  # 416
    assert client.fetch_range(item_id, len(data) - 10, 100) is None  # shorter than asked
