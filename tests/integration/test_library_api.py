"""The dashboard's Jellyfin side on real Postgres and the Jellyfin stand-in: title search,
queueing a series, a library's counts (as `mirror sync --dry-run` classifies), "mirror
the rest", and the login/CSRF rules every action keeps."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from werkzeug.test import Client

from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import DashboardQueries
from mirror.db.mirrored import MirroredItems
from mirror.db.removals import Removals
from mirror.db.repository import JobRepository
from mirror.db.sessions import EndedSessionStore
from mirror.db.stats import QueueStats
from mirror.db.sync_jobs import SyncJobStore
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.jobs import Mirrored
from mirror.jellyfin.client import JellyfinClient
from mirror.web.api import DashboardApi
from mirror.web.auth import UiAuth
from mirror.web.libraries import LibraryBoard
from mirror.web.serve import MirrorWeb, WebhookPolicy

PASSWORD = "library page password"


@pytest.fixture
def catalog(jellyfin: JellyfinStandIn, tmp_path: Path) -> dict[str, Any]:
    """Movies: six movies, one of each class, and a .strm; Shows: one series, 3 episodes."""
    movies = jellyfin.add_library("Movies")
    shows = jellyfin.add_library("Shows", "tvshows")
    ids: dict[str, Any] = {"movies": movies, "shows": shows}

    def movie(name: str, **options: Any) -> str:
        path = tmp_path / f"{name}.mkv"
        path.write_bytes(b"x" * 2000)
        ids[f"{name}.path"] = str(path)
        return jellyfin.add_item(
            path, name=name, streams=[], duration_s=60, library_id=movies, **options
        )

    for name in ("Mirrored", "Changed", "Queued", "Failed", "New One", "New Two"):
        ids[name] = movie(name)
    ids["Link"] = movie("Link", protocol="Http")  # a .strm: never queued
    series = jellyfin.add_folder("Borgen", item_type="Series", library_id=shows)
    ids["series"] = series
    ids["episodes"] = []
    for number in (1, 2, 3):
        path = tmp_path / f"borgen-{number}.mkv"
        path.write_bytes(b"y" * 1000)
        ids["episodes"].append(
            jellyfin.add_item(
                path, name=f"Borgen {number}", streams=[], duration_s=60,
                item_type="Episode", library_id=shows,
                extra={"SeriesId": series, "SeriesName": "Borgen", "IndexNumber": number,
                       "ParentIndexNumber": 1},
            )
        )  # fmt: skip
    return ids


def history(engine: Engine, ids: dict[str, Any]) -> None:
    """Jobs for the movie classes: done (same file), done (another file), queued, failed."""
    repo = JobRepository(engine)
    # Another file is other bytes (a path alone is no change: see ItemSummary.fingerprint).
    for name, size in (("Mirrored", 2000), ("Changed", 1500)):
        repo.enqueue([ids[name]])
        lease = repo.claim_next("host:1:0")
        assert lease is not None
        source = {"path": ids.get(f"{name}.path", "/old/Changed.mkv"), "size": size}
        repo.mark_done(lease.job_id, lease.token, Mirrored("v", [], source=source))
    repo.enqueue([ids["Queued"]])
    repo.cancel(repo.enqueue([ids["Failed"]])[0].job.id)


@pytest.fixture
def make_web(engine: Engine, jellyfin: JellyfinStandIn) -> Iterator[Any]:
    url, api_key = jellyfin.url, jellyfin.api_key  # a client per request, as in serve

    def make(
        password: str | None = PASSWORD, *, with_jellyfin: bool = True, min_recount_s: float = 5
    ) -> Client:
        repo = JobRepository(engine)
        auth = UiAuth(password=password, ended=EndedSessionStore(engine))
        api = DashboardApi(
            repo, DashboardQueries(engine), AttemptLog(engine), auth, stale_timeout_s=60.0
        )
        sync_jobs = SyncJobStore(MirroredItems(engine), Removals(engine), repo, 3)
        board = LibraryBoard(
            (lambda: JellyfinClient(url, api_key, retry_attempts=1)) if with_jellyfin else None,
            sync_jobs,
            repo,
            item_types=("Movie", "Episode"),
            max_attempts=3,
            min_recount_s=min_recount_s,
        )
        policy = WebhookPolicy("webhook-secret-value-1234", ("Movie",))
        return Client(MirrorWeb(repo, QueueStats(engine), policy, None, api, library=board))

    yield make


def log_in(web: Client) -> dict[str, str]:
    response = web.post("/api/login", json={"password": PASSWORD})
    assert response.status_code == 200
    return {"X-CSRF-Token": response.json["csrf_token"]}  # type: ignore[index]


def test_search_answers_jellyfin_titles_with_type_year_and_series(
    make_web: Any, catalog: dict[str, Any]
) -> None:
    web = make_web()
    assert web.get("/api/jellyfin/search?q=borgen").status_code == 401  # login first
    log_in(web)
    answer = web.get("/api/jellyfin/search?q=borgen").json
    assert [(i["name"], i["type"]) for i in answer["items"]] == [
        ("Borgen", "Series"),
        ("Borgen 1", "Episode"),
        ("Borgen 2", "Episode"),
        ("Borgen 3", "Episode"),
    ]
    assert answer["items"][1]["series_name"] == "Borgen"
    shows = web.get("/api/jellyfin/search?q=show").json["items"]
    assert shows == [{**shows[0], "id": catalog["shows"], "name": "Shows", "type": "Library"}]
    assert web.get("/api/jellyfin/search?q=").status_code == 400


def test_queueing_a_series_queues_its_episodes_once_and_needs_login_and_csrf(
    make_web: Any, catalog: dict[str, Any], repo: JobRepository
) -> None:
    web = make_web()
    body = {"parent_id": catalog["series"]}
    assert web.post("/api/sweep", json=body).status_code == 401
    csrf = log_in(web)
    refused = web.post("/api/sweep", json=body)  # no CSRF token
    assert refused.status_code == 403 and "CSRF" in refused.json["error"]
    foreign = web.post("/api/sweep", json=body, headers={**csrf, "Origin": "https://evil.test"})
    assert foreign.status_code == 403
    assert repo.list() == []

    queued = web.post("/api/sweep", json=body, headers=csrf)
    assert queued.status_code == 201
    assert (queued.json["seen"], queued.json["queued"]) == (3, 3)
    assert sorted(job.item_id for job in repo.list()) == sorted(catalog["episodes"])
    again = web.post("/api/sweep", json=body, headers=csrf)
    assert (again.status_code, again.json["already_queued"]) == (200, 3)
    assert len(repo.list()) == 3
    assert web.post("/api/sweep", json={"parent_id": "nope"}, headers=csrf).status_code == 400


def test_read_only_dashboard_searches_but_never_queues(
    make_web: Any, catalog: dict[str, Any], repo: JobRepository
) -> None:
    web = make_web(password=None)
    assert web.get("/api/jellyfin/search?q=borgen").status_code == 200
    for path in ("/api/sweep", f"/api/libraries/{catalog['movies']}/mirror-rest"):
        response = web.post(path, json={"parent_id": catalog["series"]})
        assert response.status_code == 403 and "MIRROR_UI_PASSWORD" in response.json["error"]
    assert repo.list() == []


def test_library_counts_are_sync_dry_run_classes_and_mirror_the_rest_queues_new_and_changed(
    make_web: Any, catalog: dict[str, Any], engine: Engine, repo: JobRepository
) -> None:
    history(engine, catalog)
    web = make_web()
    csrf = log_in(web)
    listed = web.get("/api/libraries").json["libraries"]
    assert [lib["name"] for lib in listed] == ["Movies", "Shows"]
    movies = listed[0]["counts"]
    assert {k: movies[k] for k in ("items", "mirrored", "changed", "queued", "failed")} == {
        "items": 7, "mirrored": 1, "changed": 1, "queued": 1, "failed": 1
    }  # fmt: skip
    assert (movies["not_mirrored"], movies["skipped"], movies["the_rest"]) == (2, 1, 3)
    assert listed[0]["computed_at"]
    assert listed[1]["counts"]["not_mirrored"] == 3
    by_name = web.get("/api/libraries/movies").json  # by name, ignoring case, or by id
    assert by_name["id"] == catalog["movies"] and by_name["counts"] == movies

    refused = web.post(f"/api/libraries/{catalog['movies']}/mirror-rest", json={})
    assert refused.status_code == 403  # no CSRF token
    rest = web.post(f"/api/libraries/{catalog['movies']}/mirror-rest", json={}, headers=csrf)
    assert rest.status_code == 201 and rest.json["queued"] == 3
    active = {job.item_id for job in repo.list() if job.status == "new"}
    assert active == {catalog[n] for n in ("Queued", "Changed", "New One", "New Two")}
    after = web.get(f"/api/libraries/{catalog['movies']}").json["counts"]
    assert (after["queued"], after["not_mirrored"], after["changed"]) == (4, 0, 0)
    again = web.post(f"/api/libraries/{catalog['movies']}/mirror-rest", json={}, headers=csrf)
    assert (again.status_code, again.json["queued"]) == (200, 0)
    assert web.get(f"/api/libraries/{uuid.uuid4().hex}").status_code == 404


def test_library_page_shows_the_counts_under_the_dashboards_csp(
    make_web: Any, catalog: dict[str, Any], engine: Engine
) -> None:
    history(engine, catalog)
    web = make_web()
    assert web.get("/libraries").status_code == 401
    log_in(web)
    page = web.get("/libraries")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    html = page.get_data(as_text=True)
    assert "<script>" not in html
    assert 'class="n-not-mirrored">2<' in html and 'class="n-changed">1<' in html
    assert "Mirror the rest (3)" in html
    assert 'data-rest="3"' in html


def test_without_jellyfin_the_search_and_library_page_say_what_to_set(
    make_web: Any,
) -> None:
    web = make_web(with_jellyfin=False)
    log_in(web)
    answer = web.get("/api/jellyfin/search?q=x")
    assert answer.status_code == 503
    assert "MIRROR_JELLYFIN_URL" in answer.json["error"]
    page = web.get("/libraries")
    assert page.status_code == 200 and "MIRROR_JELLYFIN_URL" in page.get_data(as_text=True)


def test_an_unreachable_jellyfin_is_one_line_not_a_traceback(
    make_web: Any, jellyfin: JellyfinStandIn
) -> None:
    web = make_web()
    log_in(web)
    jellyfin.stop()
    answer = web.get("/api/libraries")
    assert answer.status_code == 502
    error = answer.json["error"]
    assert error.startswith("Jellyfin: ") and "\n" not in error and "Traceback" not in error


def test_library_counts_agree_with_mirror_sync_dry_run(
    make_web: Any, catalog: dict[str, Any], engine: Engine, jellyfin: JellyfinStandIn
) -> None:
    """Same listing, same classification: the page's numbers are sync's, class by class."""
    from mirror.converge.sync import sync_library

    history(engine, catalog)
    web = make_web()
    log_in(web)
    counts = web.get(f"/api/libraries/{catalog['movies']}").json["counts"]
    jobs = SyncJobStore(MirroredItems(engine), Removals(engine), JobRepository(engine), 3)
    with JellyfinClient(jellyfin.url, jellyfin.api_key, retry_attempts=1) as client:
        report = sync_library(
            client, jobs, catalog["movies"], item_types=("Movie",), dry_run=True, deletion=None
        ).counts()
    assert counts["not_mirrored"] == report["new"]
    assert counts["changed"] == report["changed"]
    assert counts["mirrored"] == report["unchanged"] + report["restored"]
    assert (counts["queued"], counts["failed"]) == (report["queued"], report["failed"])
    assert counts["skipped"] == report["skipped"]


def test_counts_are_kept_a_minute_and_fresh_counts_again(
    make_web: Any, catalog: dict[str, Any], jellyfin: JellyfinStandIn, tmp_path: Path
) -> None:
    """One listing walk per library per minute, however often the page is loaded."""
    web = make_web(min_recount_s=0)
    log_in(web)
    path = f"/api/libraries/{catalog['movies']}"
    first = web.get(path).json
    late = tmp_path / "late.mkv"
    late.write_bytes(b"z" * 100)
    jellyfin.add_item(late, name="Late", streams=[], duration_s=60, library_id=catalog["movies"])
    kept = web.get(path).json
    assert kept == first  # same walk, same computed_at
    recounted = web.get(f"{path}?fresh=1").json
    assert recounted["counts"]["items"] == first["counts"]["items"] + 1
    assert recounted["counts"]["not_mirrored"] == first["counts"]["not_mirrored"] + 1

    throttled = make_web()  # the default: a recount within 5 s is the last count
    log_in(throttled)
    before = throttled.get(path).json
    jellyfin.remove_item(catalog["New One"])
    assert throttled.get(f"{path}?fresh=1").json == before
