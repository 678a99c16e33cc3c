"""What the Jellyfin stand-in knows, and the Jellyfin-shaped JSON it answers with.

Kept apart from the HTTP side so the JSON shapes (PascalCase, nulls omitted, 32-hex
ids) can be read in one place and checked against ../shared/jellyfin/.
"""

from __future__ import annotations

import email.utils
import hashlib
import re
import threading
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mirror.demo.stand_in.search import search_by_name
from mirror.demo.stand_in.trickplay import Trickplay
from mirror.domain.item import MediaStream

TICKS_PER_SECOND = 10_000_000
VERSION = "10.11.11"

# Jellyfin's BaseItemKind: /Items drops any includeItemTypes value not in it.
ITEM_KINDS = (
    "AggregateFolder", "Audio", "AudioBook", "BasePluginFolder", "Book", "BoxSet", "Channel",
    "ChannelFolderItem", "CollectionFolder", "Episode", "Folder", "Genre",
    "ManualPlaylistsFolder", "Movie", "LiveTvChannel", "LiveTvProgram", "MusicAlbum",
    "MusicArtist", "MusicGenre", "MusicVideo", "Person", "Photo", "PhotoAlbum", "Playlist",
    "PlaylistsFolder", "Program", "Recording", "Season", "Series", "Studio", "Trailer",
    "TvChannel", "TvProgram", "UserRootFolder", "UserView", "Video", "Year",
)  # fmt: skip
_KINDS_BY_LOWER = {kind.lower(): kind for kind in ITEM_KINDS}
# Disc rips kept as folders: /Download cannot serve a folder and answers 400.
FOLDER_VIDEO_TYPES = frozenset({"Dvd", "BluRay"})

# .NET Guid.TryParse formats N, D, B, P: what Jellyfin accepts in ids.
_DASHED = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_GUID = re.compile(rf"[0-9a-f]{{32}}|{_DASHED}|\{{{_DASHED}\}}|\({_DASHED}\)", re.IGNORECASE)
_TEXT_SUBTITLES = {"subrip", "srt", "ass", "ssa", "webvtt", "vtt", "mov_text"}
_CONTENT_TYPES = {
    ".mkv": "video/x-matroska",
    ".mp4": "video/mp4",
    ".m4v": "video/x-m4v",
    ".webm": "video/webm",
    ".avi": "video/x-msvideo",
    ".ts": "video/mp2t",
    ".mov": "video/quicktime",
    ".mka": "audio/x-matroska",
    ".m4a": "audio/mp4",
}


def parse_guid(text: str) -> str | None:
    """32 lowercase hex chars, or None if Jellyfin would reject `text` as an id."""
    if _GUID.fullmatch(text.strip()) is None:
        return None
    return re.sub(r"[^0-9a-f]", "", text.lower())


def parse_authorization(header: str | None) -> dict[str, str] | None:
    """The key=value pairs of `Authorization: MediaBrowser k="v", ...`, else None."""
    if not header:
        return None
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != "mediabrowser":
        return None
    pairs = re.findall(r'([A-Za-z]+)\s*=\s*(?:"([^"]*)"|([^,\s]*))', rest)
    return {key: urllib.parse.unquote(quoted or bare) for key, quoted, bare in pairs}


def http_date(timestamp: float) -> str:
    """`Wed, 21 Oct 2015 07:28:00 GMT`, whole seconds like ASP.NET's Last-Modified."""
    return email.utils.formatdate(int(timestamp), usegmt=True)


def content_type_for(path: Path) -> str:
    return _CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")


def content_disposition(path: Path) -> str:
    """`attachment; filename="x"; filename*=UTF-8''x` with quotes stripped, as Jellyfin."""
    name = path.name.replace('"', "")
    ascii_name = name.encode("ascii", "replace").decode("ascii")
    quoted = urllib.parse.quote(name, safe="")
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quoted}"


def _without_nulls(data: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


def stream_json(stream: MediaStream | Mapping[str, Any]) -> dict[str, Any]:
    """One `MediaStreams[]` entry; a mapping is raw Jellyfin JSON and is served as is."""
    if isinstance(stream, Mapping):
        return dict(stream)
    is_text_sub = stream.type == "Subtitle" and (stream.codec or "") in _TEXT_SUBTITLES
    return _without_nulls(
        {
            "Codec": stream.codec,
            "Language": stream.language,
            "TimeBase": "1/1000",
            "Title": stream.title,
            "DisplayTitle": stream.title or (stream.codec or stream.type).upper(),
            "Channels": stream.channels,
            "IsDefault": stream.is_default,
            "IsForced": stream.is_forced,
            "IsHearingImpaired": False,
            "Height": stream.height,
            "Width": stream.width,
            "AverageFrameRate": stream.frame_rate,
            "RealFrameRate": stream.frame_rate,
            "PixelFormat": stream.pixel_format,
            "Profile": stream.profile,
            "BitDepth": stream.bit_depth,
            "IsInterlaced": stream.is_interlaced,
            "ColorPrimaries": stream.color_primaries,
            "ColorTransfer": stream.color_transfer,
            "ColorSpace": stream.color_space,
            "DvProfile": stream.dv_profile,
            "VideoRangeType": stream.video_range_type,
            "Type": stream.type,
            "Index": stream.index,
            "IsExternal": stream.is_external,
            "Path": stream.path,  # only sidecars carry their own Path
            "IsTextSubtitleStream": is_text_sub,
            "SupportsExternalStream": is_text_sub,
        }
    )


@dataclass(frozen=True)
class Sidecar:
    """An external stream: a file beside the media (`Movie.en.srt`, `Movie.commentary.mka`).

    Jellyfin lists these FIRST in MediaStreams and numbers the file's own streams after
    them (FFProbeVideoInfo: "Add external streams before adding the streams from the file").
    """

    path: Path
    type: str = "Subtitle"
    codec: str = "subrip"
    language: str | None = None
    title: str | None = None

    def to_json(self, index: int) -> dict[str, Any]:
        is_text = self.type == "Subtitle" and self.codec in _TEXT_SUBTITLES
        return _without_nulls(
            {
                "Codec": self.codec,
                "Language": self.language,
                "Title": self.title,
                "DisplayTitle": self.title or self.codec.upper(),
                "IsDefault": False,
                "IsForced": False,
                "Type": self.type,
                "Index": index,
                "IsExternal": True,
                "IsTextSubtitleStream": is_text,
                "SupportsExternalStream": is_text,
                "Path": str(self.path),
            }
        )


@dataclass(frozen=True)
class CatalogLibrary:
    id: str
    name: str
    collection_type: str | None

    def to_json(self) -> dict[str, Any]:
        """A `VirtualFolderInfo`."""
        return _without_nulls(
            {
                "Name": self.name,
                "Locations": [f"/media/{self.name.lower()}"],
                "CollectionType": self.collection_type,
                "ItemId": self.id,
                "RefreshStatus": "Idle",
            }
        )


@dataclass(frozen=True)
class ScannedFile:
    """What Jellyfin's database holds of a file since its last scan: BaseItem.Size and
    DateModified (100 ns ticks). Every version lists these, not the live file, in
    MediaSources[].Size and ETag (BaseItem.GetVersionInfo: `Size = item.Size`, ETag the
    MD5 of DateModified's ticks); /Download serves the live file (PhysicalFile). A file
    replaced without a rescan, or with its old mtime kept, is listed as it was."""

    size: int
    ticks: int

    @classmethod
    def of(cls, path: Path) -> ScannedFile:
        facts = path.stat()
        return cls(facts.st_size, facts.st_mtime_ns // 100)


@dataclass(frozen=True)
class CatalogItem:
    id: str
    name: str
    type: str
    path: Path
    streams: tuple[dict[str, Any], ...]  # the file's own streams, Index from 0
    duration_s: float
    library_id: str
    downloadable: bool = True
    reported_size: int | None = None  # MediaSources Size if not the file's real size
    extra: Mapping[str, Any] = field(default_factory=dict)  # more BaseItemDto fields
    sidecars: tuple[Sidecar, ...] = ()
    probed: bool = True  # False: MediaStreams empty and no RunTimeTicks, as before ffprobe ran
    video_type: str = "VideoFile"  # Iso, Dvd, BluRay
    location_type: str = "FileSystem"  # Virtual: a missing episode, no file at all
    protocol: str = "File"  # Http: a .strm link (IsRemote); /Download serves the .strm text
    other_versions: tuple[tuple[str, Path], ...] = ()  # (source id, path), listed first
    omit_size: bool = False
    symlink_bug: bool = False  # 10.11.1-10.11.4: the link's own size, 500 on ranges
    # 10.11.3+ (jellyfin PR #15263): MediaSources[].Path is a symlink's resolved target,
    # while the item's own Path stays the link.
    resolved_source_path: bool = False
    is_folder: bool = False
    parent_id: str | None = None  # the folder it sits in (an episode's season); else the library
    strm_target: str | None = None  # a .strm (`path`): the text it holds, listed as source Path
    strm_remote: bool = True  # IsRemote of that .strm (see versions.strm_is_remote)
    # None: Size and ETag follow the live file (a server that rescans every change at
    # once); set by `Catalog.scan`: what the database holds until the next scan.
    scanned: ScannedFile | None = None
    trickplay: Trickplay | None = None  # the tiles Jellyfin's trickplay task made

    @property
    def sort_name(self) -> str:
        return self.name.casefold()

    @property
    def parent_ids(self) -> set[str]:
        """Its library, its folder, and its series and season (`extra` SeriesId, SeasonId,
        ParentId): Jellyfin's recursive parentId listing finds an episode under each."""
        ids = {self.library_id} | ({self.parent_id} if self.parent_id else set())
        for key in ("SeriesId", "SeasonId", "ParentId"):
            value = self.extra.get(key)
            parsed = parse_guid(value) if isinstance(value, str) else None
            if parsed is not None:
                ids.add(parsed)
        return ids

    @property
    def has_file(self) -> bool:
        """Whether /Download can serve a file for this item at all."""
        return (
            self.downloadable
            and not self.is_folder
            and self.location_type != "Virtual"
            and self.video_type not in FOLDER_VIDEO_TYPES
        )

    def size(self) -> int | None:
        if self.reported_size is not None:
            return self.reported_size
        if self.scanned is not None:
            return self.scanned.size
        try:
            if self.symlink_bug:
                return self.path.lstat().st_size
            return self.path.stat().st_size
        except OSError:
            return None

    def media_streams(self) -> list[dict[str, Any]]:
        """Sidecars first, then the file's streams renumbered after them, as Jellyfin does."""
        if not self.probed:
            return []
        shift = len(self.sidecars)
        streams = [sidecar.to_json(n) for n, sidecar in enumerate(self.sidecars)]
        for stream in self.streams:
            shifted = dict(stream)
            if isinstance(shifted.get("Index"), int):
                shifted["Index"] += shift
            streams.append(shifted)
        return streams

    def _source(self, source_id: str, path: Path, ticks: int | None) -> dict[str, Any]:
        container = path.suffix.lstrip(".").lower() or None
        remote = self.protocol != "File"
        own = source_id == self.id
        return _without_nulls(
            {
                "Protocol": self.protocol,
                "Id": source_id,
                "Path": "http://media.example/stream.mkv" if remote else self._source_path(path),
                "Type": "Default" if own else "Grouping",
                "Container": None if remote else container,
                "Size": None if self.omit_size or remote else self._size_of(path, own),
                "Name": path.stem,
                "IsRemote": remote,
                "ETag": None if remote else self._etag(path, own),
                "RunTimeTicks": ticks,
                "SupportsDirectPlay": True,
                "VideoType": self.video_type,
                "IsoType": "Dvd" if self.video_type == "Iso" else None,
                "MediaStreams": self.media_streams(),
            }
        )

    def _source_path(self, path: Path) -> str:
        """The media source's Path: the link itself, or on 10.11.3+ where it points."""
        return str(path.resolve() if self.resolved_source_path else path)

    def _strm_source(self, ticks: int | None) -> dict[str, Any]:
        """A .strm's media source as BaseItem.GetVersionInfo lists a shortcut: Path its
        target, Protocol the target's, Container the .strm's own extension."""
        return _without_nulls(
            {
                "Protocol": self.protocol,
                "Id": self.id,
                "Path": self.strm_target,
                "Type": "Default",
                "Container": self.path.suffix.lstrip(".").lower(),
                "Name": self.path.stem,
                "IsRemote": self.strm_remote,
                "RunTimeTicks": ticks,
                "SupportsDirectPlay": True,
                "VideoType": self.video_type,
                "MediaStreams": self.media_streams(),
            }
        )

    def _etag(self, path: Path, own: bool) -> str | None:
        if own and self.scanned is not None:
            return _etag_of_ticks(self.scanned.ticks)
        return _etag_of(path)

    def _size_of(self, path: Path, own: bool) -> int | None:
        if own:
            return self.size()
        try:
            return path.stat().st_size
        except OSError:
            return None

    def _trickplay(self) -> dict[str, Any] | None:
        """Jellyfin fills Trickplay for videos only: `{}` when no tiles were made."""
        if self.is_folder or self.location_type == "Virtual":
            return None
        if self.trickplay is None:
            return {}
        return {self.id: {str(self.trickplay.width): self.trickplay.info_json()}}

    def to_json(self, fields: Iterable[str], server_id: str) -> dict[str, Any]:
        """A `BaseItemDto`; Path, MediaSources, MediaStreams only when asked for."""
        wanted = {name.strip().lower() for name in fields}
        ticks = round(self.duration_s * TICKS_PER_SECOND) if self.probed else None
        container = self.path.suffix.lstrip(".").lower() or None
        sources: list[dict[str, Any]] | None = None
        if not self.is_folder and self.location_type != "Virtual":
            sources = [self._source(vid, path, ticks) for vid, path in self.other_versions]
            if self.strm_target is not None:
                sources.append(self._strm_source(ticks))
            else:
                sources.append(self._source(self.id, self.path, ticks))
        has_path = self.location_type != "Virtual"
        data: dict[str, Any] = {
            "Name": self.name,
            "ServerId": server_id,
            "Id": self.id,
            "Container": None if self.is_folder else container,
            "SortName": self.sort_name if "sortname" in wanted else None,
            "MediaSources": sources if "mediasources" in wanted else None,
            "Path": str(self.path) if "path" in wanted and has_path else None,
            "RunTimeTicks": None if self.is_folder else ticks,
            "IsFolder": self.is_folder,
            "ParentId": (self.parent_id or self.library_id) if "parentid" in wanted else None,
            "Type": self.type,
            "MediaStreams": self.media_streams() if "mediastreams" in wanted else None,
            "VideoType": None if self.is_folder else self.video_type,
            "LocationType": self.location_type,
            "MediaType": "Unknown" if self.is_folder else "Video",
            "Trickplay": self._trickplay() if "trickplay" in wanted else None,
            **self.extra,
        }
        return _without_nulls(data)


class Catalog:
    """Libraries and items, safe to change while the server answers requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._libraries: dict[str, CatalogLibrary] = {}
        self._items: dict[str, CatalogItem] = {}

    def add_library(self, name: str, collection_type: str | None = "movies") -> str:
        library = CatalogLibrary(uuid.uuid4().hex, name, collection_type)
        with self._lock:
            self._libraries[library.id] = library
        return library.id

    def default_library_id(self) -> str:
        """The first library, made ("Movies") if there is none yet."""
        with self._lock:
            if self._libraries:
                return next(iter(self._libraries))
        return self.add_library("Movies")

    def add_item(
        self,
        path: Path,
        *,
        name: str,
        streams: Sequence[MediaStream | Mapping[str, Any]],
        duration_s: float,
        item_type: str = "Movie",
        library_id: str | None = None,
        item_id: str | None = None,
        downloadable: bool = True,
        reported_size: int | None = None,
        extra: Mapping[str, Any] | None = None,
        sidecars: Sequence[Sidecar] = (),
        probed: bool = True,
        video_type: str = "VideoFile",
        location_type: str = "FileSystem",
        protocol: str = "File",
        other_versions: Sequence[Path] = (),
        omit_size: bool = False,
        symlink_bug: bool = False,
        resolved_source_path: bool = False,
        is_folder: bool = False,
        parent_id: str | None = None,
        strm_target: str | None = None,
        strm_remote: bool = True,
        trickplay: Trickplay | None = None,
    ) -> str:
        if item_id is None:
            new_id = uuid.uuid4().hex
        else:
            parsed = parse_guid(item_id)
            if parsed is None:
                raise ValueError(f"not a GUID: {item_id!r}")
            new_id = parsed
        if library_id is None:
            library_id = self.default_library_id()
        elif parse_guid(library_id) not in self._libraries:
            raise ValueError(f"no library {library_id!r}")
        item = CatalogItem(
            id=new_id,
            name=name,
            type=item_type,
            path=Path(path),
            streams=tuple(stream_json(stream) for stream in streams),
            duration_s=duration_s,
            library_id=parse_guid(library_id) or library_id,
            downloadable=downloadable,
            reported_size=reported_size,
            extra=dict(extra or {}),
            sidecars=tuple(sidecars),
            probed=probed,
            video_type=video_type,
            location_type=location_type,
            protocol=protocol,
            other_versions=tuple((uuid.uuid4().hex, Path(p)) for p in other_versions),
            omit_size=omit_size,
            symlink_bug=symlink_bug,
            resolved_source_path=resolved_source_path,
            is_folder=is_folder,
            parent_id=parent_id,
            strm_target=strm_target,
            strm_remote=strm_remote,
            trickplay=trickplay,
        )
        with self._lock:
            self._items[new_id] = item
        return new_id

    def add_episode(
        self,
        path: Path,
        *,
        series: str,
        season: int,
        episode: int,
        name: str,
        streams: Sequence[MediaStream | Mapping[str, Any]],
        duration_s: float,
        library_id: str | None = None,
        year: int | None = None,
        **options: Any,
    ) -> str:
        """An episode as Jellyfin lists one: in its Series and Season folders (made on
        first use), with SeriesName, SeriesId, SeasonId, SeasonName, ParentIndexNumber
        (season), IndexNumber (episode) and its season as ParentId."""
        series_id = self._folder(series, "Series", library_id, None)
        season_name = f"Season {season}"
        season_id = self._folder(season_name, "Season", library_id, series_id, index=season)
        facts: dict[str, Any] = {
            "SeriesName": series,
            "SeriesId": series_id,
            "SeasonId": season_id,
            "SeasonName": season_name,
            "ParentIndexNumber": season,
            "IndexNumber": episode,
            "ProductionYear": year,
        }
        return self.add_item(
            path,
            name=name,
            streams=streams,
            duration_s=duration_s,
            item_type="Episode",
            library_id=library_id,
            parent_id=season_id,
            extra=_without_nulls({**facts, **options.pop("extra", {})}),
            **options,
        )

    def _folder(
        self,
        name: str,
        kind: str,
        library_id: str | None,
        parent_id: str | None,
        index: int | None = None,
    ) -> str:
        """The id of the folder of this kind and name under `parent_id`, made if new."""
        with self._lock:
            for item in self._items.values():
                if item.type == kind and item.name == name and item.parent_id == parent_id:
                    return item.id
        return self.add_item(
            Path("/media") / name,
            name=name,
            streams=(),
            duration_s=0,
            item_type=kind,
            library_id=library_id,
            is_folder=True,
            parent_id=parent_id,
            extra={"IndexNumber": index} if index is not None else None,
        )

    def add_folder(
        self,
        name: str,
        *,
        item_type: str = "Folder",
        library_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """A folder-like item (Series, Season, BoxSet, Folder): no file, no MediaSources."""
        return self.add_item(
            Path("/media") / name,
            name=name,
            streams=(),
            duration_s=0,
            item_type=item_type,
            library_id=library_id,
            is_folder=True,
            extra=extra,
        )

    def remove_item(self, item_id: str) -> None:
        """The item is gone from Jellyfin (its file deleted, the library rescanned)."""
        with self._lock:
            del self._items[item_id]

    def delete_item(self, item_id: str) -> list[CatalogItem]:
        """Jellyfin's LibraryManager.DeleteItem: the item and, for a folder, everything
        under it (GetRecursiveChildren) go; returns them, the descendants first."""
        with self._lock:
            item = self._items.get(item_id)
            if item is None:
                raise KeyError(item_id)
            under = [
                other
                for other in self._items.values()
                if other.id != item_id and item.is_folder and item_id in other.parent_ids
            ]
            for gone in (*under, item):
                del self._items[gone.id]
        return [*under, item]

    def replace_file(self, item_id: str, path: Path) -> CatalogItem:
        """A file replaced in place: same path, so Jellyfin keeps the id (it derives ids
        from the path), with the new file's size and date."""
        with self._lock:
            item = replace(self._items[item_id], path=Path(path))
            self._items[item_id] = item
            return item

    def scan(self, item_id: str) -> CatalogItem:
        """A library scan of the item's file: from now on its listing reports the size
        and date the file has now, whatever happens to the file until the next scan."""
        with self._lock:
            item = self._items[item_id]
            item = replace(item, scanned=ScannedFile.of(item.path))
            self._items[item_id] = item
            return item

    def mark_probed(self, item_id: str, probed: bool = True) -> None:
        """Jellyfin's ffprobe ran (or not): MediaStreams and RunTimeTicks appear."""
        with self._lock:
            self._items[item_id] = replace(self._items[item_id], probed=probed)

    def item(self, item_id: str) -> CatalogItem | None:
        with self._lock:
            return self._items.get(item_id)

    def libraries(self) -> list[CatalogLibrary]:
        with self._lock:
            return list(self._libraries.values())

    def query(
        self,
        *,
        ids: Sequence[str] | None,
        parent_id: str | None,
        include_types: Sequence[str],
        sort_by: Sequence[str],
        exclude_location_types: Sequence[str] = (),
        is_missing: bool | None = None,
        search_term: str | None = None,
    ) -> list[CatalogItem]:
        """The `/Items` filters, before paging (ids/parentId already normalized).

        Like Jellyfin, unknown `includeItemTypes` values are dropped silently, and with
        none left every kind of item comes back, folders and series included.
        """
        with self._lock:
            items = list(self._items.values())
        if ids is not None:
            wanted = set(ids)
            items = [item for item in items if item.id in wanted]
        if parent_id is not None:
            items = [item for item in items if parent_id in item.parent_ids]
        types = {_KINDS_BY_LOWER[t.lower()] for t in include_types if t.lower() in _KINDS_BY_LOWER}
        if types:
            items = [item for item in items if item.type in types]
        excluded = {name.lower() for name in exclude_location_types}
        if is_missing is False:
            excluded.add("virtual")
        if excluded:
            items = [item for item in items if item.location_type.lower() not in excluded]
        if is_missing is True:
            items = [item for item in items if item.location_type == "Virtual"]
        if any(key.lower() == "sortname" for key in sort_by) or search_term:
            items.sort(key=lambda item: (item.sort_name, item.id))
        if search_term:
            items = search_by_name(items, search_term)
        return items


def _etag_of(path: Path) -> str | None:
    """Jellyfin's MediaSource ETag: the MD5 of the file's DateModified ticks, so a
    replaced file gets a new one (BaseItem.GetMediaSourcesInternal)."""
    try:
        ticks = path.stat().st_mtime_ns // 100
    except OSError:
        return None
    return _etag_of_ticks(ticks)


def _etag_of_ticks(ticks: int) -> str:
    return hashlib.md5(str(ticks).encode(), usedforsecurity=False).hexdigest()


def parse_byte_range(header: str, size: int) -> tuple[int, int] | bool | None:
    """ASP.NET's single-range handling: (first, last) to serve, None to ignore the
    header and send the whole file (bad syntax, several ranges), False if unsatisfiable.
    """
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first_text, dash, last_text = spec.strip().partition("-")
    if not dash or not (first_text.isdigit() or last_text.isdigit()):
        return None
    if first_text == "":  # suffix range: the last N bytes
        length = int(last_text)
        if length == 0 or size == 0:
            return False
        return max(0, size - length), size - 1
    first = int(first_text)
    last = int(last_text) if last_text.isdigit() else size - 1
    if last_text and last < first:
        return None
    if first >= size:
        return False
    return first, min(last, size - 1)
