"""Outputs streamed to S3 while ffmpeg still writes them, visible only once verified.

Each output becomes one multipart upload, begun before ffmpeg starts. A follower thread
per file reads it front to back as it grows (`mirror.growing_file`), a part's worth at a
time, and hands each part to a shared pool of request threads. Nothing is visible in the
bucket until `publish` completes the multipart uploads, which the pipeline calls only
after ffmpeg exited cleanly, the outputs were verified and the lease was checked; any
other way out aborts them (a killed worker leaves them to the next attempt's clean-up).

Fragmented MP4 is append-only, so the bytes read early are the final ones. A faststart
MP4 is rewritten at the end (its moov moves to the front): with `follow=False` nothing is
read before `finish`. Once a part is stored its media payload is punched out of the file
(`mirror.holes`), and `wait_for_room` lets ffmpeg's feeder wait while too much written
output is not stored yet: the work dir stays near the item's size. Integrity as in
`upload_files`: each part carries a CRC32 that S3 checks, and the size and SHA-256 come
from the very bytes that were sent. Memory: at most
`max_concurrency + 2` parts are read and not yet stored, for all files together.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from mirror.errors import MirrorError
from mirror.growing_file import GrowingFile
from mirror.holes import OutputHoles
from mirror.objects import FileDigest, Upload
from mirror.progress import AbortSignal, Progress, ProgressCallback
from mirror.s3.checksums import PART_CHECKSUM_ALGORITHM

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

log = logging.getLogger("mirror.storage")

REPORT_INTERVAL_S = 0.1
_SLOT_WAIT_S = 0.1
_ROOM_POLL_S = 0.02

Translate = Callable[[BaseException, str], MirrorError]


class _Stopped(Exception):
    """A follower noticed the run was stopped; not a failure of its own."""


class _FileStream:
    """One output: its multipart upload, the parts sent so far, the hash of their bytes."""

    def __init__(self, upload: Upload, growing: GrowingFile) -> None:
        self.upload = upload
        self.growing = growing
        self.upload_id: str | None = None
        self.parts: dict[int, CompletedPartTypeDef] = {}
        self.hash = hashlib.sha256()
        self.size = 0  # bytes read and handed to a part
        self.read_all = False
        # Disk given back once stored (mirror.holes): parts finish in any order, so
        # only the bytes before the first part still missing are freed.
        self.holes = OutputHoles(upload.path)
        self.part_sizes: dict[int, int] = {}
        self.stored_parts = 0
        self.stored_end = 0
        self.stored_bytes = 0

    def part_stored(self, number: int, length: int) -> None:
        """Called under the upload's lock; frees what is now stored without a gap."""
        self.part_sizes[number] = length
        self.stored_bytes += length
        while self.stored_parts + 1 in self.part_sizes:
            self.stored_parts += 1
            self.stored_end += self.part_sizes.pop(self.stored_parts)
        self.holes.stored(self.stored_end)


class StreamingUpload:
    """Every output of one job, each a multipart upload fed while the file grows."""

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        uploads: Sequence[Upload],
        *,
        part_size: int,
        max_concurrency: int,
        follow: bool,
        on_progress: ProgressCallback,
        abort: AbortSignal,
        translate: Translate,
    ) -> None:
        self._client = client
        self._bucket = bucket
        self._part_size = part_size
        self._follow = follow
        self._on_progress = on_progress
        self._translate = translate
        self._abort = abort
        # Our own stop: fired by the job's abort, a failed part or leaving unpublished.
        self._stop = AbortSignal()
        self._unlink = abort.on_abort(lambda: self._stop.trigger(_reason(abort)))
        self._files = [_FileStream(u, GrowingFile(u.path, self._stop)) for u in uploads]
        self._pool = ThreadPoolExecutor(max_concurrency, thread_name_prefix="s3-part")
        self._slots = threading.Semaphore(max_concurrency + 2)
        self._lock = threading.Lock()
        self._failure: BaseException | None = None
        self._sent = 0
        self._last_report = 0.0
        self._followers: list[threading.Thread] = []
        self._futures: list[Future[None]] = []
        self._published = False

    # --- the pipeline's side ---------------------------------------------------------

    def __enter__(self) -> StreamingUpload:
        try:
            for file in self._files:
                file.upload_id = self._call("upload", self._create, file.upload)
        except BaseException:
            self._abort_all()
            raise
        for file in self._files:
            thread = threading.Thread(
                target=self._follow_file, args=(file,), name="s3-follow", daemon=True
            )
            thread.start()
            self._followers.append(thread)
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if not self._published:
            self._stop.trigger(_Stopped("upload left unpublished"))
            self._abort_all()
        self._unlink()

    def finish(self) -> dict[str, FileDigest]:
        """Every file is final now: send the rest and wait for every part. Nothing is
        visible yet. Returns each file's size and SHA-256 by key."""
        for file in self._files:
            file.growing.finish()
        for thread in self._followers:
            while thread.is_alive():
                thread.join(_SLOT_WAIT_S)
        with self._lock:
            in_flight = list(self._futures)
        for future in in_flight:
            while not future.done():
                self._stop.wait(_SLOT_WAIT_S)
                self._raise_if_failed()
        self._raise_if_failed()
        self._report(force=True)
        return {f.upload.key: FileDigest(f.size, f.hash.hexdigest()) for f in self._files}

    def publish(self) -> None:
        """Complete every multipart upload: the moment the outputs become visible."""
        self._raise_if_failed()
        for file in self._files:
            parts = [file.parts[number] for number in sorted(file.parts)]
            self._call("upload", self._complete, file, parts)
        self._published = True
        self._pool.shutdown()
        log.info("published %d streamed files to s3://%s", len(self._files), self._bucket)

    def wait_for_room(self, bound: int) -> None:
        """Block while more than `bound` written bytes wait for S3 (backpressure on
        whatever feeds ffmpeg). Bytes of a file not followed (`follow=False`) only go
        after ffmpeg ends, so then it never waits. Returns when the run stops."""
        if not self._follow:
            return
        while self._backlogged(bound) and not self._stop.wait(_ROOM_POLL_S):
            pass

    def _backlogged(self, bound: int) -> bool:
        """Over the bound, and some file holds a whole part not stored yet. Only that part
        can bring the backlog down: a file's last partial part goes only once ffmpeg
        writes more, so waiting without a whole part anywhere would be a deadlock."""
        with self._lock:
            stored = [f.stored_bytes for f in self._files]
        sizes = [f.growing.size() for f in self._files]
        unstored = [size - done for size, done in zip(sizes, stored, strict=True)]
        return sum(unstored) > bound and max(unstored, default=0) >= self._part_size

    def progress(self) -> Progress:
        total = sum(f.size if f.read_all else f.growing.size() for f in self._files)
        return Progress(phase="upload", bytes_done=self._sent, bytes_total=max(total, self._sent))

    # --- the threads -----------------------------------------------------------------

    def _follow_file(self, file: _FileStream) -> None:
        try:
            while not self._follow and not file.growing.finished:
                if self._stop.wait(_SLOT_WAIT_S):
                    raise _Stopped()
            with file.growing.open() as reader:
                number = 1
                while True:
                    self._take_slot()
                    data = reader.read(self._part_size)
                    if not data and number > 1:
                        self._slots.release()
                        break
                    file.hash.update(data)
                    file.holes.observe(data)
                    file.size += len(data)
                    future = self._pool.submit(self._send_part, file, number, data)
                    future.add_done_callback(self._part_done)
                    with self._lock:
                        self._futures.append(future)
                    number += 1
                    if len(data) < self._part_size:
                        break
            file.read_all = True
        except _Stopped:
            return
        except BaseException as exc:  # recorded, then raised by finish in the job's thread
            self._fail(exc)

    def _take_slot(self) -> None:
        while not self._slots.acquire(timeout=_SLOT_WAIT_S):
            if self._stop.is_set():
                raise _Stopped()
        if self._stop.is_set():
            self._slots.release()
            raise _Stopped()

    def _send_part(self, file: _FileStream, number: int, data: bytes) -> None:
        if self._stop.is_set():
            return
        assert file.upload_id is not None
        response = self._client.upload_part(
            Bucket=self._bucket,
            Key=file.upload.key,
            UploadId=file.upload_id,
            PartNumber=number,
            Body=data,
            ChecksumAlgorithm=PART_CHECKSUM_ALGORITHM,
        )
        part: CompletedPartTypeDef = {"ETag": response["ETag"], "PartNumber": number}
        if "ChecksumCRC32" in response:
            part["ChecksumCRC32"] = response["ChecksumCRC32"]
        with self._lock:
            file.parts[number] = part
            file.part_stored(number, len(data))
            self._sent += len(data)
        self._report()

    def _part_done(self, future: Future[None]) -> None:
        self._slots.release()
        failure = future.exception()
        if failure is not None:
            self._fail(failure)

    def _report(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_report < REPORT_INTERVAL_S:
            return
        self._last_report = now
        try:
            self._on_progress(self.progress())
        except BaseException as exc:  # the job's abort reason: stop, raise in finish
            self._fail(exc)

    # --- stopping --------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        """The first failure stops every file, and the job's other work through `abort`."""
        with self._lock:
            first = self._failure is None and not self._stop.is_set()
            if first:
                self._failure = self._as_error(exc)
        if first and self._failure is not None:
            self._stop.trigger(self._failure)
            self._abort.trigger(self._failure)

    def _as_error(self, exc: BaseException) -> BaseException:
        if isinstance(exc, MirrorError) or not isinstance(exc, Exception):
            return exc
        error = self._translate(exc, "upload")
        error.__cause__ = exc
        return error

    def _raise_if_failed(self) -> None:
        failure = self._failure or self._stop.reason
        if failure is not None:
            raise failure

    def _abort_all(self) -> None:
        """Abort the multipart uploads now, and again once parts still in flight are done
        (S3 may store a part that was on the wire during the abort). Best effort: the next
        attempt's clean-up of stale uploads catches what is left."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._abort_requests()

        def again() -> None:
            self._pool.shutdown(wait=True)
            self._abort_requests()

        threading.Thread(target=again, name="s3-abort", daemon=True).start()

    def _abort_requests(self) -> None:
        for file in self._files:
            if file.upload_id is None:
                continue
            try:
                self._client.abort_multipart_upload(
                    Bucket=self._bucket, Key=file.upload.key, UploadId=file.upload_id
                )
            except Exception as exc:
                if "NoSuchUpload" not in str(exc):
                    log.warning("could not abort the upload of %s: %s", file.upload.key, exc)

    # --- requests --------------------------------------------------------------------

    def _create(self, upload: Upload) -> str:
        response = self._client.create_multipart_upload(
            Bucket=self._bucket,
            Key=upload.key,
            ContentType=upload.content_type,
            ChecksumAlgorithm=PART_CHECKSUM_ALGORITHM,
        )
        return response["UploadId"]

    def _complete(self, file: _FileStream, parts: list[CompletedPartTypeDef]) -> None:
        assert file.upload_id is not None
        self._client.complete_multipart_upload(
            Bucket=self._bucket,
            Key=file.upload.key,
            UploadId=file.upload_id,
            MultipartUpload={"Parts": parts},
        )

    def _call(self, action: str, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except Exception as exc:
            raise self._translate(exc, action) from exc


def _reason(abort: AbortSignal) -> BaseException:
    return abort.reason or _Stopped("aborted")
