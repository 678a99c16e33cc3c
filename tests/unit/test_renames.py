"""The manifest of a renamed item's copy: keys under the new id, sizes and digests kept."""

from __future__ import annotations

import json
from typing import Any

from mirror.converge.renames import renamed_manifest

OLD, NEW = "a" * 32, "b" * 32


def test_every_key_moves_to_the_new_prefix_and_the_digests_stay() -> None:
    manifest: dict[str, Any] = {
        "manifest_version": 1,
        "item": {"id": OLD, "name": "Old"},
        "source": {"size": 10},
        "outputs": [{"kind": "video", "key": f"m/{OLD}/video.mp4", "sha256": "s", "size": 3}],
        "hls": {"master": f"m/{OLD}/master.m3u8", "playlists": [{"key": f"m/{OLD}/v.m3u8"}]},
        "subtitles": [{"key": f"m/{OLD}/subs/0-en.vtt", "size": 1}],
        "thumbnails": {
            "track": f"m/{OLD}/thumbnails/thumbnails.vtt",
            "objects": [{"key": f"m/{OLD}/thumbnails/0.jpg", "size": 9, "sha256": "t"}],
        },
        "job": {"id": "x", "attempt": 3},
        "note": f"not a key: {OLD}",
    }
    copy = renamed_manifest(
        manifest,
        old_prefix=f"m/{OLD}/",
        new_prefix=f"m/{NEW}/",
        item_id=NEW,
        name="New",
        source={"size": 10, "content_probe": "sha256:p"},
    )
    assert copy["item"] == {"id": NEW, "name": "New"}
    assert copy["outputs"] == [
        {"kind": "video", "key": f"m/{NEW}/video.mp4", "sha256": "s", "size": 3}
    ]
    assert copy["hls"]["master"] == f"m/{NEW}/master.m3u8"
    assert copy["hls"]["playlists"] == [{"key": f"m/{NEW}/v.m3u8"}]
    assert copy["subtitles"] == [{"key": f"m/{NEW}/subs/0-en.vtt", "size": 1}]
    # The thumbnails' track names its sheets relatively: the byte copies stay valid.
    assert copy["thumbnails"] == {
        "track": f"m/{NEW}/thumbnails/thumbnails.vtt",
        "objects": [{"key": f"m/{NEW}/thumbnails/0.jpg", "size": 9, "sha256": "t"}],
    }
    assert copy["source"] == {"size": 10, "content_probe": "sha256:p"}
    assert copy["job"]["attempt"] == 1 and copy["job"]["id"] != "x"
    assert copy["note"] == f"not a key: {OLD}"  # only values that are keys move
    assert f"m/{OLD}/" not in json.dumps(copy) and manifest["item"]["id"] == OLD
