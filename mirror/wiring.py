"""The composition root: builds the real adapters from settings, in one place.

Everything else receives what it needs (a repository, a client, a storage) instead of
reading settings or constructing adapters itself, so tests can pass their own.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from mirror.db import migrations
from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import DashboardQueries
from mirror.db.engine import check_schema, make_engine
from mirror.db.mirrored import MirroredItems
from mirror.db.removals import Removals
from mirror.db.repository import JobRepository
from mirror.db.sessions import EndedSessionStore
from mirror.db.stats import QueueStats
from mirror.domain.errors import ConfigError
from mirror.domain.logs import get_logger
from mirror.settings import Settings

# The worker's adapters (httpx, boto3, the pipeline) are imported where they are built:
# `mirror show`, `mirror jobs` and `mirror serve` start without them (about 0.3 s each).
if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from mirror.jellyfin.client import JellyfinClient
    from mirror.pipeline.download_gate import DownloadGate
    from mirror.pipeline.steps import TranscodeOptions
    from mirror.runner.worker import Worker
    from mirror.s3.bucket import Bucket
    from mirror.s3.links import ObjectLink
    from mirror.s3.storage import S3Storage
    from mirror.transcode.encoder_probe import EncoderChoice

# Connections a worker keeps open while idle; more open under load and close when done.
WORKER_IDLE_CONNECTIONS = 1


def worker_concurrency(settings: Settings, flag: int | None = None) -> int:
    """Jobs at once in this worker: `--concurrency` if given, else MIRROR_CONCURRENCY."""
    return flag or settings.concurrency


def worker_pool_size(concurrency: int, *, leased_slots: bool = False) -> int:
    """The most pooled connections a worker can use at once (README: connections).

    Per job slot two: its heartbeat keep-alive and its own statements (done, its fate,
    the attempt history) may each wait on Postgres at the same time; plus one for the
    claim loop (claim, reaper, work-dir clean-up). The LISTEN connection is extra. With
    `leased_slots` (download slots as rows, MIRROR_PGBOUNCER=transaction) a third per
    job: renewing its slot's lease.
    """
    return (3 if leased_slots else 2) * concurrency + 1


def connections_per_worker(
    concurrency: int, *, transaction_pooling: bool = False, download_cap: bool = False
) -> int:
    """The most connections one worker process opens (README: Connections at fleet size).

    Session mode: the pool, LISTEN, and one per download slot held or awaited. Transaction
    mode: the pool alone (no LISTEN; slot leases are pooled statements), 2c+1 or 3c+1.
    """
    if transaction_pooling:
        return worker_pool_size(concurrency, leased_slots=download_cap)
    return worker_pool_size(concurrency) + 1 + (concurrency if download_cap else 0)


def database_engine(
    settings: Settings, *, check: bool = True, concurrency: int | None = None
) -> Engine:
    """Engine for MIRROR_DATABASE_URL; with `check`, fail fast if the schema is missing.

    With `concurrency`, the engine of a worker running that many jobs: sized by
    `worker_pool_size`, so waiting for a pooled connection never outlasts an outage.
    """
    pooling = settings.transaction_pooling
    if concurrency is None:
        engine = make_engine(
            settings.database_url_required,
            pool_size=settings.concurrency + 2,
            transaction_pooling=pooling,
        )
    else:
        leased = pooling and bool(settings.jellyfin_max_downloads)
        engine = make_engine(
            settings.database_url_required,
            pool_size=WORKER_IDLE_CONNECTIONS,
            max_overflow=worker_pool_size(concurrency, leased_slots=leased)
            - WORKER_IDLE_CONNECTIONS,
            application_name=f"mirror-worker-{os.getpid()}",
            transaction_pooling=pooling,
        )
    if check:
        try:
            check_schema(engine)
        except BaseException:
            engine.dispose()
            raise
    return engine


@dataclass(frozen=True, slots=True)
class Database:
    """Every Postgres adapter, sharing one engine (one pool): built here, used by the edges."""

    engine: Engine
    jobs: JobRepository
    attempts: AttemptLog
    mirrored: MirroredItems
    removals: Removals
    stats: QueueStats
    dashboard: DashboardQueries
    sessions: EndedSessionStore

    def dispose(self) -> None:
        """Close the pool's connections (a long-lived process that is done with them)."""
        self.engine.dispose()


def database_on(engine: Engine) -> Database:
    """The adapters over an engine built elsewhere in this module."""
    return Database(
        engine=engine,
        jobs=JobRepository(engine),
        attempts=AttemptLog(engine),
        mirrored=MirroredItems(engine),
        removals=Removals(engine),
        stats=QueueStats(engine),
        dashboard=DashboardQueries(engine),
        sessions=EndedSessionStore(engine),
    )


def database(settings: Settings, *, check: bool = True) -> Database:
    """The adapters over MIRROR_DATABASE_URL; `check` as in `database_engine`."""
    return database_on(database_engine(settings, check=check))


def upgrade_schema(settings: Settings) -> None:
    """`mirror db upgrade`: bring MIRROR_DATABASE_URL's schema to the latest migration."""
    engine = database_engine(settings, check=False)
    try:
        migrations.upgrade(engine)
    finally:
        engine.dispose()


def demo_database(database_url: str) -> Database:
    """The demo's: a small pool on the URL it chose, the schema migrated first."""
    engine = make_engine(database_url, pool_size=2)
    try:
        migrations.upgrade(engine)
    except BaseException:
        engine.dispose()
        raise
    return database_on(engine)


def worker_name(slot: int | None = None) -> str:
    """`host:pid` for the process, `host:pid:n` for one of its job slots (for people)."""
    base = f"{socket.gethostname()}:{os.getpid()}"
    return base if slot is None else f"{base}:{slot}"


def jellyfin_client(settings: Settings, *, retry_attempts: int = 5) -> JellyfinClient:
    """The client of MIRROR_JELLYFIN_URL; fewer `retry_attempts` where a person waits."""
    from mirror.jellyfin.client import JellyfinClient

    settings.require("jellyfin_url", "jellyfin_api_key")
    assert settings.jellyfin_url is not None and settings.jellyfin_api_key is not None
    return JellyfinClient(
        settings.jellyfin_url,
        settings.jellyfin_api_key.get_secret_value(),
        download_rate_limit=settings.download_rate_limit,
        retry_attempts=retry_attempts,
    )


def s3_storage(settings: Settings) -> S3Storage:
    return s3_storage_for(settings)


def bucket(settings: Settings, *, threads: int = 16) -> Bucket:
    """The bucket for sync, verify and import-manifests: a connection per thread."""
    from mirror.s3.bucket import Bucket

    storage = s3_storage_for(settings, max_concurrency=threads)
    return Bucket(storage.client, storage.bucket)


def s3_storage_for(settings: Settings, **overrides: Any) -> S3Storage:
    """`s3_storage` with S3Storage options changed (e.g. a bigger connection pool)."""
    from mirror.s3.storage import S3Storage

    settings.require("s3_bucket")
    assert settings.s3_bucket is not None
    key_id = settings.s3_access_key_id
    secret = settings.s3_secret_access_key
    return S3Storage(
        settings.s3_bucket,
        region=settings.s3_region,
        endpoint_url=settings.s3_endpoint_url,
        access_key_id=key_id.get_secret_value() if key_id else None,
        secret_access_key=secret.get_secret_value() if secret else None,
        part_size=settings.s3_part_size,
        **overrides,
    )


def object_links(settings: Settings, client: S3Client) -> ObjectLink:
    """How the player links the bucket's objects for browsers (mirror.s3.links): plain
    URLs of a public bucket, presigned for MIRROR_S3_PUBLIC_URL, else presigned by
    `client` (the endpoint `mirror serve` itself uses)."""
    from mirror.s3 import links

    assert settings.s3_bucket is not None
    public_url = settings.s3_public_url
    if settings.s3_public_bucket:
        if public_url is None:
            raise ConfigError(
                "MIRROR_S3_PUBLIC_BUCKET=true needs MIRROR_S3_PUBLIC_URL: where browsers "
                "fetch the bucket's objects (<url>/<bucket>/<key>)"
            )
        return links.plain_links(public_url, settings.s3_bucket)
    if public_url is None:
        return links.presigned_links(client, settings.s3_bucket)
    key_id = settings.s3_access_key_id
    secret = settings.s3_secret_access_key
    signer, path_prefix = links.public_client(
        public_url,
        region=settings.s3_region,
        access_key_id=key_id.get_secret_value() if key_id else None,
        secret_access_key=secret.get_secret_value() if secret else None,
    )
    return links.presigned_links(signer, settings.s3_bucket, path_prefix=path_prefix)


def download_gate(settings: Settings, engine: Engine | None = None) -> DownloadGate:
    """MIRROR_JELLYFIN_MAX_DOWNLOADS as slots in Postgres, or no gate at all (the default).

    A slot's connection is dropped by Postgres after a stale timeout of silence, and its
    holder pings it every heartbeat interval (mirror.db.download_slots). Behind PgBouncer
    in transaction mode a slot is a row leased for a stale timeout, renewed every
    heartbeat interval through the worker's pool, `engine` (mirror.db.slot_leases).
    """
    from mirror.db.download_slots import DownloadSlots
    from mirror.pipeline.download_gate import NO_DOWNLOAD_CAP

    if not settings.jellyfin_max_downloads:
        return NO_DOWNLOAD_CAP
    if settings.transaction_pooling:
        from mirror.db.slot_leases import LeasedDownloadSlots

        assert engine is not None, "leased download slots need the worker's engine"
        return LeasedDownloadSlots(
            engine,
            settings.jellyfin_max_downloads,
            holder=worker_name(),
            lease_s=settings.stale_timeout,
            renew_interval_s=settings.heartbeat_interval,
        )
    return DownloadSlots(
        settings.database_url_required,
        settings.jellyfin_max_downloads,
        hold_timeout_s=settings.stale_timeout,
        ping_interval_s=settings.heartbeat_interval,
    )


def transcode_options(settings: Settings, encoder: EncoderChoice | None = None) -> TranscodeOptions:
    """The transcode settings; `encoder`: the worker's probed video encoder (else libx264)."""
    from mirror.pipeline.steps import TranscodeOptions
    from mirror.transcode import find_ffmpeg

    return TranscodeOptions(
        video_encoder=encoder.encoder if encoder else "libx264",
        encoder_device=encoder.device if encoder else None,
        ffmpeg_path=find_ffmpeg(settings.ffmpeg_path),
        video_codec=settings.video_codec,
        audio_codec=settings.audio_codec,
        x264_preset=settings.x264_preset,
        x264_crf=settings.x264_crf,
        audio_bitrate=settings.audio_bitrate,
        output_format=settings.output_format,
        stereo_loudness=settings.stereo_loudness if settings.stereo_track else None,
        thumbnail_interval_s=settings.thumbnail_interval if settings.thumbnails else None,
        renditions=settings.renditions,
    )


def video_encoder(settings: Settings) -> EncoderChoice:
    """MIRROR_VIDEO_ENCODER for this worker, `auto` probed once (logged once)."""
    from mirror.transcode import find_ffmpeg
    from mirror.transcode.encoder_probe import choose_video_encoder

    choice = choose_video_encoder(settings.video_encoder, find_ffmpeg(settings.ffmpeg_path))
    get_logger("mirror.worker").info("video encoder: %s", choice.describe())
    return choice


def build_worker(settings: Settings, *, concurrency: int | None = None) -> Worker:
    """The worker with every real adapter: Postgres, Jellyfin, ffmpeg, S3."""
    from mirror.db.listen import JobListener
    from mirror.jellyfin.body import fast_path_problem
    from mirror.pipeline.steps import MirrorPipeline
    from mirror.runner.assembly import assemble_worker
    from mirror.runner.attempt import AttemptPolicy
    from mirror.runner.worker import WorkerConfig

    concurrency = worker_concurrency(settings, concurrency)
    transcode_options(settings)  # fails fast on a bad MIRROR_FFMPEG_PATH
    media = jellyfin_client(settings)
    store = s3_storage(settings)
    engine = database_engine(settings, concurrency=concurrency)
    # Probed (and logged) once the other adapters' settings passed: their errors first.
    encoder = video_encoder(settings)
    options = transcode_options(settings, encoder)
    repo = JobRepository(engine)
    history = AttemptLog(engine)
    pipeline = MirrorPipeline(
        media=media,
        store=store,
        transcode=options,
        work_dir=settings.work_dir,
        s3_prefix=settings.s3_prefix,
        free_space_reserve=settings.free_space_reserve,
        unprobed_timeout=settings.unprobed_timeout,
        download_gate=download_gate(settings, engine),
        titles=repo,
    )
    policy = AttemptPolicy(
        heartbeat_interval=settings.heartbeat_interval,
        stall_timeout=settings.stall_timeout,
        stale_timeout=settings.stale_timeout,
        retry_backoff=settings.retry_backoff,
        encoder=encoder.encoder,
    )
    problem = fast_path_problem()
    if problem is not None:
        get_logger("mirror.job").warning(
            "download fast path unavailable, using httpx's reads: %s", problem
        )

    config = WorkerConfig(
        name=worker_name(),
        concurrency=concurrency,
        poll_interval=settings.poll_interval,
        reap_interval=settings.effective_reap_interval,
        stale_timeout=settings.stale_timeout,
        shutdown_grace=settings.shutdown_grace,
        work_dir=settings.work_dir,
        active_hours=settings.active_windows,
        encoder=encoder.encoder,
    )
    # Behind PgBouncer's transaction pooling LISTEN would hear nothing (the next statement
    # runs on another server connection): the claim loop polls every MIRROR_POLL_INTERVAL.
    listen = (
        None
        if settings.transaction_pooling
        else JobListener(settings.database_url_required, reconnect_s=settings.poll_interval)
    )
    return assemble_worker(repo, pipeline, policy, config, history=history, listen=listen)
