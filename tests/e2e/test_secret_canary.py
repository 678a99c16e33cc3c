"""Canary secrets: run fault scenarios with recognisable secret values, find them nowhere.

Every secret a deployment configures (Jellyfin API key, S3 secret key, database
password, webhook secret) starts with CANARY here, and the API key arrives with a CRLF
as a `.env` file written on Windows gives it. After the faults, the job rows, the attempt
history, the worker's and the server's logs, `mirror show`, `mirror jobs`, `/metrics`
and every HTTP answer of `mirror serve` are searched for them.
"""

from __future__ import annotations

import json
import re
import secrets
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from mirror.demo.media import SampleMedia
from mirror.demo.seaweedfs import SeaweedServer
from mirror.demo.stand_in.server import JellyfinStandIn
from tests.fixtures import launcher
from tests.fixtures.s3 import DUMMY_KEY, S3Target
from tests.fixtures.stack import FAST_FAULTS, Stack

CANARY = "CANARY"
API_KEY = f"{CANARY}jf{secrets.token_hex(8)}"
S3_SECRET = f"{CANARY}s3{secrets.token_hex(8)}"
DB_PASSWORD = f"{CANARY}db{secrets.token_hex(8)}"
WEBHOOK_SECRET = f"{CANARY}wh{secrets.token_hex(8)}"
UNKNOWN_ITEM = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def jellyfin() -> Iterator[JellyfinStandIn]:
    """The stand-in accepts only the canary API key (overrides the shared fixture)."""
    with JellyfinStandIn(api_key=API_KEY) as standin:
        yield standin


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[S3Target]:
    """SeaweedFS that accepts only the canary secret key (overrides the shared fixture:
    a real S3 server checks the signature, so the workers must sign with the canary)."""
    server = SeaweedServer(
        tmp_path / "seaweedfs", access_key_id=DUMMY_KEY, secret_access_key=S3_SECRET
    )
    server.start()
    try:
        target = S3Target(
            endpoint_url=server.endpoint_url, bucket="canary", secret_access_key=S3_SECRET
        )
        target.create_bucket()
        yield target
    finally:
        server.stop()


@pytest.fixture
def canary_stack(stack: Stack) -> Stack:
    """The stack configured with canary secrets; Postgres trusts, so any password works."""
    url = make_url(stack.database_url).set(password=DB_PASSWORD)
    stack.settings.update(FAST_FAULTS)
    stack.settings.update(
        {
            "MIRROR_DATABASE_URL": url.render_as_string(hide_password=False),
            "MIRROR_JELLYFIN_API_KEY": f"{API_KEY}\r\n",
            "MIRROR_S3_SECRET_ACCESS_KEY": f"{S3_SECRET}\n",
            "MIRROR_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "MIRROR_MAX_ATTEMPTS": "1",  # so --burst ends with every job settled
        }
    )
    return stack


def stored_text(stack: Stack) -> str:
    """Every job row and attempt row, as text."""
    with stack.repo.engine.connect() as conn:
        return str(
            conn.execute(
                text(
                    "SELECT coalesce((SELECT string_agg(j::text, E'\\n') FROM media_mirror.jobs j),"
                    " '') || coalesce((SELECT string_agg(a::text, E'\\n') "
                    "FROM media_mirror.job_attempts a), '')"
                )
            ).scalar_one()
        )


def serve_answers(stack: Stack, log_path: Path) -> list[str]:
    """Start `mirror serve`, ask it everything a stranger and Jellyfin would; the answers."""
    server = launcher.launch(["serve", "--port", "0"], stack.env(), log_path)
    try:
        match = stack.wait_for(
            lambda: re.search(r"serving on (http://\S+:\d+)", log_path.read_text()), 30, "serve"
        )
        answers: list[httpx.Response] = []
        with httpx.Client(base_url=match.group(1), timeout=30) as client:
            answers.append(client.get("/healthz"))
            answers.append(client.get("/metrics"))
            answers.append(client.get("/nowhere"))
            answers.append(client.post("/hooks/jellyfin", content="{}"))
            hook = {"X-Mirror-Secret": WEBHOOK_SECRET}
            answers.append(client.post("/hooks/jellyfin", content="[1", headers=hook))
            added = {"NotificationType": "ItemAdded", "ItemType": "Movie", "ItemId": UNKNOWN_ITEM}
            answers.append(client.post("/hooks/jellyfin", content=json.dumps(added), headers=hook))
            answers.append(client.post("/hooks/jellyfin", content="[" * 60_000, headers=hook))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    assert answers[0].status_code == 200 and answers[1].status_code == 200
    assert "mirror_jobs{" in answers[1].text
    assert [r.status_code for r in answers[2:]] == [404, 401, 400, 202, 400]
    return [f"{r.status_code} {r.headers} {r.text}" for r in answers]


def test_canary_secrets_appear_nowhere_after_the_fault_scenarios(
    canary_stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    stack = canary_stack
    good = stack.add_sample(sample_h264_aac, name="Good")
    refused = stack.add_sample(sample_h264_aac, name="Refused")
    broken = stack.add_sample(sample_h264_aac, name="Broken")
    looping = stack.add_sample(sample_h264_aac, name="Looping")
    stack.jellyfin.fail_next(503, retry_after=1, path_prefix="/Items")
    stack.jellyfin.fail_next(500, path_prefix=f"/Items/{good}/Download")
    stack.jellyfin.cut_after(sample_h264_aac.size // 2)
    stack.jellyfin.fail_next(401, path_prefix=f"/Items/{refused}/Download")
    stack.jellyfin.fail_next(502, times=100, path_prefix=f"/Items/{broken}/Download")
    stack.jellyfin.fail_next(302, times=1000, path_prefix=f"/Items/{looping}/Download")
    started = time.monotonic()
    stack.enqueue(good, refused, broken, looping, UNKNOWN_ITEM)
    worker = stack.mirror("worker", "--burst", "--concurrency", "2", timeout=240)
    assert worker.returncode == 0, worker.stderr[-3000:]
    print(f"worker: {time.monotonic() - started:.1f}s")

    outcomes = {
        item: (stack.job(item).status, stack.job(item).error)
        for item in (good, refused, broken, looping, UNKNOWN_ITEM)
    }
    assert outcomes[good][0] == "done"
    assert outcomes[refused] == ("failed", "Jellyfin rejected the API key (401)")
    assert outcomes[broken][0] == "failed" and "502" in (outcomes[broken][1] or "")
    assert outcomes[looping] == (
        "failed",
        f"Jellyfin redirected GET /Items/{looping}/Download more than 20 times (a redirect "
        "loop): check MIRROR_JELLYFIN_URL (http or https, the base path, a proxy's rules)",
    )
    assert "Traceback" not in worker.stderr
    assert outcomes[UNKNOWN_ITEM] == ("failed", f"item {UNKNOWN_ITEM} not found in Jellyfin")

    seen: dict[str, str] = {
        "rows": stored_text(stack),
        "worker log": worker.stdout + worker.stderr,
    }
    # What people read, each in its own process as they would run it (a process starts
    # with no secret registered for masking); a few at a time, they wait on Postgres.
    reads = [
        ("show", item, *form)
        for item in (good, refused, broken, looping, UNKNOWN_ITEM)
        for form in ((), ("--json",))
    ]
    reads.append(("jobs", "--json"))
    with ThreadPoolExecutor(max_workers=4) as pool:
        for args, shown in zip(reads, pool.map(lambda a: stack.mirror(*a), reads), strict=True):
            assert shown.returncode == 0, shown.stderr
            seen[" ".join(args)] = shown.stdout + shown.stderr
    seen["serve answers"] = "\n".join(serve_answers(stack, tmp_path / "serve.log"))
    seen["serve log"] = (tmp_path / "serve.log").read_text()
    # One-line refusals of bad settings: they name the variable, never the value.
    refusals = {
        "psycopg2 URL": {"MIRROR_DATABASE_URL": f"postgresql+psycopg2://u:{DB_PASSWORD}@db/x"},
        "bad port": {"MIRROR_DATABASE_URL": f"postgresql://u:{DB_PASSWORD}@db:54x/x"},
        "control char": {"MIRROR_JELLYFIN_API_KEY": f"{API_KEY}\x07"},
        "non-ASCII": {"MIRROR_S3_SECRET_ACCESS_KEY": f"{S3_SECRET}é"},
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = pool.map(lambda env: stack.mirror("worker", "--burst", **env), refusals.values())
        for name, refused_run in zip(refusals, runs, strict=True):
            assert refused_run.returncode == 2, refused_run.stderr
            assert len(refused_run.stderr.splitlines()) == 1, refused_run.stderr
            seen[f"refusal: {name}"] = refused_run.stdout + refused_run.stderr

    leaks = {where: text for where, text in seen.items() if CANARY in text}
    assert not leaks, {
        where: text[text.index(CANARY) - 200 :][:400] for where, text in leaks.items()
    }
    print({where: len(text) for where, text in seen.items()})
