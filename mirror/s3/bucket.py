"""Reading and pruning what is already in the bucket: listings, small GETs, streamed
hashes and prefix deletes, for `mirror sync`, `verify` and `import-manifests`.

Separate from storage.py, which is about getting a job's outputs *into* S3. Everything
here is many small requests, so the client gets a connection pool as large as the
thread pools that call it (see `app.bucket`), and listings are used instead of one HEAD
per object wherever a size is all that is needed: one LIST answers for 1000 keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from mirror.domain.errors import MirrorError, PermanentError, TransientError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys
_READ_CHUNK = 1024 * 1024


class Bucket:
    """One bucket seen as keys and sizes; thread-safe (boto3 clients are)."""

    def __init__(self, client: S3Client, name: str) -> None:
        self._client = client
        self.name = name

    def __repr__(self) -> str:
        return f"Bucket({self.name!r})"

    def iter_objects(self, prefix: str) -> Iterator[tuple[str, int]]:
        """(key, size) of every object under `prefix`, in key order, a page at a time."""
        paginator = self._client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.name, Prefix=prefix):
                for entry in page.get("Contents", []):
                    if "Key" in entry:
                        yield entry["Key"], int(entry.get("Size", 0))
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"listing {prefix!r}") from exc

    def sizes(self, prefix: str) -> dict[str, int]:
        """Every key under `prefix` with its size."""
        return dict(self.iter_objects(prefix))

    def get_bytes(self, key: str) -> bytes | None:
        """A small object's body (a manifest), or None when it does not exist."""
        try:
            response = self._client.get_object(Bucket=self.name, Key=key)
            return response["Body"].read()
        except ClientError as exc:
            if _missing(exc):
                return None
            raise self._error(exc, f"reading {key}") from exc
        except BotoCoreError as exc:
            raise self._error(exc, f"reading {key}") from exc

    def sha256_of(self, key: str, on_bytes: Callable[[int], None] | None = None) -> str | None:
        """SHA-256 of an object read as a stream (constant memory); None when missing."""
        digest = hashlib.sha256()
        try:
            body = self._client.get_object(Bucket=self.name, Key=key)["Body"]
            for chunk in body.iter_chunks(_READ_CHUNK):
                digest.update(chunk)
                if on_bytes is not None:
                    on_bytes(len(chunk))
        except ClientError as exc:
            if _missing(exc):
                return None
            raise self._error(exc, f"reading {key}") from exc
        except BotoCoreError as exc:
            raise self._error(exc, f"reading {key}") from exc
        return digest.hexdigest()

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under `prefix` (one DeleteObjects per 1000); returns how many."""
        if not prefix.endswith("/"):
            raise ValueError(f"refusing to delete under {prefix!r}: not a folder-like prefix")
        keys = [key for key, _ in self.iter_objects(prefix)]
        for start in range(0, len(keys), _DELETE_BATCH):
            batch = keys[start : start + _DELETE_BATCH]
            try:
                response = self._client.delete_objects(
                    Bucket=self.name,
                    Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True},
                )
            except (ClientError, BotoCoreError) as exc:
                raise self._error(exc, f"deleting under {prefix!r}") from exc
            errors = response.get("Errors", [])
            if errors:
                first = errors[0]
                raise TransientError(
                    f"S3 could not delete {len(errors)} object(s) under {prefix!r}, e.g. "
                    f"{first.get('Key')}: {first.get('Code')} {first.get('Message', '')}".strip()
                )
        return len(keys)

    def copy_prefix(self, source: str, target: str, *, leave_out: Collection[str] = ()) -> int:
        """Copy every object under `source` to the same name under `target`, inside S3
        (CopyObject; boto3's managed copy switches to UploadPartCopy past its threshold,
        so files over 5 GB copy too); `leave_out` keys are not copied. Returns how many."""
        if not source.endswith("/") or not target.endswith("/"):
            raise ValueError(f"refusing to copy {source!r} to {target!r}: not folder-like")
        copied = 0
        for key, _ in self.iter_objects(source):
            if key in leave_out:
                continue
            try:
                self._client.copy(
                    {"Bucket": self.name, "Key": key}, self.name, target + key[len(source) :]
                )
            except (ClientError, BotoCoreError) as exc:
                raise self._error(exc, f"copying {key}") from exc
            copied += 1
        return copied

    def put_bytes(self, key: str, body: bytes, content_type: str) -> None:
        """Put one small object (a manifest)."""
        try:
            self._client.put_object(Bucket=self.name, Key=key, Body=body, ContentType=content_type)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"writing {key}") from exc

    def _error(self, exc: BaseException, action: str) -> MirrorError:
        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code == "NoSuchBucket":
                return PermanentError(f"S3 bucket '{self.name}' does not exist")
            if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                return PermanentError(f"S3 denied {action} in bucket '{self.name}' ({code})")
            message = exc.response.get("Error", {}).get("Message", "")
            return TransientError(f"S3 {action} failed: {code} {message}".strip())
        return TransientError(f"S3 {action} failed: {exc}")


def _missing(exc: ClientError) -> bool:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("NoSuchKey", "404") or status == 404
