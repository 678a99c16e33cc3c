"""Secrets are checked when settings load: stripped, refused with one line, never echoed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirror.domain.errors import ConfigError
from mirror.domain.redact import forget_secrets, redact
from mirror.settings import load_settings

SECRET_VARIABLES = (
    "MIRROR_JELLYFIN_API_KEY",
    "MIRROR_S3_ACCESS_KEY_ID",
    "MIRROR_S3_SECRET_ACCESS_KEY",
    "MIRROR_WEBHOOK_SECRET",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("MIRROR_"):
            monkeypatch.delenv(name)
    forget_secrets()
    yield
    forget_secrets()


@pytest.mark.parametrize("variable", SECRET_VARIABLES)
@pytest.mark.parametrize("raw", ["CANARY-7f3a\n", "CANARY-7f3a\r\n", "  CANARY-7f3a\t"])
def test_surrounding_whitespace_of_a_secret_is_stripped(
    monkeypatch: pytest.MonkeyPatch, variable: str, raw: str
) -> None:
    monkeypatch.setenv(variable, raw)
    value = getattr(load_settings(), variable.removeprefix("MIRROR_").lower())
    assert value.get_secret_value() == "CANARY-7f3a"


def test_a_yaml_block_scalar_secret_loses_its_newline(tmp_path: Path) -> None:
    config = tmp_path / "mirror.yaml"
    config.write_text("jellyfin_api_key: |\n  CANARY-7f3a\n", encoding="utf-8")
    settings = load_settings(config)
    assert settings.jellyfin_api_key is not None
    assert settings.jellyfin_api_key.get_secret_value() == "CANARY-7f3a"


@pytest.mark.parametrize("variable", SECRET_VARIABLES)
@pytest.mark.parametrize(
    ("raw", "kind"),
    [("CANARY\n7f3a", "control"), ("CANARY\x1b7f3a", "control"), ("CANARYé7f3a", "non-ASCII")],
)
def test_a_secret_with_a_control_or_non_ascii_character_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, raw: str, kind: str
) -> None:
    monkeypatch.setenv(variable, raw)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith(f"{variable}: contains a {kind} character")
    assert "CANARY" not in message and "7f3a" not in message
    assert "\n" not in message


def test_a_database_url_with_another_driver_is_refused_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MIRROR_DATABASE_URL", "postgresql+psycopg2://mirror:CANARYPW@db/mirror")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        "MIRROR_DATABASE_URL: must be a postgresql:// or postgresql+psycopg:// URL "
        "(got 'postgresql+psycopg2://mirror:***@db/mirror')"
    )


def test_a_database_url_with_a_non_numeric_port_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MIRROR_DATABASE_URL", "postgresql://mirror:CANARYPW@db:5432x/mirror")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        "MIRROR_DATABASE_URL: the port must be a number, e.g. host:5432 "
        "(got 'postgresql://mirror:***@db:5432x/mirror')"
    )


def test_loading_settings_registers_every_secret_for_redaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = {name: f"CANARY-{n}-{name[-6:]}" for n, name in enumerate(SECRET_VARIABLES)}
    for variable, value in values.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv("MIRROR_DATABASE_URL", "postgresql://mirror:CANARY%2Fdb@db/mirror")
    load_settings()
    key_id = values.pop("MIRROR_S3_ACCESS_KEY_ID")
    text = " ".join(values.values()) + " password CANARY/db, in a URL CANARY%2Fdb"
    assert "CANARY" not in redact(text)
    assert redact(key_id) == key_id  # an identifier S3 itself names, not a secret
