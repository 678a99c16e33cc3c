"""MIRROR_ACTIVE_HOURS: parsing, windows over midnight, and the one line a bad value gets."""

from __future__ import annotations

from datetime import time

import pytest

from mirror.domain.active_hours import parse_active_hours
from mirror.domain.errors import ConfigError
from mirror.settings import load_settings


def test_unset_or_empty_is_always_open() -> None:
    for text in (None, "", "  "):
        hours = parse_active_hours(text)
        assert hours.always and hours.is_open(time(3, 0)) and hours.next_opening(time(3)) is None


def test_a_window_is_start_inclusive_end_exclusive() -> None:
    hours = parse_active_hours("01:00-07:00")
    assert not hours.is_open(time(0, 59, 59))
    assert hours.is_open(time(1, 0)) and hours.is_open(time(6, 59, 59))
    assert not hours.is_open(time(7, 0))
    assert hours.next_opening(time(12, 0)) == "01:00"


def test_a_window_over_midnight_holds_both_sides_of_it() -> None:
    hours = parse_active_hours("22:00-06:00")
    opened = [h for h in range(24) if hours.is_open(time(h, 0))]
    assert opened == [0, 1, 2, 3, 4, 5, 22, 23]
    assert hours.next_opening(time(6, 0)) == "22:00"


def test_a_comma_list_joins_windows_and_the_next_opening_is_the_nearest() -> None:
    hours = parse_active_hours(" 01:00-07:00 , 13:00-14:30,23:00-24:00")
    assert str(hours) == "01:00-07:00,13:00-14:30,23:00-24:00"
    assert hours.is_open(time(14, 29)) and not hours.is_open(time(14, 30))
    assert hours.is_open(time(23, 59, 59)) and not hours.is_open(time(0, 30))
    assert hours.next_opening(time(8, 0)) == "13:00"
    assert hours.next_opening(time(15, 0)) == "23:00"
    assert hours.next_opening(time(0, 0)) == "01:00"
    assert parse_active_hours("00:00-24:00").is_open(time(23, 59, 59))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("1-7", "is not a window like 01:00-07:00"),
        ("01:00", "is not a window like 01:00-07:00"),
        ("25:00-07:00", "25:00 is not a time of day"),
        ("01:00-07:60", "07:60 is not a time of day"),
        ("24:00-07:00", "24:00 is not a time of day"),
        ("07:00-07:00", "starts where it ends"),
        ("01:00-07:00,", "is not a window"),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable(
    value: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIRROR_ACTIVE_HOURS", value)
    with pytest.raises(ConfigError) as error:
        load_settings()
    message = str(error.value)
    assert message.startswith("MIRROR_ACTIVE_HOURS: ") and says in message
    assert "\n" not in message


def test_the_setting_is_kept_normalized(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRROR_ACTIVE_HOURS", "22:00 - 6:00")
    settings = load_settings()
    assert settings.active_hours == "22:00-06:00"
    assert settings.active_windows.is_open(time(5, 0))
