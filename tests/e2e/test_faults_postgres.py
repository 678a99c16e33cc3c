"""Postgres going away at the worst moment: the outputs are in S3, only `done` is missing."""

from __future__ import annotations

import time

from mirror.db.attempts import AttemptLog
from mirror.testing.media import SampleMedia
from tests.fixtures.stack import Stack, phase_of
from tests.fixtures.tcp_proxy import TcpProxy, proxied_url

OUTAGE_S = 6.0


def test_postgres_down_around_the_end_of_the_upload_still_ends_in_one_done_attempt(
    stack: Stack, pg_proxy: TcpProxy, s3_proxy: TcpProxy, sample_large_h264: SampleMedia
) -> None:
    item = stack.add_sample(sample_large_h264)
    stack.mirror("enqueue", item)
    s3_proxy.throttle(2_000_000)  # an upload of a few seconds, to go down in the middle
    worker = stack.start_worker(
        "--burst",
        name="a",
        MIRROR_DATABASE_URL=proxied_url(stack.database_url, pg_proxy),
        MIRROR_S3_ENDPOINT_URL=s3_proxy.url,
        MIRROR_STALE_TIMEOUT="30s",  # the lease outlasts the outage
        MIRROR_HEARTBEAT_INTERVAL="500ms",
    )
    stack.wait_for(lambda: phase_of(stack, item) == "upload", 120, "the upload")
    pg_proxy.go_down()
    down_at = time.monotonic()
    stack.wait_for(lambda: len(stack.object_keys()) == 3, 120, "every output in S3")
    # mark_done met the outage (the retry line), with every output already uploaded
    stack.wait_for(
        lambda: "database unavailable" in stack.log_of("a"), 30, "mark_done meeting the outage"
    )
    stack.wait_for(lambda: time.monotonic() - down_at >= OUTAGE_S, 30, "the outage to last")
    pg_proxy.come_back()
    assert worker.wait(timeout=120) == 0, stack.log_of("a")[-3000:]
    job = stack.job(item)
    assert (job.status, job.attempts) == ("done", 1), job.error
    history = AttemptLog(stack.repo.engine).attempts_of(job.id)
    assert [attempt.outcome for attempt in history] == ["done"]
    assert len(stack.object_keys()) == 3
    assert "Traceback" not in stack.log_of("a")
