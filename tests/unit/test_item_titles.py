"""Title facts read from Jellyfin's answers and from webhook bodies."""

from __future__ import annotations

from mirror.domain.item import ItemTitle
from mirror.jellyfin.models import parse_item_summary, parse_media_item
from mirror.web.webhook_body import title_of

# An episode as Jellyfin 10.11's /Items answers with fields=Path,MediaSources,ParentId.
EPISODE = {
    "Name": "Pilot",
    "Id": "0e5b6f0c6a3f4d3e8e1b2c3d4e5f6a7b",
    "Type": "Episode",
    "IndexNumber": 2,
    "ParentIndexNumber": 1,
    "ProductionYear": 2004,
    "SeriesName": "Lost",
    "SeriesId": "11111111111111111111111111111111",
    "SeasonId": "22222222222222222222222222222222",
    "SeasonName": "Season 1",
    "ParentId": "22222222222222222222222222222222",
    "IsFolder": False,
    "LocationType": "FileSystem",
}
MOVIE = {
    "Name": "Big Buck Bunny",
    "Id": "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21",
    "Type": "Movie",
    "ProductionYear": 2008,
    "IndexNumber": 1,  # some movies carry one: it is no episode number
    "ParentId": "f137a2dd21bbc1b99aa5c0f6bf02a805",
}


def test_an_episode_reads_as_series_season_episode_with_its_parents() -> None:
    title = parse_media_item(EPISODE).title
    assert title == ItemTitle(
        item_name="Pilot",
        item_type="Episode",
        series_name="Lost",
        season_number=1,
        episode_number=2,
        year=2004,
        series_id="1" * 32,
        season_id="2" * 32,
        parent_id="2" * 32,
    )
    assert title.label == "Lost S01E02 Pilot"
    summary = parse_item_summary(EPISODE)
    assert summary is not None and summary.title == title


def test_a_movie_reads_as_name_and_year() -> None:
    title = parse_media_item(MOVIE).title
    assert (title.label, title.episode_number, title.parent_id) == (
        "Big Buck Bunny (2008)",
        None,
        "f137a2dd21bbc1b99aa5c0f6bf02a805",
    )


def test_nonsense_in_jellyfin_json_is_no_fact() -> None:
    odd = {**EPISODE, "SeriesId": "not-a-guid", "IndexNumber": "2", "ProductionYear": True}
    title = parse_media_item(odd).title
    assert (title.series_id, title.episode_number, title.year) == (None, None, None)


def test_webhook_body_gives_what_its_template_has() -> None:
    body = {
        "Name": "Tom &amp; Jerry",
        "ItemType": "Episode",
        "SeriesName": "Cartoons",
        "SeasonNumber": "03",
        "EpisodeNumber": 7,
        "Year": "1940",
        "SeriesId": "11111111-1111-1111-1111-111111111111",
        "SeasonId": "../../etc",
    }
    title = title_of(body)
    assert title.label == "Cartoons S03E07 Tom & Jerry"
    assert (title.year, title.series_id, title.season_id) == (1940, "1" * 32, None)
    assert title_of({"Name": "X", "Year": "²"}).year is None
    assert title_of({}) == ItemTitle()


def test_titles_from_tags_are_one_storable_line() -> None:
    """A name with a lone surrogate, a NUL or a line separator (file tags, webhook
    bodies) is stored as one line of text Postgres takes, cut at 500 characters."""
    title = ItemTitle(
        item_name="\ud800\u0000 " + "x" * 1000, series_name="A\u2028B\nC", item_type=" \t "
    )
    assert title.item_name is not None
    assert title.item_name.startswith("\ufffd x")
    assert len(title.item_name) == 500
    title.item_name.encode("utf-8")  # no lone surrogate left
    assert title.series_name == "A B C"
    assert title.item_type is None
