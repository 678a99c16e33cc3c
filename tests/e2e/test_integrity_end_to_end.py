"""A real worker records, for every output, the size and SHA-256 of what S3 now holds."""

from __future__ import annotations

import hashlib
import json
import re
import signal

from mirror.db.attempt_log import AttemptLog
from mirror.demo.media import SampleMedia
from tests.fixtures.s3 import S3Target
from tests.fixtures.stack import Stack
from tests.fixtures.tcp_proxy import TcpProxy


def assert_row_matches_s3(stack: Stack, item_id: str) -> list[dict[str, object]]:
    """Every output on the done row has the size and SHA-256 of the object S3 returns."""
    job = stack.job(item_id)
    assert job.status == "done", job.error
    assert job.video is not None and job.audio_keys is not None
    assert job.video["key"] == job.video_key
    outputs = [job.video, *job.audio_keys]
    for entry in outputs:
        body = stack.s3.client.get_object(Bucket=stack.s3.bucket, Key=entry["key"])["Body"].read()
        assert re.fullmatch("[0-9a-f]{64}", entry["sha256"])
        assert (entry["size"], entry["sha256"]) == (len(body), hashlib.sha256(body).hexdigest())
    return outputs


def test_done_row_and_show_carry_size_and_sha256_of_every_stored_object(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item = stack.add_sample(sample_h264_aac, "Integrity Sample")
    stack.enqueue(item)

    assert stack.burst_in_process() == ["done"]  # the row and the objects are the subject

    outputs = assert_row_matches_s3(stack, item)
    audio_streams = [s for s in sample_h264_aac.streams if s.type == "Audio"]
    assert len(outputs) == 1 + len(audio_streams)
    job = stack.job(item)
    assert job.video is not None and job.audio_keys is not None

    shown = stack.mirror_here("show", item)
    assert shown.returncode == 0, shown.stderr
    for entry in outputs:
        # Whole: rich may wrap a long line before the hash, never inside it.
        assert entry["sha256"] in shown.stdout

    as_json = json.loads(stack.mirror_here("show", item, "--json").stdout)
    assert {k: as_json["video"][k] for k in ("key", "size", "sha256")} == {
        k: job.video[k] for k in ("key", "size", "sha256")
    }
    assert [(a["key"], a["size"], a["sha256"]) for a in as_json["audio_keys"]] == [
        (a["key"], a["size"], a["sha256"]) for a in job.audio_keys
    ]


def test_body_damaged_on_the_way_is_refused_by_s3_and_the_retry_is_done(
    stack: Stack,
    s3_checking_checksums: S3Target,
    s3_proxy: TcpProxy,
    sample_h264_aac: SampleMedia,
) -> None:
    item = stack.add_sample(sample_h264_aac)
    stack.enqueue(item)
    s3_proxy.damage_one_body()
    worker = stack.start_worker(MIRROR_S3_ENDPOINT_URL=s3_proxy.url, MIRROR_RETRY_BACKOFF="1s")

    stack.wait_for(lambda: stack.job(item).status == "done", 120, "the retry to finish")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0

    assert s3_proxy.damaged_bodies == 1
    first, second = AttemptLog(stack.repo.engine).attempts_of(stack.job(item).id)
    assert (first.outcome, second.outcome) == ("retry", "done")
    assert first.error is not None and "BadDigest" in first.error
    assert_row_matches_s3(stack, item)
