"""A real worker records, for every output, the size and SHA-256 of what S3 now holds."""

from __future__ import annotations

import hashlib
import json
import re

from mirror.testing.media import SampleMedia
from tests.fixtures.stack import Stack


def test_done_row_and_show_carry_size_and_sha256_of_every_stored_object(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item = stack.add_sample(sample_h264_aac, "Integrity Sample")
    assert stack.mirror("enqueue", item).returncode == 0

    result = stack.mirror("worker", "--burst")

    assert result.returncode == 0, result.stderr[-3000:]
    job = stack.job(item)
    assert job.status == "done", job.error
    assert job.video is not None and job.audio_keys is not None
    assert job.video["key"] == job.video_key
    outputs = [job.video, *job.audio_keys]
    audio_streams = [s for s in sample_h264_aac.streams if s.type == "Audio"]
    assert len(outputs) == 1 + len(audio_streams)
    for entry in outputs:
        body = stack.s3.client.get_object(Bucket=stack.s3.bucket, Key=entry["key"])["Body"].read()
        assert re.fullmatch("[0-9a-f]{64}", entry["sha256"])
        assert (entry["size"], entry["sha256"]) == (len(body), hashlib.sha256(body).hexdigest())

    shown = stack.mirror("show", item)
    assert shown.returncode == 0, shown.stderr
    for entry in outputs:
        # Whole: rich may wrap a long line before the hash, never inside it.
        assert entry["sha256"] in shown.stdout

    as_json = json.loads(stack.mirror("show", item, "--json").stdout)
    assert {k: as_json["video"][k] for k in ("key", "size", "sha256")} == {
        k: job.video[k] for k in ("key", "size", "sha256")
    }
    assert [(a["key"], a["size"], a["sha256"]) for a in as_json["audio_keys"]] == [
        (a["key"], a["size"], a["sha256"]) for a in job.audio_keys
    ]
