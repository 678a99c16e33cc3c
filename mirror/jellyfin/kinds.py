"""Jellyfin's item kinds (the BaseItemKind enum of its OpenAPI spec, 10.9-10.11).

`/Items` silently drops an `includeItemTypes` value it does not know and, with none
left, returns every kind of item (folders and series included), so a typo in
`--type` would sweep the whole library. Values are checked here before any request.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

ITEM_KINDS = (
    "AggregateFolder",
    "Audio",
    "AudioBook",
    "BasePluginFolder",
    "Book",
    "BoxSet",
    "Channel",
    "ChannelFolderItem",
    "CollectionFolder",
    "Episode",
    "Folder",
    "Genre",
    "ManualPlaylistsFolder",
    "Movie",
    "LiveTvChannel",
    "LiveTvProgram",
    "MusicAlbum",
    "MusicArtist",
    "MusicGenre",
    "MusicVideo",
    "Person",
    "Photo",
    "PhotoAlbum",
    "Playlist",
    "PlaylistsFolder",
    "Program",
    "Recording",
    "Season",
    "Series",
    "Studio",
    "Trailer",
    "TvChannel",
    "TvProgram",
    "UserRootFolder",
    "UserView",
    "Video",
    "Year",
)
_BY_LOWER = {kind.lower(): kind for kind in ITEM_KINDS}


def check_item_kinds(values: Iterable[str]) -> tuple[str, ...]:
    """Jellyfin's spelling of each kind (case-insensitive input); ValueError for the rest.

    The error names the first unknown value and the closest kind, if any is close.
    """
    kinds: list[str] = []
    for value in values:
        kind = _BY_LOWER.get(value.strip().lower())
        if kind is None:
            close = difflib.get_close_matches(value.strip().lower(), list(_BY_LOWER), n=1)
            hint = f"; did you mean {_BY_LOWER[close[0]]!r}?" if close else ""
            raise ValueError(f"{value!r} is not a Jellyfin item type{hint}")
        if kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)
