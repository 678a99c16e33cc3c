"""What Jellyfin lists, as plain data: libraries, a listing's items and pages, search hits.

The words the use cases (`mirror.converge`) and the web app work with; the Jellyfin
adapter (`mirror.jellyfin.models`) builds them from Jellyfin's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mirror.domain.item import ItemTitle


@dataclass(frozen=True, slots=True)
class Library:
    """One Jellyfin library (a "virtual folder"); `item_id` is its parentId for /Items."""

    name: str
    item_id: str
    collection_type: str | None


@dataclass(frozen=True, slots=True)
class ItemSummary:
    """One item of a library listing: enough to decide whether to enqueue it."""

    id: str
    name: str
    type: str
    path: str | None = None
    size: int | None = None
    # What the item is (see mirror.domain.sources): a sweep skips what is not one media file.
    is_folder: bool = False
    location_type: str | None = None
    protocol: str | None = None
    is_remote: bool = False
    video_type: str | None = None
    container: str | None = None  # the media source's ("strm" for a .strm, see sources)
    etag: str | None = None  # the media source's ETag: changes when its file does
    title: ItemTitle = field(
        default_factory=ItemTitle
    )  # name, series, season, episode, year, parent ids
    media_source_id: str | None = None  # MediaSources[].Id of the source /Download serves

    def fingerprint(self) -> dict[str, object]:
        """The listing's side of `mirror sync`'s comparison, keyed like the `source` column.

        Only what identifies the bytes: the media source's id, Size and ETag, all three as
        Jellyfin's database stores them (BaseItem.GetVersionInfo in
        MediaBrowser.Controller/Entities/BaseItem.cs: Size = item.Size, ETag = MD5 of
        item.DateModified.Ticks). Never a path: on 10.11.3+ the media source's Path is a
        symlink's target while the item's Path stays the link (jellyfin PR #15263; PR #16965
        resolves it only at playback), so a path compares two spellings of one file. Never
        the item-level `Etag` either: it hashes the item's metadata and changes on every
        metadata save.
        """
        facts = {"media_source_id": self.media_source_id, "size": self.size, "etag": self.etag}
        return {key: value for key, value in facts.items() if value is not None}


@dataclass(frozen=True, slots=True)
class ItemHit:
    """One answer of a title search: what a person needs to pick the right item."""

    id: str
    name: str
    type: str  # Movie, Episode, Series, Season
    year: int | None = None
    series_name: str | None = None  # episodes and seasons
    season_name: str | None = None  # episodes
    index_number: int | None = None  # the episode's (or season's) number
    parent_index_number: int | None = None  # the episode's season number

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "year": self.year,
            "series_name": self.series_name,
            "season_name": self.season_name,
            "index_number": self.index_number,
            "parent_index_number": self.parent_index_number,
        }


@dataclass(frozen=True, slots=True)
class ItemPage:
    """One page of a library listing, with the server's total for progress bars."""

    items: tuple[ItemSummary, ...]
    start_index: int
    total: int
