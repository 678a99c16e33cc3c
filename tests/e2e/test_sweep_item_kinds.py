"""Library sweeps against what real libraries hold: typos, folders, links, discs, gaps."""

from __future__ import annotations

import json
from pathlib import Path

from mirror.demo.media import SampleMedia
from tests.fixtures.stack import Stack


def test_a_type_typo_exits_2_with_a_suggestion_and_asks_jellyfin_nothing(stack: Stack) -> None:
    stack.jellyfin.add_library("Movies")
    result = stack.mirror_here("enqueue", "--library", "Movies", "--type", "Movies,Episode")
    assert result.returncode == 2
    assert "'Movies' is not a Jellyfin item type; did you mean 'Movie'?" in result.stderr
    assert "Traceback" not in result.stderr
    assert stack.jellyfin.requests == []


def test_a_sweep_skips_what_is_not_a_media_file_and_says_why(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    shows = stack.jellyfin.add_library("Shows", "tvshows")

    def add(name: str, path: Path = sample_h264_aac.path, **options: object) -> str:
        return stack.jellyfin.add_item(
            path,
            name=name,
            streams=sample_h264_aac.streams,
            duration_s=4.0,
            library_id=shows,
            **options,
        )

    episode = add("S01E01", item_type="Episode")
    missing = add("S01E02", item_type="Episode", location_type="Virtual")
    strm = tmp_path / "Live.strm"
    strm.write_text("http://media.example/live.m3u8\n")
    linked = add("Live Feed", strm, item_type="Episode", protocol="Http")
    disc = add("Extras Disc", item_type="Episode", video_type="Iso")
    series = stack.jellyfin.add_folder("The Show", item_type="Series", library_id=shows)

    result = stack.mirror_here("enqueue", "--library", "Shows", "--type", "Episode,Series")

    assert result.returncode == 0, result.stderr
    assert (
        "4 item(s): 1 queued, 0 already queued, 0 already mirrored, 3 skipped as not a "
        "media file (1 .strm link, 1 ISO image, 1 folder (Series))"
    ) in result.stdout
    queued = {job.item_id for job in stack.repo.list(limit=100)}
    assert queued == {episode}
    assert not queued & {missing, linked, disc, series}
    listings = [r for r in stack.jellyfin.requests if r.path == "/Items" and "parentId" in r.query]
    assert listings and all("excludeLocationTypes=Virtual" in r.query for r in listings)


def test_sync_checks_types_and_skips_what_is_not_a_media_file_like_the_sweep(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    movies = stack.jellyfin.add_library("Movies")
    typo = stack.mirror_here("sync", "--library", "Movies", "--type", "Movei")
    assert typo.returncode == 2
    assert "'Movei' is not a Jellyfin item type; did you mean 'Movie'?" in typo.stderr
    assert stack.jellyfin.requests == []

    strm = tmp_path / "Live.strm"
    strm.write_text("http://media.example/live.m3u8\n")
    common = {"streams": sample_h264_aac.streams, "duration_s": 4.0, "library_id": movies}
    film = stack.jellyfin.add_item(sample_h264_aac.path, name="Film", **common)
    linked = stack.jellyfin.add_item(strm, name="Live", protocol="Http", **common)
    disc = stack.jellyfin.add_item(sample_h264_aac.path, name="Disc", video_type="Iso", **common)

    result = stack.mirror_here("sync", "--library", "Movies", "--json")

    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["items"]["new"] == [film]
    assert sorted(report["items"]["skipped"]) == sorted([linked, disc])
    assert report["skipped"] == {linked: ".strm link", disc: "ISO image"}
    assert {job.item_id for job in stack.repo.list(limit=100)} == {film}
