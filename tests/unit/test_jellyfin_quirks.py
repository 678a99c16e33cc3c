"""Which Jellyfin releases have the symlink bug, and what its error says."""

from __future__ import annotations

import pytest

from mirror.jellyfin.quirks import has_symlink_bug, parse_version, symlink_bug_error


@pytest.mark.parametrize(
    ("version", "buggy"),
    [
        ("10.11.0", False),
        ("10.11.1", True),
        ("10.11.3", True),
        ("10.11.4.0", True),
        ("10.11.5", False),
        ("10.10.7", False),
        ("10.12.0", False),
        ("11.0.0", False),
        ("", False),
        ("unstable", False),
        (None, False),
    ],
)
def test_only_10_11_1_to_10_11_4_have_the_symlink_bug(version: str | None, buggy: bool) -> None:
    assert has_symlink_bug(version) is buggy


def test_versions_parse_with_a_fourth_part_or_a_suffix() -> None:
    assert parse_version("10.11.3.0") == (10, 11, 3)
    assert parse_version("10.11.3-rc1") == (10, 11, 3)
    assert parse_version("ten") is None


def test_the_error_names_the_bug_and_the_release_that_fixes_it() -> None:
    message = str(symlink_bug_error("ab" * 16, "10.11.3", "500 to a range request"))
    assert "#15279" in message and "10.11.5" in message and "10.11.3" in message
    assert "symlink" in message and "500 to a range request" in message
