"""MIRROR_WEBHOOK_ITEM_TYPES: a comma-separated list in the environment, a list in YAML."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mirror.domain.errors import ConfigError
from mirror.settings import load_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MIRROR_"):
            monkeypatch.delenv(name)


def test_default_item_types_are_movies_and_episodes() -> None:
    assert load_settings().webhook_item_types == ("Movie", "Episode")


def test_item_types_from_the_environment_are_comma_separated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MIRROR_WEBHOOK_ITEM_TYPES", " Movie, MusicVideo ,")
    assert load_settings().webhook_item_types == ("Movie", "MusicVideo")


def test_item_types_from_yaml_may_be_a_list(tmp_path: Path) -> None:
    config = tmp_path / "mirror.yaml"
    config.write_text("webhook_item_types: [Episode]\n")
    assert load_settings(config).webhook_item_types == ("Episode",)


def test_no_item_types_stops_start_up_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MIRROR_WEBHOOK_ITEM_TYPES", ",")
    with pytest.raises(ConfigError, match=r"^MIRROR_WEBHOOK_ITEM_TYPES: needs at least one"):
        load_settings()
