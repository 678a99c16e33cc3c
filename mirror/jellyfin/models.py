"""Jellyfin's JSON turned into mirror's plain data: pure functions, no I/O.

Jellyfin answers in PascalCase with nulls omitted, so every field is read as optional
and anything missing becomes None rather than an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mirror.domain import item
from mirror.domain.errors import PermanentError
from mirror.domain.item import ItemTitle, MediaItem, MediaStream
from mirror.domain.listing import ItemHit, ItemSummary, Library
from mirror.domain.thumbnails import TrickplayTiles

TICKS_PER_SECOND = 10_000_000  # Jellyfin's RunTimeTicks are 100 ns ticks


def require_item_id(item_id: str) -> str:
    """32 lowercase hex chars from any GUID spelling Jellyfin accepts.

    Raises PermanentError for anything else: such an id can never name an item, and
    checking here keeps arbitrary text out of request paths.
    """
    try:
        return item.normalize_item_id(item_id)
    except ValueError:
        raise PermanentError(
            f"item id {item_id[:80]!r} is not a Jellyfin id (32 hex chars or a dashed GUID)"
        ) from None


def _id_or_none(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return require_item_id(value)
    except PermanentError:
        return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _known(value: Any) -> str | None:
    """An enum Jellyfin fills with `Unknown` when it has nothing to say: None then."""
    text = _str(value)
    return None if text == "Unknown" else text


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _positive_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value > 0 else None


def parse_media_stream(data: Mapping[str, Any]) -> MediaStream | None:
    """One `MediaStreams[]` entry; None when it lacks the index ffmpeg needs."""
    index = _int(data.get("Index"))
    if index is None:
        return None
    return MediaStream(
        index=index,
        type=_str(data.get("Type")) or "Unknown",
        codec=_str(data.get("Codec")),
        language=_str(data.get("Language")),
        title=_str(data.get("Title")),
        channels=_int(data.get("Channels")),
        width=_int(data.get("Width")),
        height=_int(data.get("Height")),
        frame_rate=_positive_float(data.get("RealFrameRate"))
        or _positive_float(data.get("AverageFrameRate")),
        is_default=data.get("IsDefault") is True,
        is_forced=data.get("IsForced") is True,
        is_external=data.get("IsExternal") is True,
        path=_str(data.get("Path")) if data.get("IsExternal") is True else None,
        pixel_format=_str(data.get("PixelFormat")),
        profile=_str(data.get("Profile")),
        bit_depth=_int(data.get("BitDepth")),
        # Jellyfin always sends IsInterlaced (false when unknown): only true is a fact.
        is_interlaced=True if data.get("IsInterlaced") is True else None,
        color_primaries=_str(data.get("ColorPrimaries")),
        color_transfer=_str(data.get("ColorTransfer")),
        color_space=_str(data.get("ColorSpace")),
        dv_profile=_int(data.get("DvProfile")),
        video_range_type=_known(data.get("VideoRangeType")),
    )


def _choose_source(item_id: str, sources: Sequence[Any]) -> Mapping[str, Any] | None:
    """The media source mirror downloads: the item's own version, else the first.

    An item with several versions lists one source per version; /Items/{id}/Download
    serves the one whose Id is the item id.
    """
    mappings = [source for source in sources if isinstance(source, Mapping)]
    for source in mappings:
        if _id_or_none(source.get("Id")) == item_id:
            return source
    return mappings[0] if mappings else None


def parse_item_title(data: Mapping[str, Any]) -> ItemTitle:
    """What people call a `BaseItemDto` and where it sits; the library is not in it (the
    sweep and sync know it by name, see `ItemTitle`)."""
    episode = data.get("Type") == "Episode"  # a movie's IndexNumber is no episode number
    return ItemTitle(
        item_name=_str(data.get("Name")),
        item_type=_str(data.get("Type")),
        series_name=_str(data.get("SeriesName")),
        season_number=_int(data.get("ParentIndexNumber")) if episode else None,
        episode_number=_int(data.get("IndexNumber")) if episode else None,
        year=_int(data.get("ProductionYear")),
        series_id=_id_or_none(data.get("SeriesId")),
        season_id=_id_or_none(data.get("SeasonId")),
        parent_id=_id_or_none(data.get("ParentId")),
    )


def parse_media_item(data: Mapping[str, Any]) -> MediaItem:
    """A `BaseItemDto` fetched with fields=Path,MediaSources,MediaStreams."""
    item_id = _id_or_none(data.get("Id"))
    if item_id is None:
        raise PermanentError("Jellyfin returned an item without a valid Id")
    sources = data.get("MediaSources")
    source = _choose_source(item_id, sources if isinstance(sources, list) else [])
    raw_streams: Any = None
    if source is not None:
        raw_streams = source.get("MediaStreams")
    if not isinstance(raw_streams, list):
        raw_streams = data.get("MediaStreams")
    streams = [
        parsed
        for raw in (raw_streams if isinstance(raw_streams, list) else [])
        if isinstance(raw, Mapping) and (parsed := parse_media_stream(raw)) is not None
    ]
    streams.sort(key=lambda stream: stream.index)
    ticks = _int(data.get("RunTimeTicks"))
    if ticks is None and source is not None:
        ticks = _int(source.get("RunTimeTicks"))
    src: Mapping[str, Any] = source if source is not None else {}
    return MediaItem(
        id=item_id,
        name=_str(data.get("Name")) or item_id,
        type=_str(data.get("Type")) or "Unknown",
        container=_str(src.get("Container")) or _str(data.get("Container")),
        size=_int(src.get("Size")),
        duration_s=ticks / TICKS_PER_SECOND if ticks is not None else None,
        streams=tuple(streams),
        source_id=_id_or_none(src.get("Id")),
        path=_str(src.get("Path")) or _str(data.get("Path")),
        video_type=_str(src.get("VideoType")) or _str(data.get("VideoType")),
        location_type=_str(data.get("LocationType")),
        protocol=_str(src.get("Protocol")),
        is_remote=src.get("IsRemote") is True,
        is_folder=data.get("IsFolder") is True,
        # The media source's ETag only: the item-level Etag changes on every metadata
        # save, so a fingerprint holding it would re-mirror unchanged files.
        etag=_str(src.get("ETag")),
        title=parse_item_title(data),
        trickplay=parse_trickplay(data.get("Trickplay"), _id_or_none(src.get("Id")) or item_id),
    )


# Jellyfin's default trickplay width; of several widths the one nearest it is copied.
TRICKPLAY_WIDTH = 320


def parse_trickplay(data: Any, media_source_id: str) -> TrickplayTiles | None:
    """The trickplay tiles of the mirrored source from the item's `Trickplay` (fields=
    Trickplay: `{media source id: {width: {Width, Height, TileWidth, TileHeight,
    ThumbnailCount, Interval (ms), Bandwidth}}}`); None when it has none usable."""
    if not isinstance(data, Mapping):
        return None
    by_source = {_id_or_none(key): value for key, value in data.items()}
    widths = by_source.get(media_source_id)
    if not isinstance(widths, Mapping):
        return None
    found = []
    for info in widths.values():
        if not isinstance(info, Mapping):
            continue
        facts = [_int(info.get(name)) for name in _TRICKPLAY_FACTS]
        if all(fact is not None and fact > 0 for fact in facts):
            width, height, columns, rows, count, interval_ms = (int(f or 0) for f in facts)
            found.append(
                TrickplayTiles(
                    media_source_id, width, height, columns, rows, count, interval_ms / 1000
                )
            )
    return min(found, key=lambda tiles: abs(tiles.width - TRICKPLAY_WIDTH), default=None)


_TRICKPLAY_FACTS = ("Width", "Height", "TileWidth", "TileHeight", "ThumbnailCount", "Interval")


def parse_item_summary(data: Mapping[str, Any]) -> ItemSummary | None:
    """One entry of a library listing; None when it has no usable Id."""
    item_id = _id_or_none(data.get("Id"))
    if item_id is None:
        return None
    sources = data.get("MediaSources")
    source = _choose_source(item_id, sources if isinstance(sources, list) else [])
    src: Mapping[str, Any] = source if source is not None else {}
    return ItemSummary(
        id=item_id,
        name=_str(data.get("Name")) or item_id,
        type=_str(data.get("Type")) or "Unknown",
        path=_str(data.get("Path")),
        size=_int(src.get("Size")),
        is_folder=data.get("IsFolder") is True,
        location_type=_str(data.get("LocationType")),
        protocol=_str(src.get("Protocol")),
        is_remote=src.get("IsRemote") is True,
        video_type=_str(src.get("VideoType")) or _str(data.get("VideoType")),
        container=_str(src.get("Container")) or _str(data.get("Container")),
        etag=_str(src.get("ETag")),
        title=parse_item_title(data),
        media_source_id=_id_or_none(src.get("Id")),
    )


def parse_item_hit(data: Mapping[str, Any]) -> ItemHit | None:
    """One entry of a search answer; None when it has no usable Id."""
    item_id = _id_or_none(data.get("Id"))
    if item_id is None:
        return None
    return ItemHit(
        id=item_id,
        name=_str(data.get("Name")) or item_id,
        type=_str(data.get("Type")) or "Unknown",
        year=_int(data.get("ProductionYear")),
        series_name=_str(data.get("SeriesName")),
        season_name=_str(data.get("SeasonName")),
        index_number=_int(data.get("IndexNumber")),
        parent_index_number=_int(data.get("ParentIndexNumber")),
    )


def parse_library(data: Mapping[str, Any]) -> Library | None:
    """One `VirtualFolderInfo`; None when it has no usable ItemId."""
    item_id = _id_or_none(data.get("ItemId"))
    if item_id is None:
        return None
    return Library(
        name=_str(data.get("Name")) or item_id,
        item_id=item_id,
        collection_type=_str(data.get("CollectionType")),
    )
