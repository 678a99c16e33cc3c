"""Outputs streamed to S3 while ffmpeg still writes them, visible only once verified.

Each output becomes one multipart upload, begun before ffmpeg starts. A follower thread
per file reads it front to back as it grows (`mirror.files.growing_file`), a part's worth at a
time, and hands each part to a shared pool of request threads. Nothing is visible in the
bucket until `publish` completes the multipart uploads, which the pipeline calls only
after ffmpeg exited cleanly, the outputs were verified and the lease was checked; any
other way out aborts them (a killed worker leaves them to the next attempt's clean-up).

Fragmented MP4 is append-only, so the bytes read early are the final ones. A faststart
MP4 is rewritten at the end (its moov moves to the front): with `follow=False` nothing is
read before `finish`. Once a part is stored its media payload is punched out of the file
(`mirror.files.holes`), and `wait_for_room` lets ffmpeg's feeder wait while too much written
output is not stored yet: the work dir stays near the item's size.

Files made after ffmpeg (playlists, subtitles) join the same run at `finish`, read once
final, so one byte count covers every object of the item and `publish` makes them
visible in the order given (the master playlist last).

Integrity: each part carries a CRC32 that S3 checks, and the size and SHA-256 come from
the very bytes that were sent: the follower reads a part once, a MiB at a time, into the
SHA-256 and the part's CRC32; the request then reads the same range from the file
(`FileSlice`) and S3 refuses it unless its bytes match that CRC32.

Memory: no part is held whole. At most `max_concurrency + 2` parts are read and not yet
stored, for all files together, and each costs botocore's read buffers while it is sent
(`FileSlice`), so the bytes in flight stay a few MiB whatever the part size.

A file that ends before a whole part is one PUT in `publish` instead of a multipart upload
(create, part, complete): the multipart upload is only begun once a file has a whole part.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, TYPE_CHECKING, Any, cast

from mirror.domain.errors import MirrorError
from mirror.domain.objects import FileDigest, Upload
from mirror.domain.progress import AbortSignal, Progress, ProgressCallback
from mirror.files.growing_file import GrowingFile, GrowingReader
from mirror.files.holes import OutputHoles
from mirror.s3.checksums import PART_CHECKSUM_ALGORITHM
from mirror.s3.file_slice import FileSlice

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

log = logging.getLogger("mirror.storage")

REPORT_INTERVAL_S = 0.1
_SLOT_WAIT_S = 0.1
_ROOM_POLL_S = 0.02
# How much of a part the follower reads at once into the SHA-256 and the part's CRC32.
READ_CHUNK_BYTES = 1024 * 1024

Translate = Callable[[BaseException, str], MirrorError]


class _Stopped(Exception):
    """A follower noticed the run was stopped; not a failure of its own."""


class _FileStream:
    """One output: its multipart upload, the parts sent so far, the hash of their bytes."""

    def __init__(self, upload: Upload, growing: GrowingFile, *, follow: bool) -> None:
        self.upload = upload
        self.growing = growing
        self.follow = follow  # read while it grows, or only once final
        self.upload_id: str | None = None
        self.parts: dict[int, CompletedPartTypeDef] = {}
        self.hash = hashlib.sha256()
        self.size = 0  # bytes read and handed to a part
        self.read_all = False
        # A file shorter than one part: its CRC32, PUT whole in `publish` (no upload_id).
        self.single_crc: int | None = None
        # Disk given back once stored (mirror.files.holes): parts finish in any order, so
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
        self._files = [
            _FileStream(u, GrowingFile(u.path, self._stop), follow=follow) for u in uploads
        ]
        self._pool = ThreadPoolExecutor(max_concurrency, thread_name_prefix="s3-part")
        self._slots = threading.Semaphore(max_concurrency + 2)
        self._lock = threading.Lock()
        self._failure: BaseException | None = None
        self._sent = 0
        self._started = time.monotonic()
        self._last_report = 0.0
        self._followers: list[threading.Thread] = []
        self._futures: list[Future[None]] = []
        self._published = False

    # --- the pipeline's side ---------------------------------------------------------

    def __enter__(self) -> StreamingUpload:
        self._report(force=True)  # the upload began: 0 of what the files hold now
        for file in self._files:
            self._start_follower(file)
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if not self._published:
            self._stop.trigger(_Stopped("upload left unpublished"))
            self._abort_all()
        self._unlink()

    def finish(self, more: Sequence[Upload] = ()) -> dict[str, FileDigest]:
        """Every file is final now: send the rest, and `more` files made since (the
        playlists, subtitles), in the same run and byte count; wait for every part.
        Nothing is visible yet. Returns each file's size and SHA-256 by key."""
        for file in self._files:
            file.growing.finish()
        for upload in more:
            added = _FileStream(upload, GrowingFile(upload.path, self._stop), follow=False)
            added.growing.finish()
            with self._lock:
                self._files.append(added)
            self._start_follower(added)
        for thread in self._followers:
            while thread.is_alive():  # a request may hang: a stop must not wait for it
                thread.join(_SLOT_WAIT_S)
                self._raise_if_failed()
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
        """Complete every upload in the order given (the master playlist last): the
        moment the outputs become visible."""
        self._raise_if_failed()
        for file in self._files:
            if file.single_crc is not None:
                self._call("upload", self._put_whole, file, file.single_crc)
                continue
            parts = [file.parts[number] for number in sorted(file.parts)]
            self._call("upload", self._complete, file, parts)
        self._published = True
        self._pool.shutdown()
        self._report(force=True)  # the small files went up just now
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
        sent, elapsed = self._sent, time.monotonic() - self._started
        speed = round(sent / elapsed) if sent and elapsed > 0 else None
        return Progress(
            phase="upload", bytes_done=sent, bytes_total=max(total, sent), speed_bps=speed
        )

    # --- the threads -----------------------------------------------------------------

    def _start_follower(self, file: _FileStream) -> None:
        thread = threading.Thread(
            target=self._follow_file, args=(file,), name="s3-follow", daemon=True
        )
        thread.start()
        self._followers.append(thread)

    def _follow_file(self, file: _FileStream) -> None:
        try:
            while not file.follow and not file.growing.finished:
                if self._stop.wait(_SLOT_WAIT_S):
                    raise _Stopped()
            with file.growing.open() as reader:
                number = 1
                while True:
                    self._take_slot()
                    start = file.size
                    length, crc = self._read_part(file, reader)
                    if number == 1 and length < self._part_size:
                        file.single_crc = crc  # the whole file: one PUT when published
                        self._slots.release()
                        break
                    if not length:
                        self._slots.release()
                        break
                    if number == 1:
                        self._begin(file)
                    future = self._pool.submit(self._send_part, file, number, start, length, crc)
                    future.add_done_callback(self._part_done)
                    with self._lock:
                        self._futures.append(future)
                    number += 1
                    if length < self._part_size:
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

    def _read_part(self, file: _FileStream, reader: GrowingReader) -> tuple[int, int]:
        """Read the next part (or the rest) a chunk at a time into the file's SHA-256 and
        the part's CRC32; returns its length and CRC32. Only the chunk is held."""
        length, crc = 0, 0
        while length < self._part_size:
            wanted = min(READ_CHUNK_BYTES, self._part_size - length)
            chunk = reader.read(wanted)
            file.hash.update(chunk)
            file.holes.observe(chunk)
            crc = zlib.crc32(chunk, crc)
            length += len(chunk)
            if len(chunk) < wanted:  # the end of the finished file
                break
        file.size += length
        return length, crc

    def _begin(self, file: _FileStream) -> None:
        """Begin the file's multipart upload; abort it at once if the run stopped
        meanwhile (`_abort_requests` may have looked before the id was known)."""
        upload_id = self._call("upload", self._create, file.upload)
        with self._lock:
            file.upload_id = upload_id
            stopped = self._stop.is_set()
        if stopped:
            self._abort_requests()
            raise _Stopped()

    def _send_part(self, file: _FileStream, number: int, start: int, length: int, crc: int) -> None:
        if self._stop.is_set():
            return
        assert file.upload_id is not None
        with FileSlice(file.upload.path, start, length) as body:
            response = self._client.upload_part(
                Bucket=self._bucket,
                Key=file.upload.key,
                UploadId=file.upload_id,
                PartNumber=number,
                Body=cast(IO[bytes], body),
                ChecksumAlgorithm=PART_CHECKSUM_ALGORITHM,
                ChecksumCRC32=_crc32_header(crc),
            )
        part: CompletedPartTypeDef = {"ETag": response["ETag"], "PartNumber": number}
        if "ChecksumCRC32" in response:
            part["ChecksumCRC32"] = response["ChecksumCRC32"]
        with self._lock:
            file.parts[number] = part
            file.part_stored(number, length)
            self._sent += length
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
        with self._lock:
            begun = [(f, f.upload_id) for f in self._files if f.upload_id is not None]
        for file, upload_id in begun:
            try:
                self._client.abort_multipart_upload(
                    Bucket=self._bucket, Key=file.upload.key, UploadId=upload_id
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

    def _put_whole(self, file: _FileStream, crc: int) -> None:
        """A file shorter than one part, PUT whole: it becomes visible right here."""
        with FileSlice(file.upload.path, 0, file.size) as body:
            self._client.put_object(
                Bucket=self._bucket,
                Key=file.upload.key,
                Body=cast(IO[bytes], body),
                ContentType=file.upload.content_type,
                ChecksumAlgorithm=PART_CHECKSUM_ALGORITHM,
                ChecksumCRC32=_crc32_header(crc),
            )
        with self._lock:
            self._sent += file.size

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


def _crc32_header(crc: int) -> str:
    """A CRC32 as S3 carries it (`x-amz-checksum-crc32`): base64 of 4 big-endian bytes."""
    return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")


def _reason(abort: AbortSignal) -> BaseException:
    return abort.reason or _Stopped("aborted")
