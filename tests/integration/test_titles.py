"""Titles instead of ids: stored on the job, filled from every way in, shown and searched.

Real Postgres throughout; the sweep and sync talk HTTP to the Jellyfin stand-in, which
lists episodes as Jellyfin does (SeriesName, SeriesId, SeasonId, ParentIndexNumber,
IndexNumber, the season as ParentId).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from werkzeug.test import Client

from mirror.converge.library_sweep import sweep_library
from mirror.converge.sync import sync_library
from mirror.db import migrations
from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import DashboardQueries
from mirror.db.mirrored import MirroredItems
from mirror.db.removals import Removals
from mirror.db.repository import JobRepository
from mirror.db.sessions import EndedSessionStore
from mirror.db.stats import QueueStats
from mirror.db.sync_jobs import SyncJobStore
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.item import ItemTitle
from mirror.domain.jobs import Fence, Mirrored
from mirror.jellyfin.client import JellyfinClient
from mirror.web.api import DashboardApi
from mirror.web.auth import UiAuth
from mirror.web.serve import MirrorWeb, WebhookPolicy
from tests.integration.test_cli import run_mirror

EPISODE = "0e5b6f0c6a3f4d3e8e1b2c3d4e5f6a7b"
MOVIE = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
SECRET = "webhook-secret-value-1234"
PILOT = ItemTitle(
    item_name="Pilot",
    item_type="Episode",
    series_name="Lost",
    season_number=1,
    episode_number=2,
    year=2004,
    library_name="Shows",
    series_id="11111111111111111111111111111111",
    season_id="22222222222222222222222222222222",
    parent_id="22222222222222222222222222222222",
)
STAR_WARS = ItemTitle(item_name="Star Wars", item_type="Movie", year=1977, library_name="Films")


def _done(repo: JobRepository, item_id: str) -> None:
    lease = repo.claim_next("host:1:0")
    assert lease is not None and lease.job.item_id == item_id
    fence = repo.mark_done(lease.job_id, lease.token, Mirrored(video_key="v", audio_keys=[]))
    assert fence is Fence.OK


# -- the columns, the view, the index -----------------------------------------------------


def test_job_status_spells_titles_as_the_cli_does(repo: JobRepository, engine: Engine) -> None:
    odd = ItemTitle(item_name="Special", series_name="Lost", season_number=0, episode_number=123)
    nameless = ItemTitle(year=1999)
    items = {MOVIE: STAR_WARS, EPISODE: PILOT, "c" * 32: odd, "d" * 32: nameless, "e" * 32: None}
    repo.enqueue(list(items), titles={k: v for k, v in items.items() if v is not None})
    with engine.connect() as conn:
        view = dict(conn.execute(text("SELECT item_id, title FROM media_mirror.job_status")).all())
        index = conn.execute(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_jobs_title_search'")
        ).scalar_one()
    records = {record.item_id: record for record in repo.list()}
    assert view == {item_id: record.title for item_id, record in records.items()}
    assert view[EPISODE] == "Lost S01E02 Pilot"
    assert view[MOVIE] == "Star Wars (1977)"
    assert view["c" * 32] == "Lost S00E123 Special"
    assert view["d" * 32] is None and view["e" * 32] is None
    assert "USING gin" in index and "gin_trgm_ops" in index
    series = records[EPISODE]
    assert (series.series_id, series.season_id, series.parent_id) == (
        PILOT.series_id,
        PILOT.season_id,
        PILOT.parent_id,
    )


def test_without_pg_trgm_the_migration_falls_back_to_a_plain_index(
    empty_database_url: str,
) -> None:
    """A role that may not create pg_trgm (its search_path names only a schema it may not
    create in) still migrates, and its search still answers."""
    role = f"titles_limited_{uuid.uuid4().hex[:8]}"
    admin = create_engine(empty_database_url, isolation_level="AUTOCOMMIT")
    database = empty_database_url.rsplit("/", 1)[1]
    limited_url = empty_database_url.replace("postgres@", f"{role}@", 1)
    limited = create_engine(limited_url)
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE ROLE {role} LOGIN"))
            conn.execute(text(f'GRANT CREATE ON DATABASE "{database}" TO {role}'))
            conn.execute(text("CREATE SCHEMA locked"))
            conn.execute(
                text(f'ALTER ROLE {role} IN DATABASE "{database}" SET search_path = locked')
            )
        migrations.upgrade(limited)
        with limited.connect() as conn:
            trgm = conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'"))
            assert trgm.first() is None
            index = conn.execute(
                text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_jobs_title_search'")
            ).scalar_one()
        assert "gin" not in index
        repo = JobRepository(limited)
        repo.enqueue([MOVIE], titles={MOVIE: STAR_WARS})
        assert [job.title for job in repo.list(search="STAR")] == ["Star Wars (1977)"]
    finally:
        limited.dispose()
        with admin.connect() as conn:
            conn.execute(text(f"DROP OWNED BY {role} CASCADE"))
            conn.execute(text(f"DROP ROLE {role}"))
        admin.dispose()


# -- recording and refreshing -------------------------------------------------------------


def test_enqueue_records_titles_and_an_attempt_refreshes_them_keeping_the_unknown(
    repo: JobRepository,
) -> None:
    repo.enqueue([EPISODE], titles={EPISODE: PILOT})
    _done(repo, EPISODE)
    # A re-mirror by id alone (`mirror enqueue ID`) starts with what the item's jobs knew.
    again = repo.enqueue([EPISODE])[0].job
    assert again.title == "Lost S01E02 Pilot" and again.library_name == "Shows"
    lease = repo.claim_next("host:1:0")
    assert lease is not None
    # /Items/{id} names no library: the refresh keeps it; the renamed episode wins.
    fetched = ItemTitle(item_name="Pilot (Part 1)", item_type="Episode", series_name="Lost",
                        season_number=1, episode_number=2)  # fmt: skip
    assert repo.refresh_title(lease.job_id, lease.token, fetched) is Fence.OK
    jobs = repo.list()
    assert {job.title for job in jobs} == {"Lost S01E02 Pilot (Part 1)"}  # history too
    assert {job.library_name for job in jobs} == {"Shows"}
    # A lost lease writes nothing.
    stale = repo.refresh_title(lease.job_id, uuid.uuid4(), ItemTitle(item_name="Other"))
    assert stale is Fence.LEASE_LOST
    assert repo.get(lease.job_id).item_name == "Pilot (Part 1)"


def test_search_finds_star_among_1000_jobs_through_the_trigram_index(
    repo: JobRepository, engine: Engine
) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO media_mirror.jobs (item_id, status, item_name, item_type, year) "
                "SELECT md5(n::text), 'done', 'Movie ' || n, 'Movie', 1950 + n % 70 "
                "FROM generate_series(1, 1000) AS n"
            )
        )
    repo.enqueue([MOVIE, EPISODE, "f" * 32], titles={
        MOVIE: STAR_WARS,
        EPISODE: PILOT,
        "f" * 32: ItemTitle(item_name="The Last Starfighter", year=1984),
    })  # fmt: skip
    with engine.begin() as conn:
        conn.execute(text("ANALYZE media_mirror.jobs"))
    started = time.monotonic()
    found = {job.title for job in repo.list(search="star", limit=100)}
    took = time.monotonic() - started
    assert found == {"Star Wars (1977)", "The Last Starfighter (1984)"}
    assert {job.title for job in repo.list(search="  LOST ")} == {"Lost S01E02 Pilot"}
    assert repo.list(search="100%") == []  # % and _ are literal
    assert len(repo.list(search="movie 1", limit=1000)) == 112  # 1, 10-19, 100-199, 1000
    assert took < 1.0
    # The query's condition is the index's expression: the planner can use it.
    with engine.begin() as conn:
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            conn.execute(
                text(
                    "EXPLAIN SELECT id FROM media_mirror.jobs WHERE "
                    "(COALESCE(series_name, '') || ' ' || COALESCE(item_name, '')) "
                    "ILIKE '%star%'"
                )
            ).scalars()
        )
    assert "ix_jobs_title_search" in plan, plan
    # The dashboard's search and its paged list search the same way.
    queries = DashboardQueries(engine)
    assert {job.title for job in queries.search("Star")} == found
    page, cursor = queries.page(status=None, limit=1, search="star")
    assert len(page) == 1 and cursor is not None
    rest, _ = queries.page(status=None, limit=5, cursor=cursor, search="star")
    assert {page[0].title, *(job.title for job in rest)} == found


# -- the sweep, sync and the webhook fill them ---------------------------------------------


def test_sweep_and_sync_record_titles_with_the_library_name(
    repo: JobRepository, engine: Engine, jellyfin: JellyfinStandIn, tmp_path: Path
) -> None:
    media = tmp_path / "file.mkv"
    media.write_bytes(b"\0" * 1000)
    shows = jellyfin.add_library("Shows", "tvshows")
    films = jellyfin.add_library("Films")
    episode = jellyfin.add_episode(
        media, series="Lost", season=1, episode=2, name="Pilot", streams=(), duration_s=4.0,
        library_id=shows, year=2004,
    )  # fmt: skip
    movie = jellyfin.add_item(
        media, name="Star Wars", streams=(), duration_s=4.0, library_id=films,
        extra={"ProductionYear": 1977},
    )  # fmt: skip
    # Mirrored by id before titles were kept: sync gives the done job its title.
    repo.enqueue([movie])
    _done(repo, movie)
    with JellyfinClient(jellyfin.url, jellyfin.api_key, retry_attempts=1) as client:
        sweep_library(client, repo, shows, item_types=["Episode"], library_name="Shows")
        jobs = SyncJobStore(MirroredItems(engine), Removals(engine), repo, max_attempts=3)
        sync_library(
            client, jobs, films, item_types=["Movie"], dry_run=False, deletion=None,
            library_name="Films",
        )  # fmt: skip
    swept = repo.latest_for_item(episode)
    catalog_episode = jellyfin.catalog.item(episode)
    assert catalog_episode is not None
    assert swept.title == "Lost S01E02 Pilot"
    assert (swept.item_type, swept.library_name, swept.year) == ("Episode", "Shows", 2004)
    assert swept.series_id == catalog_episode.extra["SeriesId"]
    assert swept.season_id == swept.parent_id == catalog_episode.extra["SeasonId"]
    synced = repo.latest_for_item(movie)
    assert synced.status == "done"
    assert (synced.title, synced.library_name) == ("Star Wars (1977)", "Films")


def _web(engine: Engine) -> Client:
    repo = JobRepository(engine)
    auth = UiAuth(password=None, ended=EndedSessionStore(engine), secret=None)
    api = DashboardApi(repo, DashboardQueries(engine), AttemptLog(engine), auth,
                       stale_timeout_s=60.0)  # fmt: skip
    policy = WebhookPolicy(SECRET, ("Movie", "Episode"))
    return Client(MirrorWeb(repo, QueueStats(engine), policy, None, api))


def test_webhook_stores_what_its_body_says(engine: Engine, repo: JobRepository) -> None:
    body: dict[str, Any] = {
        "NotificationType": "ItemAdded",
        "ItemId": "0e5b6f0c-6a3f-4d3e-8e1b-2c3d4e5f6a7b",
        "ItemType": "Episode",
        "Name": "Pilot &amp; Friends",  # `{{Name}}`: HTML-encoded by Handlebars
        "SeriesName": "Lost",
        "SeasonNumber": 1,
        "EpisodeNumber": "02",  # a quoted placeholder
        "Year": 2004,
        "SeriesId": "11111111-1111-1111-1111-111111111111",
    }
    response = _web(engine).post("/hooks/jellyfin", json=body, headers={"X-Mirror-Secret": SECRET})
    assert response.status_code == 202, response.text
    job = repo.latest_for_item(EPISODE)
    assert job.title == "Lost S01E02 Pilot & Friends"
    assert (job.item_type, job.year, job.series_id) == ("Episode", 2004, "1" * 32)
    assert job.library_name is None  # the plugin sends none: the attempt fills the rest


# -- the surfaces ----------------------------------------------------------------------------


def test_api_and_job_page_show_titles_and_search_them(engine: Engine, repo: JobRepository) -> None:
    repo.enqueue([MOVIE, EPISODE], titles={MOVIE: STAR_WARS, EPISODE: PILOT})
    client = _web(engine)
    listed = client.get("/api/jobs?q=star").json
    assert [job["title"] for job in listed["jobs"]] == ["Star Wars (1977)"]
    assert listed["jobs"][0]["name"] == "Star Wars (1977)"
    assert listed["jobs"][0]["library_name"] == "Films"
    assert client.get("/api/jobs?q=" + "x" * 201).status_code == 400
    searched = client.get("/api/search?q=lost").json
    assert [job["item_id"] for job in searched["jobs"]] == [EPISODE]
    job_id = repo.latest_for_item(EPISODE).id
    page = client.get(f"/jobs/{job_id}").text
    assert "Lost S01E02 Pilot" in page and "library &#39;Shows&#39;" in page


@pytest.mark.e2e
def test_mirror_jobs_and_show_print_titles_and_search_them(
    repo: JobRepository, database_url: str
) -> None:
    long_name = "An Episode Whose Name Goes On Far Longer Than Any Table Column"
    repo.enqueue([MOVIE, EPISODE, "f" * 32], titles={
        MOVIE: STAR_WARS,
        EPISODE: PILOT,
        "f" * 32: ItemTitle(item_name=long_name, series_name="Lost", season_number=1,
                            episode_number=3),
    })  # fmt: skip
    wide = {"COLUMNS": "250"}
    table = run_mirror("jobs", database_url=database_url, **wide)
    assert table.returncode == 0, table.stderr
    assert "Star Wars (1977)" in table.stdout and "Lost S01E02 Pilot" in table.stdout
    assert "Lost S01E03 An Episode Whose Name Goes" in table.stdout
    assert long_name not in table.stdout and "…" in table.stdout  # cut, on one line
    searched = run_mirror("jobs", "--search", "STAR", database_url=database_url, **wide)
    assert searched.returncode == 0, searched.stderr
    assert "Star Wars (1977)" in searched.stdout and "Lost" not in searched.stdout
    rows = json.loads(run_mirror("jobs", "--json", "--search", "pilot",
                                 database_url=database_url).stdout)  # fmt: skip
    assert [(row["title"], row["series_name"], row["episode_number"]) for row in rows] == [
        ("Lost S01E02 Pilot", "Lost", 2)
    ]
    shown = run_mirror("show", EPISODE, database_url=database_url, **wide)
    assert shown.returncode == 0, shown.stderr
    assert "Lost S01E02 Pilot" in shown.stdout
    assert "Episode in library 'Shows'" in shown.stdout
    assert f"series {PILOT.series_id}, season {PILOT.season_id}" in shown.stdout
