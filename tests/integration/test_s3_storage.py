"""S3Storage against SeaweedFS over real HTTP: uploads, progress, stops, errors."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from mirror.domain.errors import JobCancelled, LeaseLost, PermanentError, TransientError
from mirror.domain.objects import Upload, audio_key, video_key
from mirror.domain.progress import AbortSignal, Progress
from mirror.s3.storage import (
    AUDIO_CONTENT_TYPE,
    VIDEO_CONTENT_TYPE,
    MiB,
    S3Storage,
)
from tests.fixtures.s3 import DUMMY_KEY, RestartableS3Target, S3Target

ITEM = "0123456789abcdef0123456789abcdef"
BIG_SIZE = 12 * MiB + 12345  # three 5 MiB parts, the last one short
SMALL_SIZE = 300_000


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 'video' bigger than two parts and a small 'audio' file of random bytes."""
    folder = tmp_path_factory.mktemp("outputs")
    video, audio = folder / "video.mp4", folder / "1-eng.m4a"
    video.write_bytes(os.urandom(BIG_SIZE))
    audio.write_bytes(os.urandom(SMALL_SIZE))
    return video, audio


def _uploads(outputs: tuple[Path, Path], prefix: str = "mirror") -> list[Upload]:
    video, audio = outputs
    return [
        Upload(video, video_key(prefix, ITEM), VIDEO_CONTENT_TYPE),
        Upload(audio, audio_key(prefix, ITEM, 1, "eng"), AUDIO_CONTENT_TYPE),
    ]


class Recorder:
    """Progress callback that keeps every report (called from s3transfer threads)."""

    def __init__(self) -> None:
        self.reports: list[Progress] = []
        self._lock = threading.Lock()

    def __call__(self, progress: Progress) -> None:
        with self._lock:
            self.reports.append(progress)


def test_upload_stores_every_file_with_bytes_and_content_type(
    s3: S3Target, outputs: tuple[Path, Path]
) -> None:
    storage = s3.make_storage()
    storage.check_bucket()
    uploads = _uploads(outputs)

    storage.upload_files(uploads, on_progress=Recorder(), abort=AbortSignal())

    assert storage.object_keys() == sorted(upload.key for upload in uploads)
    for upload in uploads:
        stored = s3.client.get_object(Bucket=s3.bucket, Key=upload.key)
        assert stored["ContentType"] == upload.content_type
        assert stored["Body"].read() == upload.path.read_bytes()
    assert s3.multipart_uploads() == []


def test_big_file_goes_up_in_parts(s3: S3Target, outputs: tuple[Path, Path]) -> None:
    storage = s3.make_storage()
    upload = _uploads(outputs)[0]

    storage.upload_files([upload], on_progress=Recorder(), abort=AbortSignal())

    head = s3.client.head_object(Bucket=s3.bucket, Key=upload.key)
    assert head["ETag"].strip('"').endswith("-3")  # multipart ETags end in -<parts>
    info = storage.head(upload.key)
    assert info is not None
    assert (info.size, info.content_type) == (BIG_SIZE, VIDEO_CONTENT_TYPE)


def test_progress_counts_bytes_up_to_the_sum_of_file_sizes(
    s3: S3Target, outputs: tuple[Path, Path]
) -> None:
    storage = s3.make_storage()
    recorder = Recorder()

    storage.upload_files(_uploads(outputs), on_progress=recorder, abort=AbortSignal())

    total = BIG_SIZE + SMALL_SIZE
    reports = recorder.reports
    assert all(report.phase == "upload" for report in reports)
    assert all(report.bytes_total == total for report in reports)
    assert reports[0].bytes_done == 0
    assert reports[-1].bytes_done == total
    assert reports[-1].percent == 100.0
    assert reports[-1].speed_bps is not None and reports[-1].speed_bps > 0
    done = [report.bytes_done or 0 for report in reports]
    assert all(0 <= value <= total for value in done)


def test_raising_progress_callback_stops_upload_and_reraises(
    s3: S3Target, outputs: tuple[Path, Path]
) -> None:
    storage = s3.make_storage()
    uploads = _uploads(outputs)

    def cancel_on_first_bytes(progress: Progress) -> None:
        if progress.bytes_done:
            raise JobCancelled("job was cancelled")

    with pytest.raises(JobCancelled, match="job was cancelled"):
        storage.upload_files(uploads, on_progress=cancel_on_first_bytes, abort=AbortSignal())

    assert storage.head(uploads[0].key) is None
    assert s3.multipart_uploads() == []


def test_abort_signal_from_another_thread_stops_upload(
    s3: S3Target, outputs: tuple[Path, Path]
) -> None:
    storage = s3.make_storage()
    uploads = _uploads(outputs)
    abort = AbortSignal()
    bytes_seen, aborted = threading.Event(), threading.Event()
    abort.on_abort(aborted.set)

    def hold_until_aborted(progress: Progress) -> None:
        if progress.bytes_done:
            bytes_seen.set()
            # Keep this transfer thread busy until the abort lands, so the upload
            # cannot finish first; the abort must still end it.
            aborted.wait(10)

    def abort_when_bytes_flow() -> None:
        assert bytes_seen.wait(30)
        abort.trigger(LeaseLost("lease lost"))

    aborter = threading.Thread(target=abort_when_bytes_flow)
    aborter.start()
    started = time.monotonic()
    with pytest.raises(LeaseLost, match="lease lost"):
        storage.upload_files(uploads, on_progress=hold_until_aborted, abort=abort)
    aborter.join()

    assert time.monotonic() - started < 10
    assert storage.head(uploads[0].key) is None
    assert s3.multipart_uploads() == []


class SilentServer:
    """Accepts connections and reads requests, never answers: a hung S3 endpoint."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.request_seen = threading.Event()
        self._connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            self._connections.append(connection)
            threading.Thread(target=self._swallow, args=(connection,), daemon=True).start()

    def _swallow(self, connection: socket.socket) -> None:
        try:
            while connection.recv(65536):
                self.request_seen.set()
        except OSError:
            return

    def close(self) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        for connection in self._connections:
            connection.close()
        self._thread.join(5)


def test_abort_does_not_wait_for_a_hung_endpoint(outputs: tuple[Path, Path]) -> None:
    server = SilentServer()
    try:
        storage = S3Storage(
            "hung-bucket",
            endpoint_url=server.endpoint_url,
            access_key_id=DUMMY_KEY,
            secret_access_key=DUMMY_KEY,
            part_size=5 * MiB,
            max_attempts=1,
            read_timeout_s=30.0,
        )
        abort = AbortSignal()

        def abort_once_request_hangs() -> None:
            assert server.request_seen.wait(30)
            abort.trigger(JobCancelled("cancelled while S3 hangs"))

        aborter = threading.Thread(target=abort_once_request_hangs)
        aborter.start()
        started = time.monotonic()
        with pytest.raises(JobCancelled):
            storage.upload_files(_uploads(outputs), on_progress=Recorder(), abort=abort)
        aborter.join()
        assert time.monotonic() - started < 10  # far below the 30 s read timeout
    finally:
        server.close()  # lets the abandoned transfer threads fail and finish


def test_already_fired_abort_uploads_nothing(s3: S3Target, outputs: tuple[Path, Path]) -> None:
    storage = s3.make_storage()
    abort = AbortSignal()
    abort.trigger(JobCancelled("cancelled before upload"))

    with pytest.raises(JobCancelled):
        storage.upload_files(_uploads(outputs), on_progress=Recorder(), abort=abort)

    assert storage.object_keys() == []


def test_abort_fired_while_transfers_are_being_submitted_stops_them(
    s3: S3Target, outputs: tuple[Path, Path]
) -> None:
    storage = s3.make_storage()
    abort = AbortSignal()

    def abort_at_first_report(progress: Progress) -> None:
        abort.trigger(JobCancelled("cancelled at start"))  # no raise: the signal must do it

    with pytest.raises(JobCancelled, match="cancelled at start"):
        storage.upload_files(_uploads(outputs), on_progress=abort_at_first_report, abort=abort)

    assert storage.object_keys() == []
    assert s3.multipart_uploads() == []


def test_missing_bucket_is_permanent_and_named(s3: S3Target, outputs: tuple[Path, Path]) -> None:
    storage = s3.make_storage(bucket="no-such-bucket-for-mirror")

    with pytest.raises(
        PermanentError, match="S3 bucket 'no-such-bucket-for-mirror' does not exist"
    ):
        storage.check_bucket()
    with pytest.raises(PermanentError, match="'no-such-bucket-for-mirror' does not exist"):
        storage.upload_files(_uploads(outputs), on_progress=Recorder(), abort=AbortSignal())


def test_missing_output_file_is_transient(s3: S3Target, tmp_path: Path) -> None:
    storage = s3.make_storage()
    missing = Upload(tmp_path / "gone.mp4", video_key("", ITEM), VIDEO_CONTENT_TYPE)

    with pytest.raises(TransientError, match="cannot read"):
        storage.upload_files([missing], on_progress=Recorder(), abort=AbortSignal())


def test_stale_multipart_uploads_of_our_keys_are_aborted_and_others_kept(s3: S3Target) -> None:
    storage = s3.make_storage()
    ours = [video_key("m", ITEM), audio_key("m", ITEM, 1, "eng")]
    other_key = f"m/{ITEM}/notes.bin"
    s3.client.create_multipart_upload(Bucket=s3.bucket, Key=ours[0])
    kept = s3.client.create_multipart_upload(Bucket=s3.bucket, Key=other_key)["UploadId"]

    assert storage.abort_stale_multipart_uploads(ours) == 1

    assert s3.multipart_uploads() == [(other_key, kept)]
    assert storage.abort_stale_multipart_uploads(ours) == 0
    assert storage.abort_stale_multipart_uploads([]) == 0


def test_s3_down_is_transient_and_upload_works_once_back(
    s3_restartable: RestartableS3Target, outputs: tuple[Path, Path]
) -> None:
    s3 = s3_restartable
    storage = s3.make_storage(max_attempts=2, connect_timeout_s=1.0, read_timeout_s=5.0)
    s3.stop()

    started = time.monotonic()
    with pytest.raises(TransientError, match=f"S3 endpoint {s3.endpoint_url} is unreachable"):
        storage.check_bucket()
    with pytest.raises(TransientError, match=f"S3 upload failed: .*{s3.endpoint_url}"):
        storage.upload_files(_uploads(outputs), on_progress=Recorder(), abort=AbortSignal())
    assert time.monotonic() - started < 20

    s3.start()  # the same server again: SeaweedFS kept the bucket on disk
    storage.check_bucket()
    storage.upload_files(_uploads(outputs), on_progress=Recorder(), abort=AbortSignal())
    assert len(storage.object_keys()) == 2


def test_s3_going_down_mid_upload_is_transient(
    s3_restartable: RestartableS3Target, outputs: tuple[Path, Path]
) -> None:
    s3 = s3_restartable
    storage = s3.make_storage(max_attempts=2, connect_timeout_s=1.0, read_timeout_s=5.0)

    def kill_server_on_first_bytes(progress: Progress) -> None:
        if progress.bytes_done:
            s3.stop()

    with pytest.raises(TransientError, match="S3 upload failed"):
        storage.upload_files(
            _uploads(outputs), on_progress=kill_server_on_first_bytes, abort=AbortSignal()
        )


def test_a_storage_is_cheap_to_make_and_still_signs_with_its_own_keys(s3: S3Target) -> None:
    """Every storage of a process shares botocore's parsed service models (a client of a
    fresh boto3 session parses them again, ~0.1 CPU-s), not its credentials."""
    s3.make_storage().check_bucket()  # the process's first storage parses the models
    started = time.process_time()
    storages = [s3.make_storage() for _ in range(10)]
    per_storage = (time.process_time() - started) / len(storages)
    print(f"one S3Storage: {per_storage * 1000:.1f} ms of CPU")
    assert per_storage < 0.03

    wrong = s3.make_storage(secret_access_key="not-" + s3.secret_access_key)
    with pytest.raises(PermanentError):
        wrong.check_bucket()
    storages[0].check_bucket()  # made before the wrong one, with the right secret
    s3.make_storage().check_bucket()  # and after it
