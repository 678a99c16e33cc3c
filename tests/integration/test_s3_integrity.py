"""What S3Storage proves about what it uploaded: size and SHA-256 of each object as read
for the upload, and a per-part checksum that lets S3 turn down a damaged part."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ConnectionClosedError

from mirror.domain.errors import TransientError
from mirror.domain.objects import FileDigest, Upload
from mirror.domain.progress import AbortSignal, Progress
from mirror.s3.storage import AUDIO_CONTENT_TYPE, VIDEO_CONTENT_TYPE, MiB
from tests.fixtures.s3 import S3Target
from tests.fixtures.s3_checksums import damage_part

if TYPE_CHECKING:
    from botocore.awsrequest import AWSPreparedRequest
    from mypy_boto3_s3 import S3Client

BIG_SIZE = 12 * MiB + 12345  # three 5 MiB parts, the last one short
SMALL_SIZE = 300_000  # one PutObject


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> list[Upload]:
    folder = tmp_path_factory.mktemp("outputs")
    video, audio = folder / "video.mp4", folder / "1-eng.m4a"
    video.write_bytes(os.urandom(BIG_SIZE))
    audio.write_bytes(os.urandom(SMALL_SIZE))
    return [
        Upload(video, "m/item/video.mp4", VIDEO_CONTENT_TYPE),
        Upload(audio, "m/item/audio/1-eng.m4a", AUDIO_CONTENT_TYPE),
    ]


def _ignore(progress: Progress) -> None:
    pass


def _stored_digest(s3: S3Target, key: str) -> FileDigest:
    body = s3.client.get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    return FileDigest(len(body), hashlib.sha256(body).hexdigest())


def _record_sends(client: S3Client) -> list[tuple[str, dict[str, str]]]:
    """(operation, checksum headers) of every request the client sends."""
    sent: list[tuple[str, dict[str, str]]] = []

    def record(request: AWSPreparedRequest, event_name: str, **kwargs: Any) -> None:
        headers = {
            name.lower(): value.decode() if isinstance(value, bytes) else str(value)
            for name, value in request.headers.items()
            if name.lower().startswith(("x-amz-checksum", "x-amz-sdk-checksum"))
        }
        sent.append((event_name.rsplit(".", 1)[-1], headers))

    client.meta.events.register("before-send.s3.*", record)
    return sent


def _drop_first_send(client: S3Client, operation: str, *, after_bytes: int) -> Callable[[], int]:
    """Fail the first send of `operation` like a dropped connection, once `after_bytes`
    of its body were read: botocore retries, rewinding the body it already read from."""
    lock = threading.Lock()
    dropped = 0

    def drop(request: AWSPreparedRequest, **kwargs: Any) -> None:
        nonlocal dropped
        with lock:
            if dropped:
                return
            dropped += 1
        body = request.body
        assert body is not None and not isinstance(body, str | bytes | bytearray)
        body.read(after_bytes)
        raise ConnectionClosedError(endpoint_url=request.url)

    client.meta.events.register(f"before-send.s3.{operation}", drop)
    return lambda: dropped


def test_upload_returns_size_and_sha256_of_each_stored_object(
    s3: S3Target, outputs: list[Upload]
) -> None:
    storage = s3.make_storage()

    digests = storage.upload_files(outputs, on_progress=_ignore, abort=AbortSignal())

    assert set(digests) == {upload.key for upload in outputs}
    for upload in outputs:
        assert digests[upload.key] == _stored_digest(s3, upload.key)
        assert digests[upload.key].size == upload.path.stat().st_size
        assert digests[upload.key].sha256 == hashlib.sha256(upload.path.read_bytes()).hexdigest()


def test_retried_part_and_retried_put_still_hash_every_byte_once(
    s3: S3Target, outputs: list[Upload]
) -> None:
    storage = s3.make_storage()
    parts_dropped = _drop_first_send(storage.client, "UploadPart", after_bytes=1 * MiB)
    puts_dropped = _drop_first_send(storage.client, "PutObject", after_bytes=100_000)

    digests = storage.upload_files(outputs, on_progress=_ignore, abort=AbortSignal())

    assert (parts_dropped(), puts_dropped()) == (1, 1)
    for upload in outputs:
        assert digests[upload.key] == _stored_digest(s3, upload.key)


def test_every_part_and_put_carries_a_crc32(s3: S3Target, outputs: list[Upload]) -> None:
    storage = s3.make_storage()
    sent = _record_sends(storage.client)

    storage.upload_files(outputs, on_progress=_ignore, abort=AbortSignal())

    bodies = [(op, headers) for op, headers in sent if op in ("UploadPart", "PutObject")]
    assert sorted(op for op, _ in bodies) == ["PutObject"] + ["UploadPart"] * 3
    for _, headers in bodies:
        assert headers["x-amz-sdk-checksum-algorithm"] == "CRC32"
        assert headers["x-amz-checksum-crc32"]
    head = s3.client.head_object(Bucket=s3.bucket, Key=outputs[0].key, ChecksumMode="ENABLED")
    assert head.get("ChecksumCRC32")  # S3 keeps it: HeadObject/GetObject can check it later


def test_checking_server_accepts_our_checksums(
    s3_checking_checksums: S3Target, outputs: list[Upload]
) -> None:
    s3 = s3_checking_checksums
    storage = s3.make_storage()

    digests = storage.upload_files(outputs, on_progress=_ignore, abort=AbortSignal())

    for upload in outputs:
        assert digests[upload.key] == _stored_digest(s3, upload.key)


@pytest.mark.parametrize("aws_setting", [None, "when_required"])
def test_part_damaged_in_flight_is_rejected_by_s3_and_nothing_is_stored(
    s3_checking_checksums: S3Target,
    outputs: list[Upload],
    monkeypatch: pytest.MonkeyPatch,
    aws_setting: str | None,
) -> None:
    # when_required would turn botocore's default checksums off; ours stay on.
    if aws_setting is not None:
        monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", aws_setting)
    s3 = s3_checking_checksums
    storage = s3.make_storage()
    damaged = damage_part(storage.client, part_number=2)

    with pytest.raises(TransientError, match="BadDigest"):
        storage.upload_files(outputs[:1], on_progress=_ignore, abort=AbortSignal())

    assert damaged() == 1
    assert storage.head(outputs[0].key) is None
    assert s3.multipart_uploads() == []  # s3transfer aborted the upload
