"""The dashboard's JSON API and pages on real Postgres: errors, login, CSRF, paging."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import Engine
from werkzeug.test import Client

from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import DashboardQueries
from mirror.db.repository import JobRepository
from mirror.db.sessions import EndedSessionStore
from mirror.db.stats import QueueStats
from mirror.domain.redact import forget_secrets, register_secrets
from mirror.web.api import DashboardApi
from mirror.web.auth import UiAuth
from mirror.web.serve import MirrorWeb, WebhookPolicy

PASSWORD = "hunter2-but-longer"
SECRET = "webhook-secret-value-1234"
ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"


def make_client(
    engine: Engine,
    password: str | None,
    secret: str | None = None,
    metrics_token: str | None = None,
) -> Client:
    repo = JobRepository(engine)
    auth = UiAuth(password=password, ended=EndedSessionStore(engine), secret=secret)
    api = DashboardApi(
        repo, DashboardQueries(engine), AttemptLog(engine), auth, stale_timeout_s=60.0
    )
    policy = WebhookPolicy(SECRET, ("Movie",))
    web = MirrorWeb(repo, QueueStats(engine), policy, None, api, metrics_token=metrics_token)
    return Client(web)


@pytest.fixture
def locked(engine: Engine) -> Client:
    return make_client(engine, PASSWORD)


@pytest.fixture
def read_only(engine: Engine) -> Client:
    return make_client(engine, None)


def log_in(client: Client) -> str:
    response = client.post("/api/login", json={"password": PASSWORD})
    assert response.status_code == 200
    token: str = response.json["csrf_token"]  # type: ignore[index]
    return token


def test_read_only_without_password_answers_reads_and_refuses_every_action(
    read_only: Client, repo: JobRepository
) -> None:
    job = repo.enqueue([ITEM])[0].job
    assert read_only.get("/api/jobs").status_code == 200
    assert read_only.get("/").status_code == 200
    for path, body in (
        (f"/api/jobs/{job.id}/cancel", {}),
        (f"/api/jobs/{job.id}/retry", {}),
        ("/api/enqueue", {"item_id": ITEM}),
    ):
        response = read_only.post(path, json=body)
        assert response.status_code == 403, path
        assert "MIRROR_UI_PASSWORD" in response.json["error"]  # type: ignore[index]
    assert read_only.post("/api/login", json={"password": "x"}).status_code == 403
    assert repo.get(job.id).status == "new"


def test_with_a_password_everything_needs_a_login(locked: Client, repo: JobRepository) -> None:
    job = repo.enqueue([ITEM])[0].job
    assert locked.get("/api/jobs").status_code == 401
    assert locked.get(f"/api/jobs/{job.id}").status_code == 401
    page = locked.get("/")
    assert page.status_code == 401 and b'id="login"' in page.data
    assert locked.post(f"/api/jobs/{job.id}/cancel", json={}).status_code == 401
    assert repo.get(job.id).status == "new"


def test_wrong_passwords_past_five_are_answered_429_with_retry_after(locked: Client) -> None:
    """Issue 20: no thread sleeps on a failure; a guessing client is refused at once."""
    for _ in range(5):
        response = locked.post("/api/login", json={"password": "guess"})
        assert response.status_code == 401
        assert "Set-Cookie" not in response.headers
    throttled = locked.post("/api/login", json={"password": PASSWORD})  # even the right one
    assert throttled.status_code == 429
    assert 1 <= int(throttled.headers["Retry-After"]) <= 60
    assert "Set-Cookie" not in throttled.headers
    assert locked.post("/api/login", json={}).status_code == 400


def test_logout_ends_the_session_for_a_copy_of_its_cookie(locked: Client) -> None:
    """Issue 20: the cookie stayed valid for 12 h after a logout."""
    token = log_in(locked)
    cookie = locked.get_cookie("mirror_session")
    assert cookie is not None
    kept = Client(locked.application)
    kept.set_cookie("mirror_session", cookie.value)
    assert kept.get("/api/jobs").status_code == 200
    assert locked.post("/api/logout", headers={"X-CSRF-Token": token}).status_code == 200
    assert kept.get("/api/jobs").status_code == 401
    assert kept.get("/api/session").json["logged_in"] is False  # type: ignore[index]
    log_in(locked)  # a new login still works
    assert locked.get("/api/jobs").status_code == 200


def test_sessions_outlive_a_restart_only_when_signed_with_the_configured_secret(
    engine: Engine,
) -> None:
    """A new process (a new app) accepts the old cookie only with MIRROR_SESSION_SECRET."""
    for secret, survives in ((None, False), ("a-session-secret-of-32-characters", True)):
        before = make_client(engine, PASSWORD, secret=secret)
        log_in(before)
        cookie = before.get_cookie("mirror_session")
        assert cookie is not None
        after = make_client(engine, PASSWORD, secret=secret)
        after.set_cookie("mirror_session", cookie.value)
        assert (after.get("/api/jobs").status_code == 200) is survives, secret
    changed = make_client(engine, "another password entirely", secret=secret)
    assert cookie is not None
    changed.set_cookie("mirror_session", cookie.value)
    assert changed.get("/api/jobs").status_code == 401


def test_metrics_need_the_login_or_the_bearer_token_when_one_is_set(engine: Engine) -> None:
    assert make_client(engine, None).get("/metrics").status_code == 200  # nothing set: open
    locked = make_client(engine, PASSWORD)
    assert locked.get("/metrics").status_code == 401
    log_in(locked)
    assert locked.get("/metrics").status_code == 200
    scraped = make_client(engine, PASSWORD, metrics_token="prometheus-token-1234")
    refused = scraped.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert refused.status_code == 401 and "Bearer" in refused.headers["WWW-Authenticate"]
    bearer = {"Authorization": "Bearer prometheus-token-1234"}
    assert scraped.get("/metrics", headers=bearer).status_code == 200
    token_only = make_client(engine, None, metrics_token="prometheus-token-1234")
    assert token_only.get("/metrics").status_code == 401
    assert token_only.get("/metrics", headers=bearer).status_code == 200


def test_login_sets_a_strict_httponly_cookie_and_actions_need_the_csrf_token(
    locked: Client, repo: JobRepository
) -> None:
    job = repo.enqueue([ITEM])[0].job
    response = locked.post("/api/login", json={"password": PASSWORD})
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    token = response.json["csrf_token"]  # type: ignore[index]
    assert locked.get("/api/jobs").status_code == 200

    assert locked.post(f"/api/jobs/{job.id}/cancel", json={}).status_code == 403
    wrong = {"X-CSRF-Token": "0" * 64}
    assert locked.post(f"/api/jobs/{job.id}/cancel", json={}, headers=wrong).status_code == 403
    cross_site = {"X-CSRF-Token": token, "Origin": "https://evil.example"}
    assert locked.post(f"/api/jobs/{job.id}/cancel", json={}, headers=cross_site).status_code == 403
    assert repo.get(job.id).status == "new"

    ok = {"X-CSRF-Token": token}
    cancelled = locked.post(f"/api/jobs/{job.id}/cancel", json={}, headers=ok)
    assert cancelled.status_code == 200
    assert cancelled.json["job"]["status"] == "cancelled"  # type: ignore[index]
    again = locked.post(f"/api/jobs/{job.id}/cancel", json={}, headers=ok)
    assert again.status_code == 409
    retried = locked.post(f"/api/jobs/{job.id}/retry", json={}, headers=ok)
    assert retried.status_code == 200 and repo.get(job.id).status == "new"


def test_bad_input_is_400_and_unknown_jobs_404(locked: Client) -> None:
    ok = {"X-CSRF-Token": log_in(locked)}
    for path in (
        "/api/jobs?limit=abc",
        "/api/jobs?limit=0",
        "/api/jobs?limit=100000",
        "/api/jobs?status=exploded",
        "/api/jobs?cursor=not-a-cursor",
        "/api/search?q=",
    ):
        assert locked.get(path).status_code == 400, path
    assert locked.get(f"/api/jobs/{uuid.uuid4()}").status_code == 404
    assert locked.get("/api/jobs/not-a-uuid").status_code == 404
    assert locked.get(f"/jobs/{uuid.uuid4()}").status_code == 404
    assert locked.post(f"/api/jobs/{uuid.uuid4()}/cancel", json={}, headers=ok).status_code == 404
    assert locked.post("/api/enqueue", json={"item_id": "nope"}, headers=ok).status_code == 400
    assert locked.post("/api/enqueue", json={}, headers=ok).status_code == 400
    assert (
        locked.post("/api/enqueue", json={"item_id": ITEM, "priority": "x"}, headers=ok)
    ).status_code == 400
    bad_json = locked.post("/api/enqueue", data="{", content_type="application/json", headers=ok)
    assert bad_json.status_code == 400


def test_enqueue_pages_search_and_the_job_page(
    locked: Client, repo: JobRepository, engine: Engine
) -> None:
    ok = {"X-CSRF-Token": log_in(locked)}
    created = locked.post("/api/enqueue", json={"item_id": ITEM.upper()}, headers=ok)
    assert created.status_code == 201 and created.json["status"] == "queued"  # type: ignore[index]
    again = locked.post("/api/enqueue", json={"item_id": ITEM}, headers=ok)
    assert again.json["status"] == "already queued"  # type: ignore[index]
    repo.enqueue([uuid.uuid4().hex for _ in range(6)])

    seen: list[str] = []
    cursor = ""
    while True:
        page: Any = locked.get(f"/api/jobs?limit=3&cursor={cursor}").json
        seen += [job["id"] for job in page["jobs"]]
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
    assert len(seen) == len(set(seen)) == 7

    lease = repo.claim_next("host:1:0")
    assert lease is not None
    beat = {"phase": "download", "percent": 40.0, "encoder": "h264_qsv"}
    repo.heartbeat(lease.job_id, lease.token, beat)
    overview: Any = locked.get("/api/overview").json
    assert overview["jobs_by_status"]["processing"] == 1
    assert overview["running"][0]["percent"] == 40.0
    assert overview["running"][0]["encoder"] == "h264_qsv"  # the worker's, from its beats
    assert "host:1:0 (h264_qsv)" in locked.get("/").text
    assert "lease_token" not in overview["running"][0]
    detail: Any = locked.get(f"/api/jobs/{lease.job_id}").json
    assert detail["attempts"][0]["worker_id"] == "host:1:0"
    assert all("lease_token" not in a for a in detail["attempts"])
    found: Any = locked.get(f"/api/search?q={lease.job.item_id[:10]}").json
    assert [job["id"] for job in found["jobs"]] == [str(lease.job_id)]

    page_html = locked.get(f"/jobs/{lease.job_id}")
    assert page_html.status_code == 200
    assert "script-src 'self'" in page_html.headers["Content-Security-Policy"]
    assert str(lease.token) not in page_html.get_data(as_text=True)
    assert locked.get("/").status_code == 200
    assert locked.get("/static/dashboard.js").status_code == 200
    assert locked.get("/static/../settings.py").status_code == 404


def test_no_secret_in_any_page_or_answer(engine: Engine, repo: JobRepository) -> None:
    register_secrets([PASSWORD, SECRET])
    try:
        client = make_client(engine, PASSWORD)
        ok = {"X-CSRF-Token": log_in(client)}
        job = repo.enqueue([ITEM])[0].job
        lease = repo.claim_next("w:1:0")
        assert lease is not None
        repo.mark_failed(lease.job_id, lease.token, f"S3 said no to key {SECRET}")
        bodies = [
            client.get(path).get_data(as_text=True)
            for path in ("/", f"/jobs/{job.id}", "/api/overview", f"/api/jobs/{job.id}")
        ]
        bodies.append(
            client.post("/api/enqueue", json={"item_id": ITEM}, headers=ok).get_data(as_text=True)
        )
        for body in bodies:
            assert SECRET not in body and PASSWORD not in body
        assert any("S3 said no" in body for body in bodies)
    finally:
        forget_secrets()
