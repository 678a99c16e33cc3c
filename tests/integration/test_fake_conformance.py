"""The in-memory fakes (mirror/testing/fakes.py) answer like the adapters they stand in for.

One scenario per fake, run on the fake and on the real adapter against Postgres: a fake
that drifts from its adapter fails here, not in the unit tests that rely on it.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from imageio_ffmpeg import get_ffmpeg_exe
from sqlalchemy import text

from mirror.db.attempt_log import AttemptLog
from mirror.db.repository import JobRepository
from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.demo.stand_in.trickplay import make_trickplay
from mirror.domain.errors import PermanentError, ShutdownRequested, TransientError
from mirror.domain.jobs import AttemptStats, Fence, FleetMode, Lease, Mirrored
from mirror.domain.objects import Upload
from mirror.domain.progress import AbortSignal, Progress
from mirror.domain.thumbnails import TrickplayTiles
from mirror.jellyfin.client import JellyfinClient
from mirror.pipeline.steps import MediaServer, ObjectStore
from mirror.runner.attempt import AttemptHistory
from mirror.testing.fake_jellyfin import InMemoryJellyfin
from mirror.testing.fake_queue import InMemoryJobQueue
from mirror.testing.fake_s3 import InMemoryObjectStore
from mirror.testing.fakes import InMemoryBeatQueue
from mirror.testing.library_samples import sidecar_layout
from tests.fixtures.s3 import S3Target

ITEM = "c0ffee00c0ffee00c0ffee00c0ffee00"
UNKNOWN = "0123456789abcdef0123456789abcdef"


@dataclass
class BeatSubject:
    """What the heartbeat scenario drives: the queue, its job, and the two interventions."""

    beat: Callable[[uuid.UUID, uuid.UUID], Fence]
    job_id: uuid.UUID
    token: uuid.UUID
    cancel: Callable[[], object]
    take_over: Callable[[], object]
    set_fleet: Callable[[FleetMode], object]


def real_queue(repo: JobRepository) -> BeatSubject:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None

    def take_over() -> None:  # the reaper hands the job on; a new attempt claims it
        repo.return_stale_to_new(0.0)
        assert repo.claim_next("other") is not None

    return BeatSubject(
        beat=lambda job, token: repo.heartbeat(job, token, {"phase": "download"}),
        job_id=lease.job_id,
        token=lease.token,
        cancel=lambda: repo.cancel(lease.job_id),
        take_over=take_over,
        set_fleet=lambda mode: repo.set_fleet_mode(mode, changed_by="test"),
    )


def fake_queue(repo: JobRepository) -> BeatSubject:
    job_id, token = uuid.uuid4(), uuid.uuid4()
    fake = InMemoryBeatQueue(job_id, token)
    return BeatSubject(
        beat=lambda job, tok: fake.heartbeat(job, tok, {"phase": "download"}),
        job_id=job_id,
        token=token,
        cancel=fake.cancel,
        take_over=fake.take_over,
        set_fleet=fake.set_fleet_mode,
    )


@pytest.mark.parametrize("make", [real_queue, fake_queue], ids=["JobRepository", "fake"])
def test_heartbeat_fences_the_same_way(
    make: Callable[[JobRepository], BeatSubject], repo: JobRepository
) -> None:
    subject = make(repo)
    assert subject.beat(subject.job_id, subject.token) is Fence.OK
    assert subject.beat(subject.job_id, uuid.uuid4()) is Fence.LEASE_LOST  # a stranger's token
    subject.cancel()
    assert subject.beat(subject.job_id, subject.token) is Fence.CANCELLED


@pytest.mark.parametrize("make", [real_queue, fake_queue], ids=["JobRepository", "fake"])
def test_heartbeat_answers_paused_only_while_the_fleet_is_paused(
    make: Callable[[JobRepository], BeatSubject], repo: JobRepository
) -> None:
    subject = make(repo)
    subject.set_fleet(FleetMode.DRAINING)
    assert subject.beat(subject.job_id, subject.token) is Fence.OK
    subject.set_fleet(FleetMode.PAUSED)
    assert subject.beat(subject.job_id, subject.token) is Fence.PAUSED
    assert subject.beat(subject.job_id, uuid.uuid4()) is Fence.LEASE_LOST
    subject.set_fleet(FleetMode.RUNNING)
    assert subject.beat(subject.job_id, subject.token) is Fence.OK


@pytest.mark.parametrize("make", [real_queue, fake_queue], ids=["JobRepository", "fake"])
def test_a_taken_over_job_answers_lease_lost(
    make: Callable[[JobRepository], BeatSubject], repo: JobRepository
) -> None:
    subject = make(repo)
    subject.take_over()
    assert subject.beat(subject.job_id, subject.token) is Fence.LEASE_LOST


# -- the queue: JobQueue + AttemptQueue + AttemptHistory -----------------------------------


@dataclass
class QueueSubject:
    """A queue, its history, and the two things a scenario does beside the statements."""

    queue: InMemoryJobQueue | JobRepository
    history: AttemptHistory
    enqueue: Callable[[str], uuid.UUID]
    make_stale: Callable[[uuid.UUID], object]
    outcomes: Callable[[uuid.UUID], list[str | None]]


def real_queue(repo: JobRepository) -> QueueSubject:
    log = AttemptLog(repo.engine)

    def enqueue(item: str) -> uuid.UUID:
        return repo.enqueue([item])[0].job.id

    def make_stale(job_id: uuid.UUID) -> None:
        with repo.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE media_mirror.jobs SET heartbeat_at = now() - interval '1 h' "
                    "WHERE id = :id"
                ),
                {"id": job_id},
            )

    return QueueSubject(
        repo, log, enqueue, make_stale, lambda j: [a.outcome for a in log.attempts_of(j)]
    )


def fake_queue(repo: JobRepository) -> QueueSubject:
    fake = InMemoryJobQueue()
    return QueueSubject(
        fake,
        fake,
        lambda item: fake.enqueue([item])[0].id,
        fake.make_stale,
        lambda j: [a.outcome for a in fake.attempts_of(j)],
    )


QUEUES = pytest.mark.parametrize(
    "make_queue", [real_queue, fake_queue], ids=["JobRepository", "fake"]
)


def claim(subject: QueueSubject, worker: str = "w:1:0") -> Lease:
    lease = subject.queue.claim_next(worker)
    assert lease is not None
    return lease


def end(subject: QueueSubject, lease: Lease, outcome: str) -> None:
    assert subject.history.end_attempt(lease.token, outcome, None, AttemptStats())


@QUEUES
def test_queue_retries_releases_waits_and_finishes_the_same_way(
    make_queue: Callable[[JobRepository], QueueSubject], repo: JobRepository
) -> None:
    subject = make_queue(repo)
    queue = subject.queue
    job_id = subject.enqueue(ITEM)
    assert subject.enqueue(ITEM) == job_id  # one active job per item
    assert queue.claim_next("w:1:0") is not None and queue.claim_next("w:1:1") is None
    assert queue.return_stale_to_new(3600) == []  # nothing stale
    first = queue.latest_for_item(ITEM)
    assert first.lease_token is not None
    lease = Lease(first, first.lease_token)
    assert (lease.job.status, lease.job.attempts, lease.job.worker_id) == ("processing", 1, "w:1:0")
    assert queue.heartbeat(lease.job_id, lease.token, {"phase": "download"}) is Fence.OK
    assert queue.latest_for_item(ITEM).heartbeat_data == {"phase": "download"}

    # retry: back to new with the error, the attempt counted
    assert queue.fail_or_retry(lease.job_id, lease.token, "cut", backoff_s=0) == (Fence.OK, "new")
    end(subject, lease, "retry")
    assert queue.heartbeat(lease.job_id, lease.token, None) is Fence.LEASE_LOST
    job = queue.latest_for_item(ITEM)
    assert (job.status, job.attempts, job.error, job.lease_token) == ("new", 1, "cut", None)

    # release: back to new without using an attempt
    lease = claim(subject)
    assert lease.job.attempts == 2
    assert queue.release(lease.job_id, lease.token, note="shutdown") is Fence.OK
    end(subject, lease, "released")
    job = queue.latest_for_item(ITEM)
    assert (job.status, job.attempts, job.error) == ("new", 1, "shutdown")

    # not ready twice in a row: the waits count up, no attempt used
    for waits in (1, 2):
        lease = claim(subject)
        fate = queue.release_until_ready(
            lease.job_id, lease.token, note="unprobed", phase="waiting", first_delay_s=0
        )
        assert fate == (Fence.OK, "new")
        end(subject, lease, "waiting")
        job = queue.latest_for_item(ITEM)
        assert (job.status, job.attempts, job.error) == ("new", 1, "unprobed")
        assert job.heartbeat_data == {"phase": "waiting", "waits": waits, "retry_in_s": 0}

    # done, repeatable by the same attempt; any other token is fenced off
    lease = claim(subject)
    done = Mirrored(video_key="v.mp4", audio_keys=[{"key": "a.m4a"}], manifest_key="m.json")
    assert queue.mark_done(lease.job_id, lease.token, done) is Fence.OK
    assert queue.mark_done(lease.job_id, lease.token, done) is Fence.OK
    assert queue.mark_done(lease.job_id, uuid.uuid4(), done) is Fence.LEASE_LOST
    assert queue.heartbeat(lease.job_id, lease.token, None) is Fence.LEASE_LOST
    end(subject, lease, "done")
    job = queue.latest_for_item(ITEM)
    assert (job.status, job.attempts, job.error) == ("done", 2, None)
    assert (job.video_key, job.audio_keys, job.manifest_key) == (
        "v.mp4",
        [{"key": "a.m4a"}],
        "m.json",
    )
    assert job.finished_at is not None
    assert subject.outcomes(job_id) == ["retry", "released", "waiting", "waiting", "done"]


@QUEUES
def test_queue_fences_cancel_and_fails_when_attempts_run_out(
    make_queue: Callable[[JobRepository], QueueSubject], repo: JobRepository
) -> None:
    subject = make_queue(repo)
    queue = subject.queue
    cancelled = subject.enqueue(ITEM)
    lease = claim(subject)
    queue.cancel(cancelled)
    assert queue.heartbeat(lease.job_id, lease.token, None) is Fence.CANCELLED
    assert queue.mark_done(lease.job_id, lease.token, Mirrored("v", [])) is (Fence.CANCELLED)
    assert queue.fail_or_retry(lease.job_id, lease.token, "x", backoff_s=0) == (
        Fence.CANCELLED,
        None,
    )
    assert queue.latest_for_item(ITEM).status == "cancelled"

    other = ITEM.replace("c0", "d1")
    subject.enqueue(other)
    for attempt in (1, 2, 3):
        lease = claim(subject)
        assert lease.job.attempts == attempt
        fate = queue.fail_or_retry(lease.job_id, lease.token, "502", backoff_s=0)
        assert fate == (Fence.OK, "new" if attempt < 3 else "failed")
    job = queue.latest_for_item(other)
    assert (job.status, job.error) == ("failed", "502 (attempts used up: 3 of 3)")
    assert job.finished_at is not None
    assert queue.mark_failed(lease.job_id, lease.token, "late") is Fence.LEASE_LOST


@QUEUES
def test_queue_reaper_returns_a_silent_attempts_job_and_fences_it_off(
    make_queue: Callable[[JobRepository], QueueSubject], repo: JobRepository
) -> None:
    subject = make_queue(repo)
    queue = subject.queue
    job_id = subject.enqueue(ITEM)
    lease = claim(subject, "dead-host:1:0")
    assert queue.return_stale_to_new(30) == []
    subject.make_stale(job_id)
    [rescued] = queue.return_stale_to_new(30)
    assert (rescued.job_id, rescued.status, rescued.attempts, rescued.previous_worker) == (
        job_id,
        "new",
        1,
        "dead-host:1:0",
    )
    job = queue.latest_for_item(ITEM)
    assert job.status == "new"
    assert job.error == (
        "worker dead-host:1:0 stopped sending heartbeats (none for over 30s); returned to the queue"
    )
    assert queue.heartbeat(lease.job_id, lease.token, None) is Fence.LEASE_LOST
    assert queue.release(lease.job_id, lease.token) is Fence.LEASE_LOST
    again = claim(subject)
    assert again.job.attempts == 2
    assert subject.outcomes(job_id) == ["stale", None]


@QUEUES
def test_queue_claims_nothing_unless_the_fleet_runs_and_keeps_the_first_pause(
    make_queue: Callable[[JobRepository], QueueSubject], repo: JobRepository
) -> None:
    subject = make_queue(repo)
    queue = subject.queue
    subject.enqueue(ITEM)
    subject.enqueue(UNKNOWN)
    lease = claim(subject)
    assert queue.fleet_state().mode is FleetMode.RUNNING
    first = queue.set_fleet_mode(FleetMode.PAUSED, changed_by="alice@a", reason="swap")
    assert (first.before, first.changed) == (FleetMode.RUNNING, True)
    again = queue.set_fleet_mode(FleetMode.PAUSED, changed_by="bob@b")
    assert not again.changed
    state = queue.fleet_state()
    assert (state.mode, state.changed_by, state.reason) == (FleetMode.PAUSED, "alice@a", "swap")
    assert (state.running, state.queued) == (1, 1)
    assert queue.claim_next("w:1:1") is None
    assert queue.heartbeat(lease.job_id, lease.token, None) is Fence.PAUSED
    assert queue.release(lease.job_id, lease.token) is Fence.OK
    drained = queue.set_fleet_mode(FleetMode.DRAINING, changed_by="bob@b")
    assert drained.changed and drained.state.changed_by == "bob@b"
    assert queue.claim_next("w:1:1") is None
    resumed = queue.set_fleet_mode(FleetMode.RUNNING, changed_by="bob@b")
    assert resumed.before is FleetMode.DRAINING
    assert (resumed.state.running, resumed.state.queued) == (0, 2)
    assert queue.claim_next("w:1:1") is not None


# -- Jellyfin: MediaServer ----------------------------------------------------------------


@dataclass
class MediaSubject:
    media: MediaServer
    add_item: Callable[..., str]
    cut_after: Callable[[int, int], object]
    download_requests: Callable[[], int]


def real_media(jellyfin: JellyfinStandIn, closing: ExitStack) -> MediaSubject:
    client = closing.enter_context(
        JellyfinClient(jellyfin.url, jellyfin.api_key, retry_initial_wait=0.01)
    )
    return MediaSubject(
        client,
        jellyfin.add_item,
        jellyfin.cut_after,
        lambda: len(jellyfin.download_requests()),
    )


def fake_media(jellyfin: JellyfinStandIn, closing: ExitStack) -> MediaSubject:
    fake = InMemoryJellyfin()
    return MediaSubject(fake, fake.add_item, fake.cut_after, lambda: len(fake.download_requests))


MEDIA = pytest.mark.parametrize(
    "make_media", [real_media, fake_media], ids=["JellyfinClient+stand-in", "fake"]
)


def _progress() -> tuple[list[Progress], Callable[[Progress], None]]:
    seen: list[Progress] = []
    return seen, seen.append


@MEDIA
def test_media_server_answers_items_downloads_and_subtitles_the_same_way(
    make_media: Callable[[JellyfinStandIn, ExitStack], MediaSubject],
    jellyfin: JellyfinStandIn,
    sample_h264_aac: SampleMedia,
    tmp_path: Path,
) -> None:
    with ExitStack() as closing:
        check_media_server(make_media(jellyfin, closing), sample_h264_aac, tmp_path)


def check_media_server(subject: MediaSubject, sample: SampleMedia, tmp_path: Path) -> None:
    layout = sidecar_layout(tmp_path / "library" / "Movie", sample)
    item = subject.add_item(
        layout.sample.path,
        name="Movie",
        streams=layout.sample.streams,
        duration_s=4.0,
    )
    unprobed = subject.add_item(
        sample.path, name="New", streams=sample.streams, duration_s=4.0, probed=False
    )

    got = subject.media.get_item(item)
    assert (got.id, got.name, got.type, got.container, got.size) == (
        item,
        "Movie",
        "Movie",
        "mkv",
        layout.sample.size,
    )
    assert [(s.index, s.type, s.is_external) for s in got.streams][:2] == [
        (0, "Subtitle", True),
        (1, "Audio", True),
    ]
    assert got.source_id == item and got.path == str(layout.sample.path)
    assert subject.media.get_item(unprobed).streams == ()
    with pytest.raises(PermanentError, match="not found in Jellyfin"):
        subject.media.get_item(UNKNOWN)

    # a body cut twice is resumed within the one call; the bytes are the file's
    subject.cut_after(layout.sample.size // 3, 2)
    dest = tmp_path / "dl" / "source.mkv"
    dest.parent.mkdir()
    seen, on_progress = _progress()
    size = subject.media.download(
        item, dest, expected_size=layout.sample.size, on_progress=on_progress, abort=AbortSignal()
    ).size
    assert size == layout.sample.size
    assert dest.read_bytes() == layout.sample.path.read_bytes()
    assert subject.download_requests() == 3
    done = [p.bytes_done for p in seen]
    assert done[-1] == size and all(p.phase == "download" for p in seen)

    # a partial file of the version served is resumed, not fetched again
    dest.write_bytes(layout.sample.path.read_bytes()[:1000])
    subject.media.download(
        item, dest, expected_size=size, on_progress=on_progress, abort=AbortSignal()
    )
    assert dest.read_bytes() == layout.sample.path.read_bytes()

    # a size that is not the one reported: transient, naming both
    dest.unlink()
    with pytest.raises(
        TransientError,
        match=rf"serves {size} bytes .* but reported {size + 1} \(MediaSources Size\)",
    ):
        subject.media.download(
            item, dest, expected_size=size + 1, on_progress=on_progress, abort=AbortSignal()
        )

    # an abort already set stops the download with its reason
    stopped = AbortSignal()
    stopped.trigger(ShutdownRequested("stop"))
    with pytest.raises(ShutdownRequested):
        subject.media.download(
            item, tmp_path / "dl" / "x.mkv", expected_size=size, on_progress=on_progress,
            abort=stopped,
        )  # fmt: skip

    # a known item whose file is missing on disk (a share offline): transient, saying so
    gone = tmp_path / "offline.mkv"
    gone.write_bytes(b"x" * 1000)
    offline = subject.add_item(gone, name="Offline", streams=sample.streams, duration_s=4.0)
    gone.unlink()
    with pytest.raises(TransientError, match=f"^source file missing on the server: .*{offline}"):
        subject.media.download(
            offline, tmp_path / "dl" / "o.mkv", expected_size=None, on_progress=on_progress,
            abort=AbortSignal(),
        )  # fmt: skip

    # subtitles by Jellyfin's Index: the sidecar .srt (0) and the file's own (3 + 2)
    sidecar = subject.media.fetch_subtitle(item, item, 0)
    assert sidecar.startswith(b"WEBVTT") and b"Sidecar subtitle" in sidecar
    own = subject.media.fetch_subtitle(item, item, 5)
    assert own.startswith(b"WEBVTT")

    # Trickplay tiles Jellyfin made: listed on the item, each sheet served by its index
    # (404, permanent, past the last one); an item without them lists none.
    tiles_dir = tmp_path / "trickplay" / "320"
    made = make_trickplay(sample.path, tiles_dir, 4.0, ffmpeg=get_ffmpeg_exe(), interval_ms=1000)
    tiled = subject.add_item(
        sample.path, name="Tiled", streams=sample.streams, duration_s=4.0, trickplay=made
    )
    tiles = subject.media.get_item(tiled).trickplay
    assert tiles == TrickplayTiles(tiled, 320, made.height, 10, 10, 4, 1.0)
    assert subject.media.fetch_trickplay_tile(tiled, tiles, 0) == (tiles_dir / "0.jpg").read_bytes()
    with pytest.raises(PermanentError):
        subject.media.fetch_trickplay_tile(tiled, tiles, 1)
    assert subject.media.get_item(item).trickplay is None


# -- S3: ObjectStore ------------------------------------------------------------------------


@dataclass
class StoreSubject:
    store: ObjectStore
    body: Callable[[str], bytes]
    start_multipart: Callable[[str], object]
    missing: ObjectStore  # the same store on a bucket that does not exist


def real_store_s3(s3: S3Target) -> StoreSubject:
    def body(key: str) -> bytes:
        data: bytes = s3.client.get_object(Bucket=s3.bucket, Key=key)["Body"].read()
        return data

    return StoreSubject(
        s3.make_storage(),
        body,
        lambda key: s3.client.create_multipart_upload(Bucket=s3.bucket, Key=key),
        s3.make_storage(bucket="no-such-bucket-here"),
    )


def fake_store_s3(s3: S3Target) -> StoreSubject:
    fake = InMemoryObjectStore()
    return StoreSubject(
        fake, fake.body, fake.start_multipart_upload, InMemoryObjectStore(exists=False)
    )


@pytest.mark.parametrize(
    "make_store", [real_store_s3, fake_store_s3], ids=["S3Storage+SeaweedFS", "fake"]
)
def test_object_store_uploads_digests_and_cleans_up_the_same_way(
    make_store: Callable[[S3Target], StoreSubject], s3: S3Target, tmp_path: Path
) -> None:
    subject = make_store(s3)
    store = subject.store
    store.check_bucket()
    files = {"p/i/video.mp4": os.urandom(300_000), "p/i/audio/1-eng.m4a": b"audio" * 1000}
    uploads = []
    for n, (key, data) in enumerate(files.items()):
        path = tmp_path / f"f{n}"
        path.write_bytes(data)
        uploads.append(Upload(path, key, "video/mp4"))
    seen, on_progress = _progress()

    digests = store.upload_files(uploads, on_progress=on_progress, abort=AbortSignal())

    assert {key: (d.size, d.sha256) for key, d in digests.items()} == {
        key: (len(data), hashlib.sha256(data).hexdigest()) for key, data in files.items()
    }
    assert all(subject.body(key) == data for key, data in files.items())
    total = sum(len(data) for data in files.values())
    assert (seen[0].bytes_done, seen[-1].bytes_done, seen[-1].bytes_total) == (0, total, total)
    assert store.upload_files([], on_progress=on_progress, abort=AbortSignal()) == {}

    store.put_bytes("p/i/manifest.json", b'{"a": 1}', "application/json")
    assert subject.body("p/i/manifest.json") == b'{"a": 1}'

    subject.start_multipart("p/i/video.mp4")
    subject.start_multipart("p/other/video.mp4")
    assert store.abort_stale_multipart_uploads(["p/i/video.mp4", "p/i/x.m4a"]) == 1
    assert store.abort_stale_multipart_uploads(["p/i/video.mp4"]) == 0
    assert store.abort_stale_multipart_uploads([]) == 0

    stopped = AbortSignal()
    stopped.trigger(ShutdownRequested("stop"))
    with pytest.raises(ShutdownRequested):
        store.upload_files(uploads, on_progress=on_progress, abort=stopped)

    with pytest.raises(PermanentError, match="does not exist"):
        subject.missing.check_bucket()
    with pytest.raises(PermanentError, match="does not exist"):
        subject.missing.upload_files(uploads, on_progress=on_progress, abort=AbortSignal())


@pytest.mark.parametrize(
    "make_store", [real_store_s3, fake_store_s3], ids=["S3Storage+SeaweedFS", "fake"]
)
def test_streamed_outputs_are_invisible_until_published_and_gone_when_not(
    make_store: Callable[[S3Target], StoreSubject], s3: S3Target, tmp_path: Path
) -> None:
    """`stream_files`: digests from `finish`, objects only after `publish`; leaving the
    block without publishing leaves neither objects nor unfinished uploads behind."""
    subject = make_store(s3)
    store = subject.store
    files = {"p/s/video.mp4": os.urandom(200_000), "p/s/audio/1-eng.m4a": b"audio" * 500}
    uploads = []
    for n, (key, data) in enumerate(files.items()):
        path = tmp_path / f"s{n}"
        path.write_bytes(data)
        uploads.append(Upload(path, key, "video/mp4"))
    _, on_progress = _progress()

    with store.stream_files(
        uploads, follow=False, on_progress=on_progress, abort=AbortSignal()
    ) as outputs:
        digests = outputs.finish()
    assert {key: (d.size, d.sha256) for key, d in digests.items()} == {
        key: (len(data), hashlib.sha256(data).hexdigest()) for key, data in files.items()
    }
    for key in files:  # not published: nothing to read, nothing left unfinished
        with pytest.raises(Exception):  # noqa: B017 - S3's NoSuchKey or the fake's KeyError
            subject.body(key)
    assert store.abort_stale_multipart_uploads(list(files)) == 0

    with store.stream_files(
        uploads, follow=False, on_progress=on_progress, abort=AbortSignal()
    ) as outputs:
        outputs.finish()
        outputs.publish()
    assert all(subject.body(key) == data for key, data in files.items())
    assert store.abort_stale_multipart_uploads(list(files)) == 0
