"""Which items are one media file: the classifier behind the pipeline and the sweep."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from mirror.domain.errors import PermanentError
from mirror.domain.sources import non_file_kind, require_media_file


@dataclass(frozen=True)
class Facts:
    type: str = "Movie"
    is_folder: bool = False
    location_type: str | None = "FileSystem"
    protocol: str | None = "File"
    is_remote: bool = False
    video_type: str | None = "VideoFile"
    path: str | None = "/media/Movie.mkv"
    container: str | None = "mkv"


@pytest.mark.parametrize(
    ("facts", "kind"),
    [
        (Facts(), None),
        (Facts(protocol=None, video_type=None, location_type=None), None),
        (Facts(protocol="Http", is_remote=True), ".strm link"),
        (Facts(is_remote=True), ".strm link"),
        # 10.11.7+: a .strm naming a local file is Protocol File and not remote; its
        # source Path is the target, its Container the .strm's extension.
        (Facts(path="/media/real.mkv", container="strm"), ".strm link"),
        (Facts(path="/media/Movie.STRM", container=None), ".strm link"),
        (Facts(path="/media/strm.mkv", container="mkv"), None),
        (Facts(video_type="Iso"), "ISO image"),
        (Facts(video_type="Dvd"), "DVD folder"),
        (Facts(video_type="BluRay"), "Blu-ray folder"),
        (Facts(type="Episode", location_type="Virtual"), "virtual item (missing episode)"),
        (Facts(location_type="Virtual"), "virtual item"),
        (Facts(type="Series", is_folder=True), "folder (Series)"),
        # A folder or a missing item has no file, whatever its other fields say.
        (Facts(type="BoxSet", is_folder=True, video_type="Iso"), "folder (BoxSet)"),
        (
            Facts(type="Episode", location_type="Virtual", is_remote=True),
            "virtual item (missing episode)",
        ),
    ],
)
def test_each_kind_of_item_is_named(facts: Facts, kind: str | None) -> None:
    assert non_file_kind(facts) == kind


def test_a_non_file_item_fails_with_its_kind_and_says_nothing_was_downloaded() -> None:
    with pytest.raises(PermanentError) as raised:
        require_media_file("ab" * 16, 'Disc "One"', Facts(video_type="Dvd"))
    message = str(raised.value)
    assert "is a DVD folder" in message and "nothing was downloaded" in message
    assert "'Disc \"One\"'" in message


def test_a_media_file_passes() -> None:
    assert non_file_kind(Facts()) is None
    require_media_file("ab" * 16, "Film", Facts())  # raises for anything but a media file
