"""What mirror knows about a Jellyfin item: plain data, no I/O.

The Jellyfin client builds these from the API's JSON; the transcode planner reads them.
Jellyfin's stream numbering is its own (sidecar files come first), so a stream's place
in the downloaded file is worked out from these facts, never taken from `index`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mirror.domain.thumbnails import TrickplayTiles


@dataclass(frozen=True, slots=True)
class ItemTitle:
    """What people call an item, and where it sits: the job row's title columns.

    Jellyfin's Name, Type, SeriesName, ParentIndexNumber (season), IndexNumber
    (episode), ProductionYear and the library it lives in, with the parent ids a
    series' removal needs (SeriesId, SeasonId, ParentId). None where Jellyfin (or a
    webhook body) did not say; a refresh keeps what it does not know (see mirror.db).
    """

    item_name: str | None = None
    item_type: str | None = None
    series_name: str | None = None
    season_number: int | None = None
    episode_number: int | None = None
    year: int | None = None
    library_name: str | None = None
    series_id: str | None = None
    season_id: str | None = None
    parent_id: str | None = None

    def __post_init__(self) -> None:
        # Names come from files' tags and webhook bodies: whatever they hold, a row
        # stores one line of text Postgres takes (no NUL, no lone surrogate).
        for name in ("item_name", "item_type", "series_name", "library_name"):
            object.__setattr__(self, name, storable_text(getattr(self, name)))

    @property
    def label(self) -> str | None:
        return title_label(
            self.item_name, self.series_name, self.season_number, self.episode_number, self.year
        )


# A title longer than this is no title a person reads; it is cut, not refused.
MAX_TITLE_CHARS = 500


def storable_text(value: str | None) -> str | None:
    """`value` as one line of printable text: lone surrogates become U+FFFD, control and
    line-separator characters spaces, runs of spaces one; None when nothing is left."""
    if value is None:
        return None
    text = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    text = "".join(char if char.isprintable() else " " for char in text)
    return " ".join(text.split())[:MAX_TITLE_CHARS] or None


def title_label(
    name: str | None,
    series_name: str | None,
    season_number: int | None,
    episode_number: int | None,
    year: int | None,
) -> str | None:
    """ "Series S01E02 Name" for an episode, "Name (Year)" otherwise; None when nameless.

    The job_status view's `title` column spells it the same way (migration 0010).
    """
    if series_name is not None or season_number is not None or episode_number is not None:
        number = ""
        if season_number is not None:
            number += f"S{season_number:02d}"
        if episode_number is not None:
            number += f"E{episode_number:02d}"
        return " ".join(part for part in (series_name, number, name) if part) or None
    if name is not None and year is not None:
        return f"{name} ({year})"
    return name


@dataclass(frozen=True, slots=True)
class MediaStream:
    """One stream Jellyfin lists for a media source.

    `index` is Jellyfin's `MediaStreams[].Index`: external (sidecar) streams are listed
    first and every stream is numbered after them, so it is NOT ffmpeg's stream index.
    """

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
    is_forced: bool = False
    is_external: bool = False  # a sidecar file beside the media (`path`), not in the download
    path: str | None = None  # the sidecar's own file; None for the media file's streams
    pixel_format: str | None = None  # e.g. yuv420p, yuv420p10le
    profile: str | None = None  # e.g. High, Main 10
    bit_depth: int | None = None
    # Picture facts (video): Jellyfin's IsInterlaced, ffprobe's colour names,
    # DvProfile and VideoRangeType (SDR, HDR10, HLG, DOVI, DOVIWithHDR10...).
    is_interlaced: bool | None = None
    color_primaries: str | None = None
    color_transfer: str | None = None
    color_space: str | None = None
    dv_profile: int | None = None
    video_range_type: str | None = None


@dataclass(frozen=True, slots=True)
class MediaItem:
    """One Jellyfin item with the media source mirror downloads."""

    id: str  # 32 lowercase hex chars
    name: str
    type: str  # Movie, Episode, ...
    container: str | None
    size: int | None  # bytes, from MediaSources[].Size
    duration_s: float | None  # from RunTimeTicks
    streams: tuple[MediaStream, ...]  # empty until Jellyfin has probed the file
    source_id: str | None = None  # MediaSources[].Id of the source /Download serves
    path: str | None = None  # that source's Path on the Jellyfin host
    video_type: str | None = None  # VideoFile, Iso, Dvd, BluRay
    location_type: str | None = None  # FileSystem, Remote, Virtual, Offline
    protocol: str | None = None  # File, Http, ... (a .strm link is Http)
    is_remote: bool = False
    is_folder: bool = False
    etag: str | None = None  # MediaSources[].ETag (never the item's Etag: see fingerprint)
    title: ItemTitle = field(
        default_factory=ItemTitle
    )  # name, series, season, episode, year, parent ids
    # Jellyfin's trickplay tiles of that source (fields=Trickplay), None when it made none.
    trickplay: TrickplayTiles | None = None

    @property
    def video_streams(self) -> tuple[MediaStream, ...]:
        return tuple(s for s in self.streams if s.type == "Video")

    @property
    def audio_streams(self) -> tuple[MediaStream, ...]:
        return tuple(s for s in self.streams if s.type == "Audio")

    @property
    def file_streams(self) -> tuple[MediaStream, ...]:
        """The streams inside the downloaded file (sidecars left out), in Jellyfin's order."""
        return tuple(s for s in self.streams if not s.is_external)

    @property
    def external_streams(self) -> tuple[MediaStream, ...]:
        """Sidecar streams: separate files beside the media, not part of the download."""
        return tuple(s for s in self.streams if s.is_external)

    def source_json(self, served: ServedFile | None = None) -> dict[str, object]:
        """The file as the metadata lists it (nulls left out); with `served`, what was
        mirrored, for the job row's `source` column: the size and Last-Modified of the
        bytes the download actually received, not what the metadata said beforehand."""
        facts: dict[str, object | None] = {
            "media_source_id": self.source_id,
            "path": self.path,
            "size": self.size if served is None else served.size,
            "container": self.container,
            "etag": self.etag,
            "last_modified": None if served is None else served.last_modified,
            "content_probe": None if served is None else served.content_probe,
        }
        return {key: value for key, value in facts.items() if value is not None}


@dataclass(frozen=True, slots=True)
class ServedFile:
    """One downloaded file as Jellyfin's answers described it: every byte of it comes
    from the one version these validators name (a resume is only taken when they match)."""

    size: int
    last_modified: str | None = None  # the HTTP Last-Modified (Jellyfin: the file's mtime)
    etag: str | None = None  # the HTTP ETag, if any (Jellyfin's /Download sends none)
    content_probe: str | None = None  # mirror.files.content_probe of the bytes received


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
