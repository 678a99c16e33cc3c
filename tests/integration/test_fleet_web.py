"""The fleet's pause in `mirror serve`: the API and its login, the dashboard, /metrics."""

from __future__ import annotations

from datetime import time

from sqlalchemy import Engine
from werkzeug.test import Client

from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import DashboardQueries
from mirror.db.repository import JobRepository
from mirror.db.sessions import EndedSessionStore
from mirror.db.stats import QueueStats
from mirror.domain.active_hours import parse_active_hours
from mirror.domain.jobs import FleetMode
from mirror.web.api import DashboardApi
from mirror.web.auth import UiAuth
from mirror.web.serve import MirrorWeb, WebhookPolicy

PASSWORD = "hunter2-but-longer"
ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"


def make_client(
    engine: Engine, password: str | None, hours: str = "", at: time = time(12)
) -> Client:
    repo = JobRepository(engine)
    auth = UiAuth(password=password, ended=EndedSessionStore(engine))
    windows = parse_active_hours(hours)
    api = DashboardApi(
        repo,
        DashboardQueries(engine),
        AttemptLog(engine),
        auth,
        stale_timeout_s=60.0,
        active_hours=windows,
        time_of_day=lambda: at,
    )
    policy = WebhookPolicy("webhook-secret-value-1234", ("Movie",))
    web = MirrorWeb(
        repo, QueueStats(engine), policy, None, api, active_hours=windows, time_of_day=lambda: at
    )
    return Client(web)


def log_in(client: Client) -> dict[str, str]:
    response = client.post("/api/login", json={"password": PASSWORD})
    assert response.status_code == 200
    return {"X-CSRF-Token": response.json["csrf_token"]}  # type: ignore[index]


def metric(client: Client, name: str) -> str | None:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return line.split()[1]
    return None


def test_pause_drain_and_resume_need_the_login_and_the_csrf_token(
    engine: Engine, repo: JobRepository
) -> None:
    read_only = make_client(engine, None)
    assert read_only.get("/api/fleet").json["fleet"]["mode"] == "running"  # type: ignore[index]
    assert read_only.post("/api/fleet/pause", json={}).status_code == 403
    assert read_only.post("/api/fleet/resume", json={}).status_code == 403

    locked = make_client(engine, PASSWORD)
    assert locked.get("/api/fleet").status_code == 401
    assert locked.post("/api/fleet/pause", json={}).status_code == 401
    ok = log_in(locked)
    assert locked.post("/api/fleet/pause", json={}).status_code == 403  # no CSRF token
    cross_site = {**ok, "Origin": "https://evil.example"}
    assert locked.post("/api/fleet/pause", json={}, headers=cross_site).status_code == 403
    assert repo.fleet_state().mode is FleetMode.RUNNING

    repo.enqueue([ITEM])
    paused = locked.post("/api/fleet/pause", json={"reason": "disk swap"}, headers=ok)
    assert paused.status_code == 200
    answer = paused.json
    assert answer["changed"] is True  # type: ignore[index]
    assert answer["message"] == "paused: nothing running, 1 queued wait"  # type: ignore[index]
    assert answer["fleet"]["paused"] is True and answer["fleet"]["reason"] == "disk swap"  # type: ignore[index]
    state = repo.fleet_state()
    assert state.mode is FleetMode.PAUSED and (state.changed_by or "").startswith("dashboard")

    drained = locked.post("/api/fleet/pause", json={"drain": True}, headers=ok)
    assert drained.json["fleet"]["mode"] == "draining"  # type: ignore[index]
    bad = locked.post("/api/fleet/pause", json={"drain": "yes"}, headers=ok)
    assert bad.status_code == 400
    resumed = locked.post("/api/fleet/resume", json={}, headers=ok)
    assert resumed.status_code == 200 and repo.fleet_state().mode is FleetMode.RUNNING


def test_the_dashboard_shows_the_state_with_its_buttons(
    engine: Engine, repo: JobRepository
) -> None:
    client = make_client(engine, PASSWORD)
    log_in(client)
    repo.set_fleet_mode(FleetMode.DRAINING, changed_by="alice@host", reason="kernel update")
    page = client.get("/").text
    for button in ('id="fleet-pause"', 'id="fleet-drain"', 'id="fleet-resume"'):
        assert button in page
    assert 'data-mode="draining"' in page and "kernel update" in page
    overview = client.get("/api/overview").json["fleet"]  # type: ignore[index]
    assert (overview["mode"], overview["changed_by"]) == ("draining", "alice@host")
    assert "fleet draining" in overview["banner"]


def test_metrics_say_paused_draining_and_whether_the_active_hours_are_open(
    engine: Engine, repo: JobRepository
) -> None:
    client = make_client(engine, None)
    assert (metric(client, "mirror_paused"), metric(client, "mirror_draining")) == ("0.0", "0.0")
    assert metric(client, "mirror_active_hours_open") is None  # not set for this process
    repo.set_fleet_mode(FleetMode.PAUSED, changed_by="t")
    assert (metric(client, "mirror_paused"), metric(client, "mirror_draining")) == ("1.0", "0.0")
    repo.set_fleet_mode(FleetMode.DRAINING, changed_by="t")
    assert (metric(client, "mirror_paused"), metric(client, "mirror_draining")) == ("0.0", "1.0")

    night = make_client(engine, None, hours="22:00-06:00", at=time(23, 30))
    assert metric(night, "mirror_active_hours_open") == "1.0"
    day = make_client(engine, None, hours="22:00-06:00", at=time(12, 0))
    assert metric(day, "mirror_active_hours_open") == "0.0"
    overview = day.get("/api/fleet").json["fleet"]  # type: ignore[index]
    assert (overview["active_hours"], overview["active_hours_open"]) == ("22:00-06:00", False)
