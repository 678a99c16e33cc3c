"""Title search and a series' listing: JellyfinClient against the stand-in, which answers
`/Items?searchTerm=` as Jellyfin does (name contains the term, ignoring case, accents and
punctuation; best match first; paged with startIndex/limit and the whole TotalRecordCount)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.errors import PermanentError
from mirror.jellyfin.client import JellyfinClient
from mirror.jellyfin.client import authorization_header as auth


@pytest.fixture
def show(jellyfin: JellyfinStandIn, tmp_path: Path) -> dict[str, str]:
    """A movie library and a shows library with one series of two seasons."""
    movies = jellyfin.add_library("Movies")
    shows = jellyfin.add_library("Shows", "tvshows")
    ids: dict[str, str] = {"movies": movies, "shows": shows}

    def file(name: str) -> Path:
        path = tmp_path / name
        path.write_bytes(b"x" * 1000)
        return path

    for name, year in (("Amélie", 2001), ("The Bridge", 1959), ("Bridge of Spies", 2015)):
        ids[name] = jellyfin.add_item(
            file(f"{name}.mkv"), name=name, streams=[], duration_s=60, library_id=movies,
            extra={"ProductionYear": year},
        )  # fmt: skip
    series = jellyfin.add_folder("The Bridge (TV)", item_type="Series", library_id=shows)
    ids["series"] = series
    for number in (1, 2):
        season = jellyfin.add_folder(
            f"Season {number}", item_type="Season", library_id=shows,
            extra={"SeriesId": series, "SeriesName": "The Bridge (TV)", "IndexNumber": number},
        )  # fmt: skip
        ids[f"season{number}"] = season
        for episode in (1, 2):
            ids[f"s{number}e{episode}"] = jellyfin.add_item(
                file(f"bridge-s{number}e{episode}.mkv"), name=f"Episode {episode}",
                streams=[], duration_s=60, item_type="Episode", library_id=shows,
                extra={"SeriesId": series, "SeasonId": season, "SeriesName": "The Bridge (TV)",
                       "SeasonName": f"Season {number}", "IndexNumber": episode,
                       "ParentIndexNumber": number},
            )  # fmt: skip
    jellyfin.add_item(
        file("missing.mkv"), name="Bridge Missing", streams=[], duration_s=60,
        library_id=movies, location_type="Virtual",
    )  # fmt: skip
    return ids


@pytest.fixture
def client(jellyfin: JellyfinStandIn) -> Iterator[JellyfinClient]:
    with JellyfinClient(jellyfin.url, jellyfin.api_key, retry_attempts=1) as client:
        yield client


def test_search_finds_titles_by_part_ignoring_case_and_accents_best_match_first(
    client: JellyfinClient, show: dict[str, str]
) -> None:
    hits = client.search_items("bridge")
    assert [(h.name, h.type) for h in hits] == [
        ("Bridge of Spies", "Movie"),  # starts with the term
        ("The Bridge", "Movie"),
        ("The Bridge (TV)", "Series"),
    ]  # not the missing (Virtual) one, not the episodes: their names lack it
    assert hits[0].year == 2015 and hits[0].id == show["Bridge of Spies"]
    assert [h.name for h in client.search_items("AMELIE")] == ["Amélie"]
    assert client.search_items("no such title") == []


def test_search_answers_seasons_and_episodes_with_their_series(
    client: JellyfinClient, show: dict[str, str]
) -> None:
    seasons = client.search_items("season 2")
    assert [(h.type, h.series_name, h.id) for h in seasons] == [
        ("Season", "The Bridge (TV)", show["season2"])
    ]
    episodes = client.search_items("episode 1")
    assert {(h.series_name, h.parent_index_number, h.index_number) for h in episodes} == {
        ("The Bridge (TV)", 1, 1),
        ("The Bridge (TV)", 2, 1),
    }
    assert [h.name for h in client.search_items("bridge", item_types=("Movie",), limit=1)] == [
        "Bridge of Spies"
    ]


def test_search_term_pages_like_any_listing(
    jellyfin: JellyfinStandIn, show: dict[str, str]
) -> None:
    headers = {"Authorization": auth(jellyfin.api_key)}
    params = {"searchTerm": "Bridge", "recursive": "true", "includeItemTypes": "Movie,Series"}
    with httpx.Client(base_url=jellyfin.url, headers=headers) as http:
        first = http.get("/Items", params={**params, "startIndex": "0", "limit": "2"}).json()
        rest = http.get("/Items", params={**params, "startIndex": "2", "limit": "2"}).json()
    assert first["TotalRecordCount"] == rest["TotalRecordCount"] == 4  # Virtual one too
    names = [i["Name"] for i in first["Items"] + rest["Items"]]
    assert sorted(names) == ["Bridge Missing", "Bridge of Spies", "The Bridge", "The Bridge (TV)"]


def test_a_series_or_season_listing_holds_its_episodes(
    client: JellyfinClient, show: dict[str, str]
) -> None:
    def listed(parent: str) -> set[str]:
        return {i.id for page in client.iter_library_pages(parent) for i in page.items}

    all_four = {show[f"s{n}e{e}"] for n in (1, 2) for e in (1, 2)}
    assert listed(show["series"]) == all_four
    assert listed(show["season1"]) == {show["s1e1"], show["s1e2"]}
    assert listed(show["shows"]) == all_four
    assert [lib.name for lib in client.list_libraries()] == ["Movies", "Shows"]


def test_an_empty_or_overlong_term_is_refused_before_any_request(client: JellyfinClient) -> None:
    for term in ("", "   ", "x" * 201):
        with pytest.raises(PermanentError, match="1 to 200 characters"):
            client.search_items(term)
