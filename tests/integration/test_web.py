"""`mirror serve`'s app over real HTTP (waitress on 127.0.0.1, port 0) and real Postgres."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine
from waitress import wasyncore
from waitress.server import create_server

from mirror.converge.delete_guard import NO_LIMIT
from mirror.db.attempt_log import AttemptLog
from mirror.db.engine import make_engine
from mirror.db.removals import Removals
from mirror.db.repository import JobRepository
from mirror.db.stats import QueueStats
from mirror.domain.jobs import AttemptStats, Mirrored
from mirror.web.removed_items import item_remover
from mirror.web.serve import MAX_BODY_BYTES, MirrorWeb, WebhookPolicy
from tests.fixtures.s3 import S3Target

SECRET = "correct horse battery staple"
MOVIE = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
MOVIE_DASHED = "A3F4C2E1-B5D6-4E0F-9C8B-7A6D5E4F3A21"


@dataclass
class Served:
    client: httpx.Client
    repo: JobRepository


@pytest.fixture
def serve_app() -> Iterator[Any]:
    """Start waitress with an app in a thread; every server started is stopped afterwards."""
    stops: list[Any] = []

    def start(engine: Engine, **policy: Any) -> httpx.Client:
        remover = policy.pop("remover", None)
        web = MirrorWeb(
            JobRepository(engine),
            QueueStats(engine),
            WebhookPolicy(secret=SECRET, item_types=("Movie", "Episode"), **policy),
            remover,
        )
        sockets: dict[int, Any] = {}
        server = create_server(web, map=sockets, host="127.0.0.1", port=0, threads=2)
        stopping = threading.Event()

        def loop() -> None:
            while not stopping.is_set():
                wasyncore.loop(timeout=0.05, map=sockets, count=1)

        thread = threading.Thread(target=loop, name="waitress", daemon=True)
        thread.start()
        client = httpx.Client(base_url=f"http://127.0.0.1:{server.effective_port}", timeout=30)

        def stop() -> None:
            client.close()
            stopping.set()
            thread.join(timeout=10)
            server.task_dispatcher.shutdown()
            wasyncore.close_all(sockets)

        stops.append(stop)
        return client

    yield start
    for stop in stops:
        stop()


@pytest.fixture
def served(serve_app: Any, engine: Engine) -> Served:
    return Served(client=serve_app(engine), repo=JobRepository(engine))


def _hook(served: Served, body: Any, secret: str | None = SECRET, **kwargs: Any) -> httpx.Response:
    headers = {"X-Mirror-Secret": secret} if secret is not None else {}
    headers.update(kwargs.pop("headers", {}))
    content = body if isinstance(body, str | bytes) else json.dumps(body)
    return served.client.post("/hooks/jellyfin", content=content, headers=headers, **kwargs)


def _added(item_id: str = MOVIE_DASHED, item_type: str = "Movie") -> dict[str, str]:
    return {"NotificationType": "ItemAdded", "ItemId": item_id, "ItemType": item_type, "Name": "X"}


# -- health ------------------------------------------------------------------------------


def test_healthz_is_ok_when_postgres_answers(served: Served) -> None:
    response = served.client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


def test_healthz_is_503_naming_the_problem_when_postgres_is_unreachable(serve_app: Any) -> None:
    unreachable = make_engine("postgresql+psycopg://postgres:hunter2@127.0.0.1:1/nothing")
    try:
        response = serve_app(unreachable).get("/healthz")
    finally:
        unreachable.dispose()
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["database"].startswith("cannot query Postgres:")
    assert "hunter2" not in response.text


def test_healthz_is_503_before_migrations(serve_app: Any, empty_database_url: str) -> None:
    bare = make_engine(empty_database_url)
    try:
        response = serve_app(bare).get("/healthz")
    finally:
        bare.dispose()
    assert response.status_code == 503
    assert "mirror db upgrade" in response.json()["database"]


# -- metrics -----------------------------------------------------------------------------


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _wait_for_stale_rescue(repo: JobRepository) -> None:
    import time

    deadline = time.monotonic() + 10
    while not repo.return_stale_to_new(0.01):
        assert time.monotonic() < deadline, "the claimed job never became stale"
        time.sleep(0.02)


def test_metrics_show_jobs_by_status_and_attempt_figures(served: Served, engine: Engine) -> None:
    repo, history = served.repo, AttemptLog(engine)
    items = [f"{n:032x}" for n in range(1, 5)]
    jobs = {r.job.item_id: r.job for r in repo.enqueue(items)}
    done = repo.claim_next("host:1:0")
    assert done is not None
    repo.mark_done(done.job_id, done.token, Mirrored(video_key="v", audio_keys=[]))
    history.end_attempt(
        done.token,
        "done",
        None,
        AttemptStats(
            heartbeat_writes=5,
            bytes_downloaded=1000,
            bytes_uploaded=800,
            download_s=2.0,
            transcode_s=30.0,
            upload_s=1.0,
        ),
    )
    assert repo.claim_next("host:1:0") is not None
    _wait_for_stale_rescue(repo)  # the second claim's worker "died"
    running = repo.claim_next("host:2:0")
    assert running is not None
    repo.cancel(jobs[items[3]].id)

    response = served.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text)

    def value(name: str, **labels: str) -> float:
        return samples[(name, frozenset(labels.items()))]

    by_status = {s: value("mirror_jobs", status=s) for s in ("new", "processing", "done")}
    assert by_status == {"new": 1, "processing": 1, "done": 1}
    assert value("mirror_jobs", status="failed") == 0
    assert value("mirror_jobs", status="cancelled") == 1
    assert value("mirror_claims_total") == 3
    assert value("mirror_stale_rescues_total") == 1
    assert value("mirror_attempts_by_outcome_total", outcome="done") == 1
    assert value("mirror_attempts_by_outcome_total", outcome="stale") == 1
    assert value("mirror_heartbeat_writes_total") == 5
    assert value("mirror_bytes_downloaded_total") == 1000
    assert value("mirror_bytes_uploaded_total") == 800
    # Bucket bounds are inclusive: 1.0 s is within le=1.0, 30 s within le=30.0.
    assert value("mirror_phase_seconds_bucket", phase="upload", le="1.0") == 1
    assert value("mirror_phase_seconds_bucket", phase="transcode", le="15.0") == 0
    assert value("mirror_phase_seconds_bucket", phase="transcode", le="30.0") == 1
    assert value("mirror_phase_seconds_bucket", phase="download", le="1.0") == 0
    assert value("mirror_phase_seconds_bucket", phase="download", le="+Inf") == 1
    assert value("mirror_phase_seconds_count", phase="download") == 1
    assert value("mirror_phase_seconds_sum", phase="transcode") == 30.0
    age = value(
        "mirror_job_heartbeat_age_seconds",
        job=str(running.job_id),
        item=running.job.item_id,
        worker="host:2:0",
    )
    assert 0 <= age < 60
    assert value("mirror_job_heartbeat_age_max_seconds") == pytest.approx(age, abs=1)
    assert value("mirror_jobs_due") == 1
    assert value("mirror_database_up") == 1


def test_metrics_of_an_empty_queue_are_zeros(served: Served) -> None:
    samples = _samples(served.client.get("/metrics").text)
    statuses = {
        dict(labels)["status"]: value
        for (name, labels), value in samples.items()
        if name == "mirror_jobs"
    }
    assert statuses == {
        "new": 0, "processing": 0, "done": 0, "failed": 0, "cancelled": 0, "removed": 0,
    }  # fmt: skip
    assert samples[("mirror_claims_total", frozenset())] == 0
    assert samples[("mirror_phase_seconds_count", frozenset({("phase", "upload")}))] == 0


def test_metrics_say_database_down_instead_of_failing_the_scrape(serve_app: Any) -> None:
    unreachable = make_engine("postgresql+psycopg://postgres@127.0.0.1:1/nothing")
    try:
        response = serve_app(unreachable).get("/metrics")
    finally:
        unreachable.dispose()
    assert response.status_code == 200
    assert _samples(response.text) == {("mirror_database_up", frozenset()): 0}


# -- the Jellyfin webhook ----------------------------------------------------------------


@pytest.mark.parametrize("secret", [None, "", "wrong", SECRET + "x"])
def test_webhook_without_the_right_secret_is_401_and_queues_nothing(
    served: Served, secret: str | None
) -> None:
    response = _hook(served, _added(), secret=secret)
    assert response.status_code == 401
    assert "X-Mirror-Secret" in response.json()["error"]
    assert served.repo.list() == []


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        ("[1, 2]", "JSON object"),
        ({"NotificationType": "ItemAdded", "ItemType": "Movie"}, "ItemId is missing"),
        (_added(item_id="1234"), "not a Jellyfin item id"),
        (_added(item_id="../../etc/passwd"), "not a Jellyfin item id"),
        ({"NotificationType": "ItemAdded", "ItemId": MOVIE}, "ItemType is missing"),
        ({**_added(), "ItemId": 42}, "ItemId must be a string"),
    ],
)
def test_webhook_bad_body_is_400_and_queues_nothing(
    served: Served, body: Any, problem: str
) -> None:
    response = _hook(served, body)
    assert response.status_code == 400
    assert problem in response.json()["error"]
    assert served.repo.list() == []


def test_webhook_item_added_queues_the_item_by_its_plain_id(served: Served) -> None:
    response = _hook(served, _added(MOVIE_DASHED))
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued" and body["item_id"] == MOVIE
    job = served.repo.latest_for_item(MOVIE)
    assert str(job.id) == body["job_id"] and job.status == "new"


def test_duplicate_deliveries_return_the_queued_job(served: Served) -> None:
    first = _hook(served, _added(MOVIE_DASHED)).json()
    again = _hook(served, _added(MOVIE)).json()  # "send all properties" sends 32 hex
    assert again == {**first, "status": "already queued"}
    assert len(served.repo.list()) == 1


def test_an_item_mirrored_already_is_not_queued_again(served: Served) -> None:
    served.repo.enqueue([MOVIE])
    lease = served.repo.claim_next("host:1:0")
    assert lease is not None
    served.repo.mark_done(lease.job_id, lease.token, Mirrored(video_key="v", audio_keys=[]))
    response = _hook(served, _added(MOVIE_DASHED))
    assert response.status_code == 202
    assert response.json() == {"status": "already mirrored", "item_id": MOVIE}
    assert [job.status for job in served.repo.list()] == ["done"]


@pytest.mark.parametrize(
    "body",
    [
        {**_added(), "NotificationType": "PlaybackStart"},
        {"NotificationType": "UserCreated"},  # no item at all: still fine
        _added(item_type="Series"),
        _added(item_type="Season"),
    ],
)
def test_other_notifications_and_item_types_are_ignored(served: Served, body: Any) -> None:
    response = _hook(served, body)
    assert response.status_code == 202
    assert response.json()["status"] == "ignored"
    assert served.repo.list() == []


@pytest.mark.parametrize(
    "content_type", ["text/plain; charset=utf-8", "application/json", "text/html"]
)
def test_webhook_reads_json_whatever_the_content_type(served: Served, content_type: str) -> None:
    response = _hook(served, _added(item_type="Episode"), headers={"Content-Type": content_type})
    assert response.status_code == 202 and response.json()["status"] == "queued"


def test_huge_body_is_413(served: Served) -> None:
    body = json.dumps({**_added(), "Overview": "x" * (MAX_BODY_BYTES + 1)})
    response = _hook(served, body)
    assert response.status_code == 413
    assert "larger than" in response.json()["error"]
    assert served.repo.list() == []


def test_wrong_method_and_unknown_path_answer_json(served: Served) -> None:
    wrong_method = served.client.get("/hooks/jellyfin")
    assert wrong_method.status_code == 405
    assert wrong_method.headers["allow"] == "POST"
    missing = served.client.get("/nothing")
    assert missing.status_code == 404 and missing.json() == {"error": "not found"}


# -- ItemDeleted ---------------------------------------------------------------------------


def _deleted(item_id: str = MOVIE_DASHED) -> dict[str, str]:
    return {"NotificationType": "ItemDeleted", "ItemId": item_id, "ItemType": "Movie"}


def _mirrored(repo: JobRepository, s3: S3Target) -> list[str]:
    """MOVIE done, with its objects under mirror/<id>/; returns their keys."""
    keys = [f"mirror/{MOVIE}/video.mp4", f"mirror/{MOVIE}/manifest.json"]
    for key in keys:
        s3.client.put_object(Bucket=s3.bucket, Key=key, Body=b"x")
    repo.enqueue([MOVIE])
    lease = repo.claim_next("host:1:0")
    assert lease is not None
    repo.mark_done(lease.job_id, lease.token, Mirrored(video_key=keys[0], audio_keys=[]))
    return keys


def _keys(s3: S3Target) -> list[str]:
    return [o["Key"] for o in s3.client.list_objects_v2(Bucket=s3.bucket).get("Contents", [])]


def _gone(item_id: str) -> bool:
    """Jellyfin no longer has the item (the check itself: test_webhook_item_deleted.py)."""
    return False


def test_item_deleted_is_only_noted_and_counted_by_default(
    serve_app: Any, engine: Engine, s3: S3Target
) -> None:
    repo = JobRepository(engine)
    remover = item_remover(Removals(engine), _gone)
    client = serve_app(engine, remover=remover)  # delete_removed is off
    keys = _mirrored(repo, s3)
    response = _hook(Served(client, repo), _deleted())
    assert response.status_code == 202
    assert response.json()["status"] == "removal noted"
    assert sorted(_keys(s3)) == sorted(keys)
    assert [job.status for job in repo.list()] == ["done"]
    assert 'mirror_webhook_item_deleted_total{action="noted"} 1.0' in client.get("/metrics").text


def test_item_deleted_with_delete_removed_marks_removed_and_keeps_the_objects(
    serve_app: Any, engine: Engine, s3: S3Target
) -> None:
    repo = JobRepository(engine)
    # One mirrored item is 100 % of the mirror: over the default limit (see
    # test_webhook_item_deleted.py); no limit here.
    remover = item_remover(Removals(engine), _gone, NO_LIMIT)
    client = serve_app(engine, remover=remover, delete_removed=True)
    keys = _mirrored(repo, s3)
    response = _hook(Served(client, repo), _deleted())
    assert response.json()["status"] == "removed"
    assert "MIRROR_DELETE_GRACE" in response.json()["reason"]
    assert sorted(_keys(s3)) == sorted(keys)  # deleted by `mirror sync --delete`, later
    assert [job.status for job in repo.list()] == ["removed"]
    again = _hook(Served(client, repo), _deleted())
    assert again.json() == {"status": "already removed", "item_id": MOVIE}
