"""Which files one ffmpeg run writes for an item, and how: pure planning, no I/O.

The plan is decided from Jellyfin's stream facts alone (no ffprobe): the first video
stream becomes `video.mp4`, every audio stream becomes `audio/<index>-<lang>.m4a`.
Streams that already have the target codec are copied, which turns an hour of
encoding into a minute of remuxing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mirror.errors import ConfigError, PermanentError
from mirror.item import MediaItem, MediaStream
from mirror.naming import AUDIO_DIR, VIDEO_FILE_NAME, audio_file_name

VideoCodecSetting = Literal["auto", "copy", "libx264"]
AudioCodecSetting = Literal["auto", "copy", "aac"]

VIDEO_CODEC_SETTINGS: tuple[str, ...] = ("auto", "copy", "libx264")
AUDIO_CODEC_SETTINGS: tuple[str, ...] = ("auto", "copy", "aac")

# Jellyfin spells codecs the way ffprobe does; "avc" shows up from some older probes.
_H264_NAMES = frozenset({"h264", "avc", "avc1"})
_AAC_NAMES = frozenset({"aac"})


@dataclass(frozen=True, slots=True)
class VideoOutput:
    """The video-only MP4. `codec` is the value given to `-c:v` (`copy` or `libx264`)."""

    path: Path
    relative_path: str  # POSIX path under the output directory, also the S3 key suffix
    stream_index: int
    codec: str
    source_codec: str | None
    preset: str | None  # x264 settings, None when copying
    crf: int | None

    @property
    def content_type(self) -> str:
        return "video/mp4"


@dataclass(frozen=True, slots=True)
class AudioOutput:
    """One audio track as an M4A. `codec` is the value given to `-c:a` (`copy` or `aac`)."""

    path: Path
    relative_path: str
    stream_index: int
    codec: str
    source_codec: str | None
    language: str | None  # as Jellyfin reported it; written into the file's metadata
    title: str | None
    bitrate: str | None  # AAC bitrate, None when copying

    @property
    def content_type(self) -> str:
        return "audio/mp4"


@dataclass(frozen=True, slots=True)
class TranscodePlan:
    """Everything one ffmpeg run needs: the source, the outputs and the expected length."""

    source: Path
    output_dir: Path
    video: VideoOutput
    audio: tuple[AudioOutput, ...]
    duration_s: float | None
    frames_total: int | None  # duration x frame rate; the video percent is counted in frames

    @property
    def outputs(self) -> tuple[VideoOutput | AudioOutput, ...]:
        """Video first, then the audio tracks in stream order."""
        return (self.video, *self.audio)


def plan_transcode(
    item: MediaItem,
    work_dir: Path,
    source: Path,
    *,
    video_codec: str = "auto",
    audio_codec: str = "auto",
    x264_preset: str = "veryfast",
    x264_crf: int = 23,
    audio_bitrate: str = "160k",
) -> TranscodePlan:
    """Plan the outputs of `item` under `work_dir`; an item without video is permanent."""
    if video_codec not in VIDEO_CODEC_SETTINGS:
        raise ConfigError(
            f"MIRROR_VIDEO_CODEC must be one of {', '.join(VIDEO_CODEC_SETTINGS)}, "
            f"not {video_codec!r}"
        )
    if audio_codec not in AUDIO_CODEC_SETTINGS:
        raise ConfigError(
            f"MIRROR_AUDIO_CODEC must be one of {', '.join(AUDIO_CODEC_SETTINGS)}, "
            f"not {audio_codec!r}"
        )
    videos = item.video_streams
    if not videos:
        raise PermanentError(f"item {item.id} ({item.name}) has no video stream; nothing to mirror")
    video_stream = videos[0]
    video = _plan_video(video_stream, work_dir, video_codec, preset=x264_preset, crf=x264_crf)
    audio = tuple(
        _plan_audio(stream, work_dir, audio_codec, bitrate=audio_bitrate)
        for stream in item.audio_streams
    )
    return TranscodePlan(
        source=source,
        output_dir=work_dir,
        video=video,
        audio=audio,
        duration_s=item.duration_s,
        frames_total=count_frames(item.duration_s, video_stream.frame_rate),
    )


def count_frames(duration_s: float | None, frame_rate: float | None) -> int | None:
    """Expected number of video frames, when both facts are known and positive."""
    if not duration_s or not frame_rate or duration_s <= 0 or frame_rate <= 0:
        return None
    return max(1, round(duration_s * frame_rate))


def _plan_video(
    stream: MediaStream, work_dir: Path, setting: str, *, preset: str, crf: int
) -> VideoOutput:
    copy = setting == "copy" or (setting == "auto" and _is(stream.codec, _H264_NAMES))
    return VideoOutput(
        path=work_dir / VIDEO_FILE_NAME,
        relative_path=VIDEO_FILE_NAME,
        stream_index=stream.index,
        codec="copy" if copy else "libx264",
        source_codec=stream.codec,
        preset=None if copy else preset,
        crf=None if copy else crf,
    )


def _plan_audio(stream: MediaStream, work_dir: Path, setting: str, *, bitrate: str) -> AudioOutput:
    copy = setting == "copy" or (setting == "auto" and _is(stream.codec, _AAC_NAMES))
    file_name = audio_file_name(stream.index, stream.language)
    relative_path = f"{AUDIO_DIR}/{file_name}"
    return AudioOutput(
        path=work_dir / AUDIO_DIR / file_name,
        relative_path=relative_path,
        stream_index=stream.index,
        codec="copy" if copy else "aac",
        source_codec=stream.codec,
        language=stream.language,
        title=stream.title,
        bitrate=None if copy else bitrate,
    )


def _is(codec: str | None, names: frozenset[str]) -> bool:
    return codec is not None and codec.lower() in names
