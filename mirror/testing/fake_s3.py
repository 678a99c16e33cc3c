"""An in-memory `ObjectStore` (the pipeline's S3 port) for in-process tests.

Objects are kept as bytes with their content type; `upload_files` and the streaming
upload's `finish` (which takes the late files too) read each file once, report progress
(the total at the end) and return the size and SHA-256 of the bytes they read.
Unfinished multipart uploads are modelled as a set of keys, so
`abort_stale_multipart_uploads` can be checked. `fail_next` makes the
next calls of one method raise (S3Storage's own error kinds), `stall_bucket_check`
holds the bucket check until the abort fires. tests/integration/test_fake_conformance.py
runs one scenario on this and on S3Storage against SeaweedFS.

New port methods (e.g. a streaming upload) belong here too, with a scenario there.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mirror.domain.errors import PermanentError
from mirror.domain.objects import FileDigest, Upload
from mirror.domain.progress import AbortSignal, Progress, ProgressCallback


@dataclass(frozen=True, slots=True)
class StoredObject:
    body: bytes
    content_type: str


class InMemoryObjectStore:
    def __init__(self, bucket: str = "mirror-test", *, exists: bool = True) -> None:
        self.bucket = bucket
        self.exists = exists
        self.objects: dict[str, StoredObject] = {}
        self.multipart: list[str] = []  # keys of unfinished multipart uploads
        self.calls: list[str] = []  # method names, in order
        self._failures: dict[str, list[BaseException]] = {}
        self._lock = threading.Lock()
        self._bucket_check_free = threading.Event()
        self._bucket_check_free.set()
        self.bucket_checks_held = 0

    # -- faults and observations ----------------------------------------------------------

    def fail_next(self, method: str, error: BaseException, times: int = 1) -> None:
        """The next `times` calls of `method` (e.g. "upload_files") raise `error`."""
        with self._lock:
            self._failures.setdefault(method, []).extend([error] * times)

    def stall_bucket_check(self, stalled: bool) -> None:
        if stalled:
            self._bucket_check_free.clear()
        else:
            self._bucket_check_free.set()

    def start_multipart_upload(self, key: str) -> None:
        """What a killed attempt leaves behind: a multipart upload never completed."""
        with self._lock:
            self.multipart.append(key)

    def object_keys(self) -> list[str]:
        with self._lock:
            return sorted(self.objects)

    def body(self, key: str) -> bytes:
        with self._lock:
            return self.objects[key].body

    # -- the port -------------------------------------------------------------------------

    def check_bucket(self) -> None:
        self._enter("check_bucket")
        with self._lock:
            self.bucket_checks_held += 1
        try:
            self._bucket_check_free.wait()
        finally:
            with self._lock:
                self.bucket_checks_held -= 1
        if not self.exists:
            raise PermanentError(f"S3 bucket '{self.bucket}' does not exist")

    def abort_stale_multipart_uploads(self, keys: Sequence[str]) -> int:
        self._enter("abort_stale_multipart_uploads")
        wanted = set(keys)
        with self._lock:
            stale = [key for key in self.multipart if key in wanted]
            self.multipart = [key for key in self.multipart if key not in wanted]
        return len(stale)

    def upload_files(
        self, uploads: Sequence[Upload], *, on_progress: ProgressCallback, abort: AbortSignal
    ) -> Mapping[str, FileDigest]:
        abort.raise_if_set()
        self._enter("upload_files")
        bodies = [upload.path.read_bytes() for upload in uploads]
        total = sum(len(body) for body in bodies)
        on_progress(Progress("upload", bytes_done=0, bytes_total=total))
        if not uploads:
            return {}
        self._require_bucket()
        digests: dict[str, FileDigest] = {}
        for upload, body in zip(uploads, bodies, strict=True):
            abort.raise_if_set()
            with self._lock:
                self.objects[upload.key] = StoredObject(body, upload.content_type)
            digests[upload.key] = FileDigest(len(body), hashlib.sha256(body).hexdigest())
        on_progress(Progress("upload", bytes_done=total, bytes_total=total))
        return digests

    def stream_files(
        self,
        uploads: Sequence[Upload],
        *,
        follow: bool,
        on_progress: ProgressCallback,
        abort: AbortSignal,
    ) -> InMemoryOutputUpload:
        """The outputs' uploads: begun now (unfinished multipart uploads), read whole at
        `finish` (the fake does not follow growing files), visible only after `publish`."""
        abort.raise_if_set()
        self._enter("stream_files")
        self._require_bucket()
        with self._lock:
            self.multipart.extend(upload.key for upload in uploads)
        return InMemoryOutputUpload(self, list(uploads), on_progress, abort)

    def put_bytes(self, key: str, body: bytes, content_type: str) -> None:
        self._enter("put_bytes")
        self._require_bucket()
        with self._lock:
            self.objects[key] = StoredObject(bytes(body), content_type)

    # -- inside ---------------------------------------------------------------------------

    def _enter(self, method: str) -> None:
        with self._lock:
            self.calls.append(method)
            pending = self._failures.get(method)
            error = pending.pop(0) if pending else None
        if error is not None:
            raise error

    def _end_multipart(self, keys: Sequence[str]) -> None:
        with self._lock:
            self.multipart = [key for key in self.multipart if key not in set(keys)]

    def _require_bucket(self) -> None:
        if not self.exists:
            raise PermanentError(f"S3 bucket '{self.bucket}' does not exist")


class InMemoryOutputUpload:
    """The fake's `OutputUpload`: `finish` reads the files, `publish` stores them, and
    leaving the block without `publish` drops the unfinished uploads (S3's abort)."""

    def __init__(
        self,
        store: InMemoryObjectStore,
        uploads: list[Upload],
        on_progress: ProgressCallback,
        abort: AbortSignal,
    ) -> None:
        self._store = store
        self._uploads = uploads
        self._on_progress = on_progress
        self._abort = abort
        self._bodies: dict[str, bytes] = {}

    def __enter__(self) -> InMemoryOutputUpload:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self._store._end_multipart([upload.key for upload in self._uploads])

    def wait_for_room(self, bound: int) -> None:
        """Nothing piles up in memory here: never waits."""
        self._abort.raise_if_set()

    def finish(self, more: Sequence[Upload] = ()) -> Mapping[str, FileDigest]:
        self._abort.raise_if_set()
        self._store._enter("finish")
        self._uploads += more
        self._bodies = {upload.key: upload.path.read_bytes() for upload in self._uploads}
        total = sum(len(body) for body in self._bodies.values())
        self._on_progress(Progress("upload", bytes_done=total, bytes_total=total))
        return {
            key: FileDigest(len(body), hashlib.sha256(body).hexdigest())
            for key, body in self._bodies.items()
        }

    def publish(self) -> None:
        self._abort.raise_if_set()
        self._store._enter("publish")
        content_types = {upload.key: upload.content_type for upload in self._uploads}
        with self._store._lock:
            for key, body in self._bodies.items():
                self._store.objects[key] = StoredObject(body, content_types[key])
        self._store._end_multipart(list(self._bodies))
