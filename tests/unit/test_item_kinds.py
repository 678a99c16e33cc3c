"""`--type` values against Jellyfin's item kinds (BaseItemKind)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirror.jellyfin.kinds import ITEM_KINDS, check_item_kinds

OPENAPI = Path("/work/shared/jellyfin/jellyfin-openapi-subset.json")


def test_known_kinds_come_back_in_jellyfins_spelling_once_each() -> None:
    assert check_item_kinds(["movie", " Episode", "MOVIE", "musicvideo"]) == (
        "Movie",
        "Episode",
        "MusicVideo",
    )


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [("Movies", "Movie"), ("Episodes", "Episode"), ("epsiode", "Episode"), ("Serie", "Series")],
)
def test_a_typo_is_rejected_with_the_closest_kind(typo: str, suggestion: str) -> None:
    with pytest.raises(ValueError, match=f"did you mean '{suggestion}'"):
        check_item_kinds(["Movie", typo])


def test_something_far_from_any_kind_is_rejected_without_a_guess() -> None:
    with pytest.raises(ValueError) as raised:
        check_item_kinds(["zzzzzz"])
    assert "not a Jellyfin item type" in str(raised.value)
    assert "did you mean" not in str(raised.value)


@pytest.mark.skipif(not OPENAPI.exists(), reason="the shared OpenAPI extract is not here")
def test_the_kinds_are_jellyfins_base_item_kind_enum() -> None:
    spec = json.loads(OPENAPI.read_text())
    assert set(ITEM_KINDS) == set(spec["components"]["schemas"]["BaseItemKind"]["enum"])
