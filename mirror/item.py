"""What mirror knows about a Jellyfin item: plain data, no I/O.

The Jellyfin client builds these from the API's JSON; the transcode planner reads them.
Stream facts come from Jellyfin itself, so mirror needs no ffprobe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MediaStream:
    """One stream of the source file; `index` is ffmpeg's stream index."""

    index: int
    type: str  # Jellyfin's MediaStream Type: Video, Audio, Subtitle, EmbeddedImage, Data
    codec: str | None = None
    language: str | None = None  # ISO 639-2 where known
    title: str | None = None
    channels: int | None = None
    width: int | None = None
    height: int | None = None
    frame_rate: float | None = None  # frames per second (RealFrameRate, else Average)
    is_default: bool = False


@dataclass(frozen=True, slots=True)
class MediaItem:
    """One Jellyfin item with the media source mirror downloads."""

    id: str  # 32 lowercase hex chars
    name: str
    type: str  # Movie, Episode, ...
    container: str | None
    size: int | None  # bytes, from MediaSources[].Size
    duration_s: float | None  # from RunTimeTicks
    streams: tuple[MediaStream, ...]

    @property
    def video_streams(self) -> tuple[MediaStream, ...]:
        return tuple(s for s in self.streams if s.type == "Video")

    @property
    def audio_streams(self) -> tuple[MediaStream, ...]:
        return tuple(s for s in self.streams if s.type == "Audio")


# .NET's Guid.TryParse formats N, D, B and P: the API sends N, webhook templates send D.
_ITEM_ID = re.compile(
    r"[0-9a-f]{32}"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}"
    r"|\([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\)"
)


def normalize_item_id(raw: str) -> str:
    """Jellyfin ids as stored: 32 lowercase hex chars from any GUID spelling Jellyfin accepts.

    Raises ValueError for anything else, so arbitrary text never reaches SQL or a URL.
    """
    candidate = raw.strip().lower()
    if not _ITEM_ID.fullmatch(candidate):
        raise ValueError(f"not a Jellyfin item id: {raw[:80]!r} (expected 32 hex characters)")
    return re.sub(r"[^0-9a-f]", "", candidate)
