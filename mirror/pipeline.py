"""One job end to end: metadata -> download -> transcode -> upload -> mark_done.

The adapters sit behind the narrow interfaces below; this module only says in which
order they run, where the files go, and when the lease is checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from mirror.download_gate import NO_DOWNLOAD_CAP, DownloadGate
from mirror.errors import PermanentError
from mirror.heartbeat import Heartbeat
from mirror.hls import PlaylistFile, package_hls
from mirror.hls.playlists import PLAYLIST_CONTENT_TYPE
from mirror.hls.subtitles import fetch_sidecar_subtitles
from mirror.item import MediaItem
from mirror.jobs import Lease, Mirrored
from mirror.manifest import MANIFEST_CONTENT_TYPE, build_manifest, encode_manifest
from mirror.objects import FileDigest, Upload, audio_key, manifest_key, output_key, video_key
from mirror.progress import AbortSignal, ProgressCallback, abortably
from mirror.sources import require_media_file, require_probed
from mirror.transcode import (
    AudioCodecSetting,
    OutputFormat,
    ProbedFile,
    SubtitleOutput,
    TranscodePlan,
    VideoCodecSetting,
    plan_transcode,
    probe_file,
    run_transcode,
    verify_outputs,
)
from mirror.transcode.verify import VerifiedOutputs
from mirror.versions import ffmpeg_version, mirror_version
from mirror.workspace import Workspace


class MediaServer(Protocol):
    """What the pipeline needs from Jellyfin (JellyfinClient)."""

    def get_item(self, item_id: str) -> MediaItem: ...

    def download(
        self,
        item_id: str,
        dest: Path,
        *,
        expected_size: int | None,
        on_progress: ProgressCallback,
        abort: AbortSignal,
    ) -> int: ...

    def fetch_subtitle(self, item_id: str, media_source_id: str, index: int) -> bytes: ...


class ObjectStore(Protocol):
    """What the pipeline needs from the object store, S3 (S3Storage)."""

    def check_bucket(self) -> None: ...

    def abort_stale_multipart_uploads(self, keys: Sequence[str]) -> int: ...

    def upload_files(
        self, uploads: Sequence[Upload], *, on_progress: ProgressCallback, abort: AbortSignal
    ) -> Mapping[str, FileDigest]: ...

    def put_bytes(self, key: str, body: bytes, content_type: str) -> None: ...


@dataclass(frozen=True, slots=True)
class TranscodeOptions:
    ffmpeg_path: str
    video_codec: VideoCodecSetting = "auto"
    audio_codec: AudioCodecSetting = "auto"
    x264_preset: str = "veryfast"
    x264_crf: int = 23
    audio_bitrate: str = "160k"
    output_format: OutputFormat = "hls"  # MIRROR_OUTPUT_FORMAT: `hls` adds playlists and subtitles


@dataclass(frozen=True)
class MirrorPipeline:
    """Callable with (lease, heartbeat): the `Pipeline` the attempt runs."""

    media: MediaServer
    store: ObjectStore
    transcode: TranscodeOptions
    work_dir: Path
    s3_prefix: str = ""
    free_space_reserve: int = 0
    unprobed_timeout: float = 24 * 3600.0
    # MIRROR_JELLYFIN_MAX_DOWNLOADS: downloads at once across all workers (no cap by default).
    download_gate: DownloadGate = NO_DOWNLOAD_CAP

    def __call__(self, lease: Lease, heartbeat: Heartbeat) -> Mirrored:
        # A silent Jellyfin or S3 must not hold a shutdown or a stall watchdog back.
        item = abortably(heartbeat.abort, lambda: self.media.get_item(lease.job.item_id))
        # A .strm, a disc image, a missing episode or a folder is never downloaded.
        require_media_file(item.id, item.name, item)
        require_probed(item, give_up_after=self.unprobed_timeout)
        # Fail fast on a missing or forbidden bucket, before spending an hour downloading.
        abortably(heartbeat.abort, self.store.check_bucket)
        with Workspace.acquire(self.work_dir, lease.job.item_id) as workspace:
            source = workspace.resumable_file(f"source.{_extension(item.container)}")
            # Planning first: an item with nothing to mirror fails before any download.
            self._plan(item, workspace.file("out"), source)
            already = source.stat().st_size if source.exists() else 0
            workspace.require_space(item.size, already, self.free_space_reserve)

            with self.download_gate.download_slot(
                lease.job_id, on_progress=heartbeat, abort=heartbeat.abort
            ):
                self.media.download(
                    lease.job.item_id,
                    source,
                    expected_size=item.size,
                    on_progress=heartbeat,
                    abort=heartbeat.abort,
                )
            heartbeat.flush()

            # Map from the file itself (Jellyfin numbers sidecars first) and check its list.
            plan = self._plan_from_file(item, workspace.file("out"), source)
            run_transcode(plan, self.transcode.ffmpeg_path, heartbeat, heartbeat.abort)
            plan = self._fetch_sidecar_subtitles(item, plan, heartbeat)
            heartbeat.flush()
            # Nothing reaches S3 unless every output holds what the plan says.
            verified = verify_outputs(plan, self.transcode.ffmpeg_path)

            uploads, audio_entries = self._uploads(lease.job.item_id, plan)
            # hls: subtitles and playlists join the uploads, the master last.
            hls_key, subtitle_entries = self._package(lease.job.item_id, plan, verified, uploads)
            for entry, audio in zip(audio_entries, verified.audio, strict=True):
                entry["duration_s"] = audio.duration_s
            # A worker paused past stale_timeout finds out here, before writing to S3.
            heartbeat.checkpoint()
            stale_keys = [upload.key for upload in uploads]
            abortably(heartbeat.abort, lambda: self.store.abort_stale_multipart_uploads(stale_keys))
            digests = self.store.upload_files(uploads, on_progress=heartbeat, abort=heartbeat.abort)
            # Size and SHA-256 as read while uploading: what S3 holds, byte for byte.
            video = {
                **verified.video.video_json(uploads[0].key),
                **digests[uploads[0].key].facts(),
            }
            for entry in [*audio_entries, *subtitle_entries]:
                entry.update(digests[entry["key"]].facts())
            # Last object, after every output: its presence marks a complete mirror.
            hls = _hls_json(hls_key, uploads, digests)
            manifest = self._write_manifest(
                lease, item, video, audio_entries, hls=hls, subtitles=subtitle_entries
            )

        # Every output is in S3 now; run_attempt records the job done.
        return Mirrored(
            video_key=uploads[0].key,
            audio_keys=audio_entries,
            video=video,
            skipped_streams=plan.skipped_json(),
            source=item.source_json(),
            manifest_key=manifest,
            hls_key=hls_key,
            subtitle_keys=subtitle_entries,
        )

    def _write_manifest(
        self,
        lease: Lease,
        item: MediaItem,
        video: dict[str, Any],
        audio: Sequence[dict[str, Any]],
        *,
        hls: dict[str, Any] | None,
        subtitles: Sequence[dict[str, Any]],
    ) -> str:
        """Put `<prefix>/<item_id>/manifest.json`; returns its key for the row."""
        manifest = build_manifest(
            item_id=item.id,
            name=item.name,
            source=item.source_json(),
            video=video,
            audio=audio,
            job_id=lease.job_id,
            attempt=lease.job.attempts,
            mirrored_at=datetime.now(UTC),
            mirror_version=mirror_version(),
            ffmpeg_version=ffmpeg_version(self.transcode.ffmpeg_path),
            hls=hls,
            subtitles=subtitles,
        )
        key = manifest_key(self.s3_prefix, item.id)
        self.store.put_bytes(key, encode_manifest(manifest), MANIFEST_CONTENT_TYPE)
        return key

    def _plan_from_file(self, item: MediaItem, output_dir: Path, source: Path) -> TranscodePlan:
        """Plan from a quick probe; before failing on what it shows, probe in full."""
        ffmpeg_path = self.transcode.ffmpeg_path
        try:
            return self._plan(item, output_dir, source, probe_file(source, ffmpeg_path, quick=True))
        except PermanentError:
            # A header-only probe can miss streams a container reveals late (MPEG-TS).
            return self._plan(item, output_dir, source, probe_file(source, ffmpeg_path))

    def _plan(
        self, item: MediaItem, output_dir: Path, source: Path, probe: ProbedFile | None = None
    ) -> TranscodePlan:
        options = self.transcode
        return plan_transcode(
            item,
            output_dir,
            source,
            probe=probe,
            video_codec=options.video_codec,
            audio_codec=options.audio_codec,
            x264_preset=options.x264_preset,
            x264_crf=options.x264_crf,
            audio_bitrate=options.audio_bitrate,
            output_format="hls" if options.output_format == "hls" else "mp4",
        )

    def _package(
        self, item_id: str, plan: TranscodePlan, verified: VerifiedOutputs, uploads: list[Upload]
    ) -> tuple[str | None, list[dict[str, Any]]]:
        """Output format hls: add subtitles and playlists to `uploads`; the master's key
        and the `subtitle_keys` entries. Playlists come from each file's own index."""
        if not plan.fragmented:
            return None, []
        package = package_hls(plan, width=verified.video.width, height=verified.video.height)
        entries = []
        for sub in plan.subtitles:
            uploads.append(self._upload(item_id, sub))
            entries.append(sub.key_json(uploads[-1].key))
        uploads += [self._upload(item_id, playlist) for playlist in package.playlists]
        return uploads[-1].key, entries

    def _fetch_sidecar_subtitles(
        self, item: MediaItem, plan: TranscodePlan, heartbeat: Heartbeat
    ) -> TranscodePlan:
        def fetch(index: int) -> bytes:
            source_id = item.source_id or item.id
            return abortably(
                heartbeat.abort, lambda: self.media.fetch_subtitle(item.id, source_id, index)
            )

        return fetch_sidecar_subtitles(plan, fetch)

    def _upload(self, item_id: str, file: PlaylistFile | SubtitleOutput) -> Upload:
        key = output_key(self.s3_prefix, item_id, file.relative_path)
        return Upload(file.path, key, file.content_type)

    def _uploads(
        self, item_id: str, plan: TranscodePlan
    ) -> tuple[list[Upload], list[dict[str, Any]]]:
        """The video first, then one upload and one `audio_keys` entry per audio track."""
        uploads = [
            Upload(plan.video.path, video_key(self.s3_prefix, item_id), plan.video.content_type)
        ]
        entries: list[dict[str, Any]] = []
        for audio in plan.audio:
            key = audio_key(self.s3_prefix, item_id, audio.stream_index, audio.language)
            uploads.append(Upload(audio.path, key, audio.content_type))
            entries.append(
                {
                    "key": key,
                    "stream_index": audio.stream_index,
                    "language": audio.language,
                    "title": audio.title,
                    "codec": audio.source_codec if audio.codec == "copy" else audio.codec,
                }
            )
        return uploads, entries


def _hls_json(
    master: str | None, uploads: Sequence[Upload], digests: Mapping[str, FileDigest]
) -> dict[str, Any] | None:
    """The manifest's `hls`: the master and every playlist with its size and SHA-256."""
    if master is None:
        return None
    playlists = [u.key for u in uploads if u.content_type == PLAYLIST_CONTENT_TYPE]
    return {"master": master, "playlists": [{"key": k, **digests[k].facts()} for k in playlists]}


def _extension(container: str | None) -> str:
    """A safe file extension from Jellyfin's Container (e.g. `mkv`, `mov,mp4,m4a`)."""
    first = (container or "").split(",")[0].strip().lower()
    return first if first.isalnum() else "bin"
