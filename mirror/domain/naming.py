"""Output names shared by the local files ffmpeg writes and the S3 keys they go to."""

from __future__ import annotations

import re

VIDEO_FILE_NAME = "video.mp4"
# With more renditions than `source` (MIRROR_RENDITIONS), each is `video/<name>.mp4`.
VIDEO_DIR = "video"
AUDIO_DIR = "audio"
SUBTITLE_DIR = "subtitles"


def sanitize_language(language: str | None) -> str:
    """A language tag safe for file names and S3 keys: [a-z0-9], `und` when unknown."""
    cleaned = re.sub(r"[^a-z0-9]", "", (language or "").lower())[:16]
    return cleaned or "und"


def audio_file_name(stream_index: int, language: str | None) -> str:
    """`<index>-<lang>.m4a`: the index keeps two tracks in one language apart."""
    return f"{stream_index}-{sanitize_language(language)}.m4a"


def stereo_file_name(stream_index: int, language: str | None) -> str:
    """`<index>-<lang>-stereo.m4a`: the stereo track made beside the multichannel track
    `<index>-<lang>.m4a` (MIRROR_STEREO_TRACK)."""
    return f"{stream_index}-{sanitize_language(language)}-stereo.m4a"


def subtitle_file_name(stream_index: int, language: str | None) -> str:
    """`<index>-<lang>.vtt`, like the audio tracks."""
    return f"{stream_index}-{sanitize_language(language)}.vtt"


def rendition_path(name: str) -> str:
    """`video/<name>.mp4`: one rendition of a ladder (`source`, `720p`, ...)."""
    return f"{VIDEO_DIR}/{name}.mp4"
