"""One job end to end: metadata -> download -> transcode -> upload -> mark_done.

The adapters sit behind the narrow interfaces below; this module only says in which
order they run, where the files go, and when the lease is checked.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from mirror.domain.errors import PermanentError
from mirror.domain.item import ItemTitle, MediaItem, ServedFile
from mirror.domain.jobs import Fence, Lease, Mirrored
from mirror.domain.manifest import MANIFEST_CONTENT_TYPE, build_manifest, encode_manifest
from mirror.domain.objects import FileDigest, Upload, manifest_key, output_key
from mirror.domain.progress import AbortSignal, ProgressCallback, abortably
from mirror.domain.renditions import DEFAULT_RENDITIONS
from mirror.domain.sources import require_media_file, require_probed
from mirror.domain.thumbnails import THUMBNAILS_DIR, TrickplayTiles
from mirror.files.content_probe import content_probe_of_file
from mirror.files.growing_file import GrowingFile
from mirror.files.workspace import Workspace
from mirror.hls import PlaylistFile, package_hls
from mirror.hls.playlists import PLAYLIST_CONTENT_TYPE
from mirror.hls.subtitles import fetch_sidecar_subtitles
from mirror.pipeline.background import BackgroundCall
from mirror.pipeline.download_gate import NO_DOWNLOAD_CAP, DownloadGate
from mirror.pipeline.phases import OverlappedPhases
from mirror.pipeline.thumbnails import (
    ThumbnailUploads,
    copy_trickplay,
    link_image_stream,
    made_thumbnails,
)
from mirror.pipeline.versions import ffmpeg_version, mirror_version
from mirror.runner.heartbeat import Heartbeat
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
from mirror.transcode.encoders import VideoEncoder
from mirror.transcode.feed import FeedSource
from mirror.transcode.moov_first import MoovFirstFeed, moov_first_feed, probe_moov_first
from mirror.transcode.streamable import HEAD_BYTES, bytes_before_probe
from mirror.transcode.verify import VerifiedOutputs


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
        on_write: Callable[[int], None] | None = None,
        on_restart: Callable[[], None] | None = None,
        listed: Mapping[str, object] | None = None,
    ) -> ServedFile:
        """Only bytes of the version `listed` (MediaItem.source_json()) are resumed.
        `on_write` is told the size of the current bytes after every chunk (and when a
        resume is confirmed), `on_restart` when bytes it was told of are thrown away."""
        ...

    def fetch_subtitle(self, item_id: str, media_source_id: str, index: int) -> bytes: ...

    def fetch_trickplay_tile(self, item_id: str, tiles: TrickplayTiles, index: int) -> bytes:
        """Sheet `index` of the trickplay tiles Jellyfin made (item.trickplay)."""
        ...

    def fetch_range(self, item_id: str, start: int, length: int) -> bytes | None:
        """Bytes [start, start + length) of the item's file; None if not served as asked."""
        ...


class TitleBook(Protocol):
    """Where the attempt records the title of the item it fetched (JobRepository)."""

    def refresh_title(self, job_id: uuid.UUID, token: uuid.UUID, title: ItemTitle) -> Fence: ...


class ObjectStore(Protocol):
    """What the pipeline needs from the object store, S3 (S3Storage)."""

    def check_bucket(self) -> None: ...

    def abort_stale_multipart_uploads(self, keys: Sequence[str]) -> int: ...

    def stream_files(
        self,
        uploads: Sequence[Upload],
        *,
        follow: bool,
        on_progress: ProgressCallback,
        abort: AbortSignal,
    ) -> OutputUpload: ...

    def put_bytes(self, key: str, body: bytes, content_type: str) -> None: ...


class OutputUpload(Protocol):
    """The outputs' multipart uploads (S3's StreamingUpload): fed while the files grow
    when asked to follow them, visible only after `publish`, aborted on any other exit."""

    def __enter__(self) -> OutputUpload: ...

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None: ...

    def finish(self, more: Sequence[Upload] = ()) -> Mapping[str, FileDigest]:
        """The files are final: send the rest, and `more` files made since (playlists,
        subtitles) in the same byte count; every file's size and SHA-256 by key."""
        ...

    def publish(self) -> None:
        """Complete the uploads in order: the moment the outputs become visible."""
        ...

    def wait_for_room(self, bound: int) -> None:
        """Block while more than `bound` bytes the outputs hold are not stored yet."""
        ...


@dataclass(frozen=True, slots=True)
class TranscodeOptions:
    ffmpeg_path: str
    video_codec: VideoCodecSetting = "auto"
    audio_codec: AudioCodecSetting = "auto"
    x264_preset: str = "veryfast"
    x264_crf: int = 23
    audio_bitrate: str = "160k"
    output_format: OutputFormat = "hls"  # MIRROR_OUTPUT_FORMAT: `hls` adds playlists and subtitles
    # MIRROR_STEREO_TRACK / MIRROR_STEREO_LOUDNESS: a stereo track beside each multichannel
    # one, at this integrated loudness (LUFS); None: none.
    stereo_loudness: float | None = -23.0
    # The H.264 encoder of a re-encode and its device (mirror.transcode.encoder_probe).
    video_encoder: VideoEncoder = "libx264"
    encoder_device: str | None = None
    # MIRROR_THUMBNAILS / MIRROR_THUMBNAIL_INTERVAL: a scrubbing thumbnail every that many
    # seconds, tiled in the same run (None: no thumbnails).
    thumbnail_interval_s: float | None = None
    renditions: tuple[str, ...] = DEFAULT_RENDITIONS  # MIRROR_RENDITIONS, checked


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
    # Each attempt refreshes the job's title from the item it fetched (None: not kept).
    titles: TitleBook | None = None

    def __call__(self, lease: Lease, heartbeat: Heartbeat) -> Mirrored:
        # A silent Jellyfin or S3 must not hold a shutdown or a stall watchdog back.
        item = abortably(heartbeat.abort, lambda: self.media.get_item(lease.job.item_id))
        # First, so a job that fails below still says which item it was. A cancel or a
        # lost lease this reports is the heartbeat's to act on, at its next beat.
        if self.titles is not None:
            self.titles.refresh_title(lease.job_id, lease.token, item.title)
        # A .strm, a disc image, a missing episode or a folder is never downloaded.
        require_media_file(item.id, item.name, item)
        require_probed(item, give_up_after=self.unprobed_timeout)
        # Fail fast on a missing or forbidden bucket, before spending an hour downloading.
        abortably(heartbeat.abort, self.store.check_bucket)
        with Workspace.acquire(self.work_dir, lease.job.item_id) as workspace:
            source = workspace.resumable_file(f"source.{_extension(item.container)}")
            workspace.discard_leftovers()  # only the download resumes
            out = workspace.file("out")
            # Planning first: an item with nothing to mirror fails before any download.
            self._plan(item, out, source)
            # Jellyfin's trickplay tiles, if it made them; else (None) ffmpeg makes them.
            copied = self._copy_trickplay(item, out, heartbeat.abort)
            item = replace(item, trickplay=item.trickplay if copied else None)
            already = source.stat().st_size if source.exists() else 0
            workspace.require_space(item.size, already, self.free_space_reserve)
            # Download, transcode and upload overlap: one stop signal ends them all.
            phases = OverlappedPhases(heartbeat, moved=heartbeat.moved)
            stop = heartbeat.abort.linked()
            growing = GrowingFile(source, stop, writer_reports=True)
            download = partial(self._download, lease, item, growing, phases, stop)
            with BackgroundCall(download, stop, name="download") as downloading:
                # Map from the file itself (Jellyfin numbers sidecars first), check its list.
                plan, fed = self._plan_from_file(item, out, growing, stop)
                uploads, audio_entries, stereo = self._uploads(lease.job.item_id, plan)
                # A killed attempt's unfinished uploads of these keys go before ours begin.
                keys = [upload.key for upload in [*uploads, *stereo]]
                abortably(stop, lambda: self.store.abort_stale_multipart_uploads(keys))
                # Fragmented outputs go up while ffmpeg writes them; nothing visible yet.
                with self.store.stream_files(
                    uploads, follow=plan.fragmented, on_progress=phases, abort=stop
                ) as outputs:
                    # Backpressure: ffmpeg's input waits while its outputs hold too much.
                    room = partial(outputs.wait_for_room, output_backlog(item.size))
                    run_transcode(
                        plan,
                        self.transcode.ffmpeg_path,
                        phases,
                        stop,
                        growing_source=fed,
                        wait_for_room=room,
                    )
                    served = downloading.join()  # the size and Last-Modified it received
                    if fed is not None:  # what ffmpeg read (a moov fetched first) is that file
                        fed.require_unchanged()
                    # Its first and last MiB, for sync to tell a `touch` from new content.
                    served = replace(
                        served, content_probe=content_probe_of_file(source, served.size)
                    )
                    source.unlink(missing_ok=True)  # read whole, and no attempt needs to resume it
                    phases.finished("transcode")
                    plan = self._fetch_sidecar_subtitles(item, plan, heartbeat)
                    # Nothing becomes visible unless every output holds what the plan says.
                    verified = verify_outputs(plan, self.transcode.ffmpeg_path)
                    # Thumbnails' sheets and track, then (hls) subtitles and playlists,
                    # the master last, from the files' fragments; the stereo tracks first
                    # (made after ffmpeg's main run).
                    thumbnails = copied or made_thumbnails(
                        plan, self.s3_prefix, lease.job.item_id, verified.video.duration_s
                    )
                    extra: list[Upload] = list(stereo)
                    hls_key, subtitles = self._package(lease.job.item_id, plan, verified, extra)
                    if thumbnails is not None and hls_key is not None:  # extra[-1]: master
                        thumbnails = link_image_stream(thumbnails, extra[-1])
                    extra[:0] = thumbnails.uploads if thumbnails is not None else ()
                    # They join the outputs' upload: one byte count for every object.
                    digests = dict(outputs.finish(extra))
                    # A worker paused past stale_timeout finds out here, before S3 shows it.
                    heartbeat.checkpoint()
                    outputs.publish()  # in order: media, subtitles, playlists, master
            uploads += extra
            for entry, audio in zip(audio_entries, verified.audio, strict=True):
                entry["duration_s"] = audio.duration_s
            # Size and SHA-256 as read while uploading: what S3 holds, byte for byte.
            video = _video_json(verified, uploads, digests)
            for entry in [*audio_entries, *subtitles]:
                entry.update(digests[entry["key"]].facts())
            # Last object, after every output: its presence marks a complete mirror.
            hls = _hls_json(hls_key, uploads, digests)
            manifest = self._write_manifest(
                lease,
                item,
                served,
                video,
                audio_entries,
                hls=hls,
                subtitles=subtitles,
                thumbnails=thumbnails.manifest_json(digests) if thumbnails else None,
            )

        # Every output is in S3 now; run_attempt records the job done.
        return Mirrored(
            video_key=uploads[0].key,
            audio_keys=audio_entries,
            video=video,
            skipped_streams=plan.skipped_json(),
            source=item.source_json(served),
            manifest_key=manifest,
            hls_key=hls_key,
            subtitle_keys=subtitles,
        )

    def _write_manifest(
        self,
        lease: Lease,
        item: MediaItem,
        served: ServedFile,
        video: dict[str, Any],
        audio: Sequence[dict[str, Any]],
        *,
        hls: dict[str, Any] | None,
        subtitles: Sequence[dict[str, Any]],
        thumbnails: dict[str, Any] | None = None,
    ) -> str:
        """Put `<prefix>/<item_id>/manifest.json`; returns its key for the row."""
        manifest = build_manifest(
            item_id=item.id,
            name=item.name,
            source=item.source_json(served),
            video=video,
            audio=audio,
            job_id=lease.job_id,
            attempt=lease.job.attempts,
            mirrored_at=datetime.now(UTC),
            mirror_version=mirror_version(),
            ffmpeg_version=ffmpeg_version(self.transcode.ffmpeg_path),
            hls=hls,
            subtitles=subtitles,
            thumbnails=thumbnails,
        )
        key = manifest_key(self.s3_prefix, item.id)
        self.store.put_bytes(key, encode_manifest(manifest), MANIFEST_CONTENT_TYPE)
        return key

    def _download(
        self,
        lease: Lease,
        item: MediaItem,
        source: GrowingFile,
        phases: OverlappedPhases,
        stop: AbortSignal,
    ) -> ServedFile:
        """Download (resuming a partial file of the same version) while holding a
        download slot, then tell its reader the size is final. The wait for a slot
        reports `waiting` straight to the heartbeat: it is no phase of the overlap."""
        heartbeat = phases.sink
        with self.download_gate.download_slot(lease.job_id, on_progress=heartbeat, abort=stop):
            served = self.media.download(
                item.id,
                source.path,
                expected_size=item.size,
                on_progress=phases,
                abort=stop,
                on_write=source.wrote,
                on_restart=source.start_over,  # raises if ffmpeg was fed the old bytes
                listed=item.source_json(),
            )
        source.finish()
        phases.finished("download")
        return served

    def _plan_from_file(
        self, item: MediaItem, output_dir: Path, source: GrowingFile, stop: AbortSignal
    ) -> tuple[TranscodePlan, FeedSource | None]:
        """The plan, and the source to feed ffmpeg while it downloads (None: read the
        finished file). A file ffmpeg can read front to back is planned from a quick
        probe of its first bytes, an MP4 with the moov at the end from its moov fetched
        first; the rest waits for the whole file, as any doubt does."""
        ffmpeg_path = self.transcode.ffmpeg_path
        with source.path.open("rb") if source.wait_for(HEAD_BYTES) else nullcontext() as file:
            head = file.read(HEAD_BYTES) if file else b""
        needed = bytes_before_probe(head)
        if needed is not None and not source.finished:
            source.wait_for(needed)
            with suppress(PermanentError):  # e.g. a stream the first bytes do not show yet
                probe = probe_file(source.path, ffmpeg_path, quick=True)
                return self._plan(item, output_dir, source.path, probe), source
        elif not source.finished and (moov := self._moov_first(item, source, head, stop)):
            with suppress(PermanentError):
                probe = probe_moov_first(moov, output_dir.parent / "probe.mp4", ffmpeg_path)
                return self._plan(item, output_dir, source.path, probe), moov
        source.wait_until_finished()
        try:
            probe = probe_file(source.path, ffmpeg_path, quick=True)
            return self._plan(item, output_dir, source.path, probe), None
        except PermanentError:
            # A header-only probe can miss streams a container reveals late (MPEG-TS).
            probe = probe_file(source.path, ffmpeg_path)
            return self._plan(item, output_dir, source.path, probe), None

    def _moov_first(
        self, item: MediaItem, source: GrowingFile, head: bytes, stop: AbortSignal
    ) -> MoovFirstFeed | None:
        """An MP4 with the moov at the end: its moov by a range request, fed first."""

        def fetch(start: int, length: int) -> bytes | None:
            return abortably(stop, lambda: self.media.fetch_range(item.id, start, length))

        return moov_first_feed(source, head, item.size, fetch)

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
            stereo_loudness=options.stereo_loudness,
            video_encoder=options.video_encoder,
            encoder_device=options.encoder_device,
            # None when Jellyfin's own tiles were copied (item.trickplay kept only then).
            thumbnail_interval_s=None if item.trickplay else options.thumbnail_interval_s,
            renditions=options.renditions,
        )

    def _copy_trickplay(
        self, item: MediaItem, output_dir: Path, abort: AbortSignal
    ) -> ThumbnailUploads | None:
        """Jellyfin's trickplay sheets and their track, when thumbnails are on and it
        made them for this source; None: ffmpeg makes them (or they are off)."""
        if self.transcode.thumbnail_interval_s is None or item.trickplay is None:
            return None
        tiles = item.trickplay

        def fetch(index: int) -> bytes:
            return abortably(abort, lambda: self.media.fetch_trickplay_tile(item.id, tiles, index))

        return copy_trickplay(item, output_dir / THUMBNAILS_DIR, fetch, self.s3_prefix)

    def _package(
        self, item_id: str, plan: TranscodePlan, verified: VerifiedOutputs, uploads: list[Upload]
    ) -> tuple[str | None, list[dict[str, Any]]]:
        """Output format hls: add subtitles and playlists to `uploads`; the master's key
        and the `subtitle_keys` entries. Playlists come from each file's own index."""
        if not plan.fragmented:
            return None, []
        width, height = verified.video.display_size
        package = package_hls(
            plan,
            width=width,
            height=height,
            video_range=verified.video.video_range,
            ladder=verified.ladder,
        )
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
    ) -> tuple[list[Upload], list[dict[str, Any]], list[Upload]]:
        """The video renditions first (the source's leads), then one upload and one
        `audio_keys` entry per audio track; the stereo tracks apart, as they are made
        after ffmpeg's main run."""
        uploads = [
            Upload(
                video.path,
                output_key(self.s3_prefix, item_id, video.relative_path),
                video.content_type,
            )
            for video in plan.videos
        ]
        entries: list[dict[str, Any]] = []
        stereo: list[Upload] = []
        for audio in plan.audio:
            key = output_key(self.s3_prefix, item_id, audio.relative_path)
            (uploads if audio.downmix is None else stereo).append(
                Upload(audio.path, key, audio.content_type)
            )
            entries.append(
                {
                    "key": key,
                    "stream_index": audio.stream_index,
                    "language": audio.language,
                    "title": audio.title,
                    "codec": audio.source_codec if audio.codec == "copy" else audio.codec,
                }
            )
        return uploads, entries, stereo


def _video_json(
    verified: VerifiedOutputs, uploads: Sequence[Upload], digests: Mapping[str, FileDigest]
) -> dict[str, Any]:
    """The row's `video`: the source rendition's facts, and with a ladder its lower
    renditions under `renditions` (uploads lead with the videos, in the same order)."""
    facts = [
        {**video.video_json(upload.key), **digests[upload.key].facts()}
        for video, upload in zip(verified.videos, uploads, strict=False)
    ]
    video = facts[0]
    if verified.ladder:
        video["renditions"] = facts[1:]
    return video


def _hls_json(
    master: str | None, uploads: Sequence[Upload], digests: Mapping[str, FileDigest]
) -> dict[str, Any] | None:
    """The manifest's `hls`: the master and every playlist with its size and SHA-256."""
    if master is None:
        return None
    playlists = [u.key for u in uploads if u.content_type == PLAYLIST_CONTENT_TYPE]
    return {"master": master, "playlists": [{"key": k, **digests[k].facts()} for k in playlists]}


# The source stays whole until ffmpeg has read it (a later attempt resumes it), so the
# work dir peaks at the item plus the outputs not in S3 yet: at most this share of it.
OUTPUT_BACKLOG_SHARE = 0.2


def output_backlog(item_size: int | None) -> int:
    """Bytes ffmpeg's outputs may hold beyond what S3 has stored before its input
    waits: 0.2x the item (exceeded by up to a part per output while no whole part is
    waiting: the upload of a part needs a part's worth written)."""
    return int((item_size or 0) * OUTPUT_BACKLOG_SHARE)


def _extension(container: str | None) -> str:
    """A safe file extension from Jellyfin's Container (e.g. `mkv`, `mov,mp4,m4a`)."""
    first = (container or "").split(",")[0].strip().lower()
    return first if first.isalnum() else "bin"
