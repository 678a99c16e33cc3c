"""S3 key layout: deterministic keys, so a retried job overwrites instead of forking."""

from __future__ import annotations

import pytest

from mirror.domain.naming import audio_file_name
from mirror.domain.objects import audio_key, video_key

ITEM = "0123456789abcdef0123456789abcdef"


def test_video_key_sits_under_prefix_and_item() -> None:
    assert video_key("mirror", ITEM) == f"mirror/{ITEM}/video.mp4"


def test_audio_key_carries_index_and_language() -> None:
    assert audio_key("mirror", ITEM, 1, "eng") == f"mirror/{ITEM}/audio/1-eng.m4a"


def test_empty_prefix_gives_no_leading_slash() -> None:
    assert video_key("", ITEM) == f"{ITEM}/video.mp4"
    assert audio_key("", ITEM, 2, "fre") == f"{ITEM}/audio/2-fre.m4a"


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("/media/", "media"),
        ("media/", "media"),
        ("//a//b//", "a/b"),
        ("/", ""),
        ("a/b", "a/b"),
    ],
)
def test_stray_slashes_in_prefix_are_dropped(prefix: str, expected: str) -> None:
    head = f"{expected}/" if expected else ""
    assert video_key(prefix, ITEM) == f"{head}{ITEM}/video.mp4"
    assert audio_key(prefix, ITEM, 3, "ger") == f"{head}{ITEM}/audio/3-ger.m4a"


@pytest.mark.parametrize("language", [None, "", "---", "日本語", " "])
def test_missing_or_unusable_language_is_und(language: str | None) -> None:
    assert audio_file_name(4, language) == "4-und.m4a"


@pytest.mark.parametrize(
    ("language", "expected"),
    [("ENG", "eng"), ("en-US", "enus"), ("pt_BR", "ptbr"), ("../etc", "etc"), ("x1 y2", "x1y2")],
)
def test_language_is_sanitized_to_lowercase_alphanumerics(language: str, expected: str) -> None:
    assert audio_file_name(1, language) == f"1-{expected}.m4a"


def test_audio_key_ends_with_audio_file_name() -> None:
    assert audio_key("p", ITEM, 7, "Spa").endswith("/audio/" + audio_file_name(7, "Spa"))
