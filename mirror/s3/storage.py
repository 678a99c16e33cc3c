"""S3 side of a job: where outputs go (key layout) and how they get there.

Keys are a pure function of prefix, item and stream, so a retried job overwrites its
earlier objects instead of forking new ones. Every file goes up one way, `stream_files`
(`mirror.s3.streaming`: multipart, parallel parts, the size and SHA-256 from the bytes
sent, a CRC32 per part that S3 checks); only the manifest is one small PUT. Every
failure leaves here as a `PermanentError` or `TransientError` with a short message.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from mirror.domain.errors import ConfigError, MirrorError
from mirror.domain.objects import (
    FileDigest,
    Upload,
)
from mirror.domain.progress import AbortSignal, ProgressCallback
from mirror.s3.errors import error_code, http_status, translate_error
from mirror.s3.streaming import StreamingUpload

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger("mirror.storage")

MiB = 1024 * 1024
VIDEO_CONTENT_TYPE = "video/mp4"
AUDIO_CONTENT_TYPE = "audio/mp4"


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What `head` tells about a stored object."""

    key: str
    size: int
    content_type: str | None


# --- storage -----------------------------------------------------------------------

_session_lock = threading.Lock()
_sessions: list[boto3.session.Session] = []


def _shared_session() -> boto3.session.Session:
    """The process's one boto3 session, whose loader keeps botocore's parsed service
    models: a client from a fresh session parses them again (~0.1 CPU-s), one from this
    session ~3 ms. Credentials and region go to each client, never to the session, so
    clients of different buckets or keys share nothing else. Sessions are not
    thread-safe, hence the lock around every client made from it."""
    if not _sessions:
        _sessions.append(boto3.session.Session())
    return _sessions[0]


class S3Storage:
    """One bucket on one endpoint; a boto3 client shared by all uploads (thread-safe).

    Credentials left as None come from boto3's default chain. The secret is handed to
    boto3 and kept nowhere else, so it cannot reach a repr or a message.
    """

    def __init__(
        self,
        bucket: str,
        *,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        part_size: int = 16 * MiB,
        max_concurrency: int = 8,
        max_attempts: int = 5,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 60.0,
    ) -> None:
        if (access_key_id is None) != (secret_access_key is None):
            raise ConfigError("S3 access key id and secret access key must be given together")
        if part_size < 5 * MiB:
            raise ConfigError(f"S3 part size must be at least 5 MiB, got {part_size} bytes")
        self.bucket = bucket
        self.region = region
        self._part_size = part_size
        self._max_concurrency = max_concurrency
        config = Config(
            region_name=region,
            # total_max_attempts counts the first try; botocore's max_attempts would not.
            retries={"mode": "standard", "total_max_attempts": max_attempts},
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            max_pool_connections=max(10, max_concurrency + 2),
            # MinIO and most S3 look-alikes want path-style; AWS picks for itself.
            s3={"addressing_style": "path" if endpoint_url else "auto"},
        )
        with _session_lock:
            self._client: S3Client = _shared_session().client(
                "s3",
                endpoint_url=endpoint_url,
                region_name=region,
                aws_access_key_id=access_key_id,
                aws_secret_access_key=secret_access_key,
                config=config,
            )
        self.endpoint_url: str = self._client.meta.endpoint_url

    def __repr__(self) -> str:
        return f"S3Storage(bucket={self.bucket!r}, endpoint={self.endpoint_url!r})"

    @property
    def client(self) -> S3Client:
        return self._client

    def check_bucket(self) -> None:
        """Fail before a long download when the bucket is missing or not ours to write."""
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "bucket check") from exc

    def upload_files(
        self, uploads: Sequence[Upload], *, on_progress: ProgressCallback, abort: AbortSignal
    ) -> dict[str, FileDigest]:
        """Final files through the one upload path (`stream_files`), visible once every
        one is stored; their size and SHA-256 by key. For tools and tests: a job hands
        its late files to the outputs' own run (`StreamingUpload.finish`)."""
        with self.stream_files(uploads, follow=False, on_progress=on_progress, abort=abort) as run:
            digests = run.finish()
            run.publish()
        return digests

    def stream_files(
        self,
        uploads: Sequence[Upload],
        *,
        follow: bool,
        on_progress: ProgressCallback,
        abort: AbortSignal,
    ) -> StreamingUpload:
        """Multipart uploads fed while the files are written (`follow`) or once they are
        final; a context manager that aborts them unless `publish` completed them."""
        return StreamingUpload(
            self._client,
            self.bucket,
            uploads,
            part_size=self._part_size,
            max_concurrency=self._max_concurrency,
            follow=follow,
            on_progress=on_progress,
            abort=abort,
            translate=self._translate,
        )

    def abort_stale_multipart_uploads(self, keys: Sequence[str]) -> int:
        """Abort unfinished multipart uploads of exactly these keys; return how many.

        A SIGKILLed attempt leaves its parts behind (billed storage); the retry cleans up.
        """
        wanted = set(keys)
        if not wanted:
            return 0
        aborted = 0
        try:
            paginator = self._client.get_paginator("list_multipart_uploads")
            # A plain string prefix (not a path): S3 prefixes match characters.
            prefix = os.path.commonprefix([*wanted])  # noqa: RUF071
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for stale in page.get("Uploads", []):
                    key, upload_id = stale.get("Key", ""), stale.get("UploadId", "")
                    if key in wanted and self._abort_multipart_upload(key, upload_id):
                        aborted += 1
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "cleanup of unfinished uploads") from exc
        if aborted:
            log.info("aborted %d unfinished multipart uploads in s3://%s", aborted, self.bucket)
        return aborted

    def object_keys(self, prefix: str = "") -> list[str]:
        """All keys under a prefix, sorted (for tests and the CLI)."""
        paginator = self._client.get_paginator("list_objects_v2")
        keys: list[str] = []
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                keys.extend(obj["Key"] for obj in page.get("Contents", []) if "Key" in obj)
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "listing") from exc
        return sorted(keys)

    def head(self, key: str) -> ObjectInfo | None:
        """Size and content type of an object, or None when it does not exist."""
        try:
            response = self._client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if http_status(exc) == 404:
                return None
            raise self._translate(exc, "head") from exc
        except BotoCoreError as exc:
            raise self._translate(exc, "head") from exc
        return ObjectInfo(key, response["ContentLength"], response.get("ContentType"))

    def put_bytes(self, key: str, body: bytes, content_type: str) -> None:
        """One small object in one PUT with a SHA-256 checksum (the manifest)."""
        try:
            self._client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                ContentType=content_type,
                ChecksumAlgorithm="SHA256",
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "upload") from exc

    def _abort_multipart_upload(self, key: str, upload_id: str) -> bool:
        try:
            self._client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        except ClientError as exc:
            if error_code(exc) == "NoSuchUpload":
                return False  # finished or aborted meanwhile: nothing left to clean
            raise
        return True

    def _translate(self, exc: BaseException, action: str) -> MirrorError:
        return translate_error(
            exc, action, bucket=self.bucket, region=self.region, endpoint_url=self.endpoint_url
        )
