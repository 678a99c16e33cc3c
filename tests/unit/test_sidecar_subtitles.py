"""Sidecar subtitles are fetched from Jellyfin; one it will not serve is skipped, not fatal."""

from __future__ import annotations

from pathlib import Path

from mirror.domain.errors import PermanentError
from mirror.domain.item import MediaItem, MediaStream
from mirror.hls.subtitles import fetch_sidecar_subtitles
from mirror.transcode import TranscodePlan, plan_transcode


def _plan(tmp_path: Path) -> TranscodePlan:
    item = MediaItem(
        id="a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21", name="Movie", type="Movie", container="mkv",
        size=1, duration_s=10.0,
        streams=(
            MediaStream(index=0, type="Subtitle", codec="subrip", language="fre",
                        is_external=True, path="/m/Movie.fr.srt"),
            MediaStream(index=1, type="Subtitle", codec="ass", language="eng",
                        is_external=True, path="/m/Movie.en.ass"),
            MediaStream(index=2, type="Video", codec="h264"),
        ),
    )  # fmt: skip
    return plan_transcode(item, tmp_path, tmp_path / "source.mkv", output_format="hls")


def test_sidecars_are_written_from_what_jellyfin_serves(tmp_path: Path) -> None:
    plan = fetch_sidecar_subtitles(_plan(tmp_path), lambda index: b"WEBVTT\n\n")

    assert [(s.relative_path, s.external) for s in plan.subtitles] == [
        ("subtitles/0-fre.vtt", True),
        ("subtitles/1-eng.vtt", True),
    ]
    assert (tmp_path / "subtitles" / "0-fre.vtt").read_bytes() == b"WEBVTT\n\n"


def test_a_sidecar_jellyfin_will_not_serve_is_skipped_with_the_reason(tmp_path: Path) -> None:
    def fetch(index: int) -> bytes:
        if index == 1:
            raise PermanentError("Jellyfin answered 404")
        return b"WEBVTT\n\n"

    plan = fetch_sidecar_subtitles(_plan(tmp_path), fetch)

    assert [s.stream_index for s in plan.subtitles] == [0]
    assert [(s.index, s.codec, s.reason) for s in plan.skipped] == [
        (1, "ass", "sidecar subtitle not served by Jellyfin: Jellyfin answered 404")
    ]
