"""What one ffmpeg run writes, as plain data: the outputs of a plan and the plan itself.

mirror.transcode.plan decides them (pure planning); the command, the runner, the
verification and the HLS packaging read them. Kept apart so each reader imports the
words without the planning rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mirror.transcode.streams import SkippedStream
from mirror.transcode.thumbnails import ThumbnailOutput

# What MIRROR_OUTPUT_FORMAT may say: the settings validate it once, with this type.
OutputFormat = Literal["hls", "mp4"]


@dataclass(frozen=True, slots=True)
class VideoOutput:
    """A video-only MP4 (one rendition). `codec` is the value given to `-c:v`: `copy`, or
    the H.264 encoder (mirror.transcode.encoders: libx264 or a hardware one); a lower rung
    is always encoded, from the source's decoded frames."""

    path: Path
    relative_path: str  # POSIX path under the output directory, also the S3 key suffix
    stream_index: int  # the stream's index in the file (ffmpeg's), not Jellyfin's Index
    specifier: str  # `v:N`: its position among the file's video streams (cover art counts)
    codec: str
    source_codec: str | None
    preset: str | None  # x264 settings (every encoder's quality), None when copying
    crf: int | None
    # The re-encode's `-vf` chain (mirror.transcode.picture); empty when copying.
    filters: tuple[str, ...] = ()
    frame_rate: float | None = None  # the source's, kept by copy and re-encode alike
    # Where its first frame is on ffmpeg's clock, which the subtitles keep and video.mp4
    # drops (it starts at 0): the subtitles' X-TIMESTAMP-MAP LOCAL (mirror.hls).
    start_s: float = 0.0
    # MIRROR_RENDITIONS beyond `source`: the rendition's name (`source`, `720p`), the
    # height a lower rung is scaled to and its peak rate; None for today's one video.
    rendition: str | None = None
    scale_height: int | None = None
    maxrate_kbps: int | None = None
    device: str | None = None  # the encoder's device (VAAPI's render node), if it has one

    @property
    def expected_codec(self) -> str | None:
        """The codec `video.mp4` must hold (what verification checks)."""
        return self.source_codec if self.codec == "copy" else "h264"

    @property
    def content_type(self) -> str:
        return "video/mp4"


@dataclass(frozen=True, slots=True)
class StereoDownmix:
    """How a stereo track beside a multichannel one is made (MIRROR_STEREO_TRACK): the
    main run writes the centre-weighted downmix of the source track to `intermediate`
    (lossless, never uploaded); after it, loudnorm measures that and the track is
    encoded at `loudness_lufs` (mirror.transcode.stereo, mirror.transcode.downmix)."""

    intermediate: Path
    loudness_lufs: float


@dataclass(frozen=True, slots=True)
class AudioOutput:
    """One audio track as an M4A. `codec` is the value given to `-c:a` (`copy` or `aac`)."""

    path: Path
    relative_path: str
    stream_index: int  # the stream's index in the file: the `<index>` of the file name
    specifier: str  # `a:N`: its position among the file's audio streams
    codec: str
    source_codec: str | None
    language: str | None  # as Jellyfin reported it; written into the file's metadata
    title: str | None
    bitrate: str | None  # AAC bitrate, None when copying
    channels: int | None = None  # `-ac` when the source has more than AAC should carry
    is_default: bool = False  # Jellyfin's default track: the playlist's DEFAULT=YES
    layout: str | None = None  # the AAC layout the encoder gets (AAC_LAYOUTS), if known
    # Where the video's first frame is on ffmpeg's clock: a re-encoded track is padded
    # with silence (or trimmed) to start exactly there, so a track that starts late in
    # the source (or early) keeps its place against the picture. None: not re-encoded.
    video_start_s: float | None = None
    # Set on the stereo track made beside a multichannel one (`<index>-<lang>-stereo.m4a`).
    downmix: StereoDownmix | None = None

    @property
    def expected_codec(self) -> str | None:
        """The codec the `.m4a` must hold (what verification checks)."""
        return self.source_codec if self.codec == "copy" else "aac"

    @property
    def content_type(self) -> str:
        return "audio/mp4"


@dataclass(frozen=True, slots=True)
class SubtitleOutput:
    """One text subtitle as WebVTT: from the file (`specifier` `s:N`, written by the same
    ffmpeg run) or a sidecar (`external`, fetched from Jellyfin by its own Index)."""

    path: Path
    relative_path: str
    stream_index: int  # the file's index, or Jellyfin's Index for a sidecar
    specifier: str | None  # `s:N` for the file's streams, None for sidecars
    source_codec: str | None
    language: str | None
    title: str | None
    forced: bool = False
    default: bool = False
    external: bool = False

    @property
    def content_type(self) -> str:
        return "text/vtt"

    def key_json(self, key: str) -> dict[str, object]:
        """The job row's `subtitle_keys` entry (size and sha256 come from the upload)."""
        return {
            "key": key,
            "stream_index": self.stream_index,
            "language": self.language,
            "title": self.title,
            "codec": self.source_codec,
            "forced": self.forced,
            "external": self.external,
        }


@dataclass(frozen=True, slots=True)
class TranscodePlan:
    """Everything one ffmpeg run needs: the source, the outputs and the expected length."""

    source: Path
    output_dir: Path
    video: VideoOutput
    audio: tuple[AudioOutput, ...]
    duration_s: float | None  # the file's (probe), else Jellyfin's RunTimeTicks
    frames_total: int | None  # duration x frame rate; the video percent is counted in frames
    skipped: tuple[SkippedStream, ...] = ()
    # `hls`: fragmented MP4 (CMAF-style) that playlists can point into; `mp4`: faststart.
    output_format: OutputFormat = "mp4"
    subtitles: tuple[SubtitleOutput, ...] = ()  # hls only; the file's first, then sidecars
    # Scrubbing thumbnails' sheets (MIRROR_THUMBNAILS), None when off.
    thumbnails: ThumbnailOutput | None = None
    # The lower rungs of MIRROR_RENDITIONS, tallest first (`video` is the `source` one).
    ladder: tuple[VideoOutput, ...] = ()

    @property
    def videos(self) -> tuple[VideoOutput, ...]:
        """Every rendition: the source's first, then the lower rungs."""
        return (self.video, *self.ladder)

    @property
    def fragmented(self) -> bool:
        return self.output_format == "hls"

    def skipped_json(self) -> list[dict[str, object]]:
        """The job row's `skipped_streams`."""
        return [stream.to_json() for stream in self.skipped]

    @property
    def outputs(self) -> tuple[VideoOutput | AudioOutput, ...]:
        """Video renditions first, then the audio tracks in stream order."""
        return (*self.videos, *self.audio)
