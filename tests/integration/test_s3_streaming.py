"""StreamingUpload against SeaweedFS: small files by one PUT, memory in flight bounded."""

from __future__ import annotations

import hashlib
import os
import threading
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

from mirror.domain.objects import Upload
from mirror.domain.progress import AbortSignal, Progress
from mirror.s3.storage import AUDIO_CONTENT_TYPE, VIDEO_CONTENT_TYPE, MiB
from tests.fixtures.s3 import S3Target

ITEM = "0123456789abcdef0123456789abcdef"


def _ignore(_progress: Progress) -> None:
    pass


def _count_calls(target: Any) -> Counter[str]:
    """Every S3 operation the client makes, by name."""
    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def record(model: Any, **_kwargs: Any) -> None:
        with lock:
            calls[model.name] += 1

    target.client.meta.events.register("before-call.s3", record)
    return calls


def _keys(s3: S3Target) -> list[str]:
    response = s3.client.list_objects_v2(Bucket=s3.bucket)
    return sorted(obj["Key"] for obj in response.get("Contents", []))


def test_a_file_shorter_than_a_part_is_one_put_and_invisible_until_published(
    s3_checking_checksums: S3Target, tmp_path: Path
) -> None:
    s3 = s3_checking_checksums
    small, big = tmp_path / "1-eng.m4a", tmp_path / "video.mp4"
    small.write_bytes(os.urandom(300_000))
    big.write_bytes(os.urandom(5 * MiB + 4321))  # two parts of 5 MiB: a multipart upload
    storage = s3.make_storage()
    calls = _count_calls(storage)
    uploads = [
        Upload(big, f"mirror/{ITEM}/video.mp4", VIDEO_CONTENT_TYPE),
        Upload(small, f"mirror/{ITEM}/audio/1-eng.m4a", AUDIO_CONTENT_TYPE),
    ]

    with storage.stream_files(
        uploads, follow=False, on_progress=_ignore, abort=AbortSignal()
    ) as outputs:
        digests = outputs.finish()
        assert _keys(s3) == []
        # Only the big file began a multipart upload; the small one waits for publish.
        assert [key for key, _ in s3.multipart_uploads()] == [uploads[0].key]
        outputs.publish()

    assert calls["PutObject"] == 1
    assert calls["CreateMultipartUpload"] == 1
    assert calls["UploadPart"] == 2
    assert _keys(s3) == sorted(u.key for u in uploads)
    assert s3.multipart_uploads() == []
    for upload in uploads:
        stored = s3.client.get_object(Bucket=s3.bucket, Key=upload.key, ChecksumMode="ENABLED")
        body = stored["Body"].read()
        assert body == upload.path.read_bytes()
        assert stored["ContentType"] == upload.content_type
        assert digests[upload.key].size == len(body)
        assert digests[upload.key].sha256 == hashlib.sha256(body).hexdigest()
    small_head = s3.client.head_object(Bucket=s3.bucket, Key=uploads[1].key, ChecksumMode="ENABLED")
    assert small_head.get("ChecksumCRC32")  # the PUT carried the CRC32 S3 checked


def test_a_small_file_left_unpublished_never_becomes_visible(s3: S3Target, tmp_path: Path) -> None:
    small = tmp_path / "1-eng.m4a"
    small.write_bytes(os.urandom(1000))
    storage = s3.make_storage()
    upload = Upload(small, f"mirror/{ITEM}/audio/1-eng.m4a", AUDIO_CONTENT_TYPE)
    with storage.stream_files(
        [upload], follow=True, on_progress=_ignore, abort=AbortSignal()
    ) as outputs:
        outputs.finish()  # e.g. verify fails after this: no publish
    assert _keys(s3) == []
    assert s3.multipart_uploads() == []


def test_bytes_held_in_flight_stay_below_one_part(s3: S3Target, tmp_path: Path) -> None:
    """Parts go up as ranges of the file, not as copies in memory: with 16 MiB parts and
    four request threads, the upload's peak Python allocations stay under 8 MiB (parts
    held as bytes would hold up to (4 + 2) x 16 MiB). SeaweedFS runs in a process of its
    own, so only the client's allocations are traced."""
    video = tmp_path / "video.mp4"
    size = 80 * MiB + 123
    with video.open("wb") as file:
        for _ in range(80):
            file.write(os.urandom(MiB))
        file.write(os.urandom(123))
    storage = s3.make_storage(part_size=16 * MiB, max_concurrency=4)
    upload = Upload(video, f"mirror/{ITEM}/video.mp4", VIDEO_CONTENT_TYPE)

    tracemalloc.start()
    try:
        with storage.stream_files(
            [upload], follow=True, on_progress=_ignore, abort=AbortSignal()
        ) as outputs:
            digests = outputs.finish()
            outputs.publish()
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak < 8 * MiB, f"peak {peak / MiB:.1f} MiB"
    head = s3.client.head_object(Bucket=s3.bucket, Key=upload.key)
    assert head["ContentLength"] == size
    assert digests[upload.key].size == size
    sha = hashlib.sha256(video.read_bytes()).hexdigest()
    assert digests[upload.key].sha256 == sha
