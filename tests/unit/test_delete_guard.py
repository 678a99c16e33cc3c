"""The delete guard's arithmetic and `--max-delete N|P%`."""

from __future__ import annotations

import pytest

from mirror.converge.delete_guard import (
    DEFAULT_LIMIT,
    EMPTY_LISTING,
    NO_LIMIT,
    DeleteLimit,
    held_back,
    parse_max_delete,
)


@pytest.mark.parametrize(
    ("removing", "mirrored", "held"),
    [(10, 100, False), (11, 100, True), (50, 1000, False), (51, 1000, True), (1, 2, True)],
)
def test_the_default_is_fifty_items_and_ten_percent(
    removing: int, mirrored: int, held: bool
) -> None:
    assert (DEFAULT_LIMIT.problem(removing, mirrored) is not None) is held


def test_max_delete_takes_a_count_or_a_percentage() -> None:
    assert parse_max_delete("20") == DeleteLimit(items=20)
    assert parse_max_delete(" 20% ") == DeleteLimit(percent=20.0)
    assert parse_max_delete("20%").problem(11, 100) is None
    assert parse_max_delete("10").problem(11, 100) is not None
    assert NO_LIMIT.problem(1000, 1000) is None


@pytest.mark.parametrize("text", ["", "x", "-1", "1.5", "120%", "10 items"])
def test_bad_max_delete_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_max_delete(text)


def test_an_empty_listing_is_refused_whatever_the_limit() -> None:
    assert held_back(3, 3, listed=0, limit=NO_LIMIT) == EMPTY_LISTING
    assert held_back(0, 3, listed=0, limit=DEFAULT_LIMIT) is None
    assert held_back(3, 3, listed=1, limit=NO_LIMIT) is None


def test_delete_grace_defaults_to_seven_days_and_takes_zero() -> None:
    from mirror.settings import Settings

    assert Settings().delete_grace == 7 * 86400
    assert Settings(delete_grace="36h").delete_grace == 36 * 3600
    assert Settings(delete_grace="0").delete_grace == 0
    with pytest.raises(ValueError):
        Settings(delete_grace="-1d")


def test_days_print_as_days() -> None:
    from mirror.domain.durations import format_duration

    assert format_duration(7 * 86400) == "7d"
    assert format_duration(36 * 3600) == "1d12h"
