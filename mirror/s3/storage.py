"""S3 side of a job: where outputs go (key layout) and how they get there.

Keys are a pure function of prefix, item and stream, so a retried job overwrites its
earlier objects instead of forking new ones. Uploads go through one s3transfer
`TransferManager` per job (multipart, parallel parts, parallel files); its threads report
byte deltas that this module sums and hands to the job's progress callback. Each file is
read through a `HashingReader`, so the upload yields its size and SHA-256 without a
second pass, and every part carries a CRC32 that S3 checks before storing it. Every
failure leaves here as a `PermanentError` or `TransientError` with a short message.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from s3transfer.manager import TransferConfig, TransferManager

from mirror.errors import ConfigError, MirrorError, TransientError
from mirror.objects import (
    FileDigest,
    Upload,
    audio_key,
    item_prefix,
    manifest_key,
    output_key,
    video_key,
)
from mirror.progress import AbortSignal, ProgressCallback
from mirror.s3.checksums import (
    PART_CHECKSUM_ALGORITHM,
    HashingReader,
    IncompleteDigest,
)
from mirror.s3.errors import error_code, http_status, translate_error
from mirror.s3.streaming import StreamingUpload
from mirror.s3.upload_run import RunSubscriber, UploadRun

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger("mirror.storage")

__all__ = [
    "Upload",
    "audio_key",
    "item_prefix",
    "manifest_key",
    "output_key",
    "video_key",
]

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
        stop_grace_s: float = 10.0,
    ) -> None:
        if (access_key_id is None) != (secret_access_key is None):
            raise ConfigError("S3 access key id and secret access key must be given together")
        if part_size < 5 * MiB:
            raise ConfigError(f"S3 part size must be at least 5 MiB, got {part_size} bytes")
        self.bucket = bucket
        self.region = region
        self._part_size = part_size
        self._max_concurrency = max_concurrency
        # How long a stopped upload may take to wind down (threads finishing a socket
        # call) before the caller raises anyway and leaves the rest to the background.
        self._stop_grace_s = stop_grace_s
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
        session = boto3.session.Session(
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            region_name=region,
        )
        self._client: S3Client = session.client("s3", endpoint_url=endpoint_url, config=config)
        self.endpoint_url: str = self._client.meta.endpoint_url
        # Files go up as file objects (see checksums.py), which s3transfer reads into
        # memory part by part: at most max_in_memory_upload_chunks parts per job, one
        # per request thread plus two read ahead (8 + 2 parts of 16 MiB at the defaults).
        self._transfer_config = TransferConfig(
            multipart_threshold=part_size,
            multipart_chunksize=part_size,
            max_request_concurrency=max_concurrency,
            max_in_memory_upload_chunks=max_concurrency + 2,
        )

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
        """Upload all files in parallel; once every object is complete, return the size
        and SHA-256 of each file by key, taken from the bytes the upload read.

        Raises the progress callback's exception or the abort reason when either
        stops the run (multipart uploads already begun are aborted by s3transfer).
        """
        abort.raise_if_set()
        readers = self._open_all(uploads)
        release = functools.partial(_close_all, readers)
        total = sum(reader.size for reader in readers)
        run = UploadRun(total, len(uploads), on_progress)
        try:
            on_progress(run.snapshot(0))
        except BaseException:
            release()
            raise
        if not uploads:
            return {}
        log.info("uploading %d files (%d bytes) to s3://%s", len(uploads), total, self.bucket)
        finished = self._transfer(uploads, readers, run, abort, release)
        if run.callback_error is not None:
            raise run.callback_error
        abort.raise_if_set()
        if run.first_failure is not None:
            raise self._translate(run.first_failure, "upload") from run.first_failure
        if not finished:  # cannot happen without a stop or failure; kept as a guard
            raise TransientError(f"S3 upload did not finish (endpoint {self.endpoint_url})")
        try:
            digests = {
                upload.key: reader.digest() for upload, reader in zip(uploads, readers, strict=True)
            }
        except IncompleteDigest as exc:  # e.g. the file changed size while it was sent
            raise TransientError(f"S3 upload cannot be vouched for: {exc}") from exc
        on_progress(run.snapshot(total))
        log.info("uploaded %d files to s3://%s", len(uploads), self.bucket)
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

    def _transfer(
        self,
        uploads: Sequence[Upload],
        readers: Sequence[HashingReader],
        run: UploadRun,
        abort: AbortSignal,
        release: Callable[[], None],
    ) -> bool:
        """Submit every file to one TransferManager and wait; True once all are done.

        `release` runs once the manager has shut down, which may be later, in the
        background, when threads are still stuck in a socket call.
        """
        manager = TransferManager(self._client, self._transfer_config)
        unregister = abort.on_abort(run.stop)
        finished = False
        submitted = 0
        try:
            subscriber = RunSubscriber(run)
            for upload, reader in zip(uploads, readers, strict=True):
                future = manager.upload(
                    # A file object, not a path: s3transfer then reads each file once,
                    # in order, in one thread, which lets HashingReader see every byte.
                    cast(IO[Any], reader),
                    self.bucket,
                    upload.key,
                    extra_args={
                        "ContentType": upload.content_type,
                        "ChecksumAlgorithm": PART_CHECKSUM_ALGORITHM,
                    },
                    subscribers=[subscriber],
                )
                submitted += 1
                run.add_future(future)
            run.wake.wait()
            finished = run.all_done.wait(self._stop_grace_s)
        except BaseException:
            run.stop()
            run.forget(len(uploads) - submitted)
            finished = run.all_done.wait(self._stop_grace_s)
            raise
        finally:
            unregister()
            _shut_down(manager, wait=finished, then=release)
        return finished

    def _open_all(self, uploads: Sequence[Upload]) -> list[HashingReader]:
        readers: list[HashingReader] = []
        try:
            for upload in uploads:
                readers.append(HashingReader.open(upload.path))
        except OSError as exc:
            _close_all(readers)
            raise TransientError(
                f"S3 upload failed: cannot read {exc.filename}: {exc.strerror}"
            ) from exc
        except BaseException:
            _close_all(readers)
            raise
        return readers

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


def _shut_down(manager: TransferManager, *, wait: bool, then: Callable[[], None]) -> None:
    if wait:
        try:
            manager.shutdown()
        finally:
            then()
        return

    # Threads still stuck in a socket call: let them finish (and s3transfer abort the
    # multipart uploads) in the background instead of holding up the job; the files
    # they read stay open until then.
    def shutdown() -> None:
        try:
            manager.shutdown(cancel=True)
        finally:
            then()

    threading.Thread(target=shutdown, name="s3-shutdown", daemon=True).start()


def _close_all(readers: Sequence[HashingReader]) -> None:
    for reader in readers:
        reader.close()
