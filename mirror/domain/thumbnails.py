"""Scrubbing thumbnails: sprite sheets and the WebVTT track that points into them.

Players (video.js's and Vidstack's thumbnail plugins, JW Player, Shaka's
`addThumbnailsTrack`, `mirror serve`'s page) show the thumbnail of a seek-bar position
from a WebVTT file whose cues name a sheet and a rectangle of it
(`0.jpg#xywh=320,0,320,180`). Jellyfin's trickplay uses the same grid: one thumbnail
every `interval`, `columns` x `rows` of them per JPEG sheet, left to right, then top to
bottom, sheets numbered from 0. So one track format serves both sources: sheets ffmpeg
tiles in the mirror's own run, or the ones Jellyfin already made. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

THUMBNAILS_DIR = "thumbnails"
TRACK_FILE_NAME = "thumbnails.vtt"
# The same sheets as an HLS image playlist (mirror.hls.image_playlist).
IMAGE_PLAYLIST_FILE_NAME = "thumbnails.m3u8"
SHEET_CONTENT_TYPE = "image/jpeg"
TRACK_CONTENT_TYPE = "text/vtt"
# Jellyfin's defaults (TrickplayOptions): 320 pixels wide, 10 x 10 thumbnails a sheet.
THUMBNAIL_WIDTH = 320
SHEET_COLUMNS = 10
SHEET_ROWS = 10


def sheet_file_name(index: int) -> str:
    """`<index>.jpg`, from 0, as Jellyfin names its tiles."""
    return f"{index}.jpg"


@dataclass(frozen=True, slots=True)
class ThumbnailGrid:
    """Where each thumbnail is: one per `interval_s` from 0, `width` x `height` pixels,
    `columns` x `rows` to a sheet, `count` in all."""

    interval_s: float
    width: int
    height: int
    count: int
    columns: int = SHEET_COLUMNS
    rows: int = SHEET_ROWS

    @property
    def per_sheet(self) -> int:
        return self.columns * self.rows

    @property
    def sheets(self) -> int:
        """How many sheets hold `count` thumbnails (the last one may be partly empty)."""
        return math.ceil(self.count / self.per_sheet)

    def place(self, number: int) -> tuple[int, int, int]:
        """Thumbnail `number`'s sheet and its top-left corner there (x, y)."""
        sheet, position = divmod(number, self.per_sheet)
        row, column = divmod(position, self.columns)
        return sheet, column * self.width, row * self.height

    def to_json(self) -> dict[str, Any]:
        return {
            "interval_s": self.interval_s,
            "width": self.width,
            "height": self.height,
            "columns": self.columns,
            "rows": self.rows,
            "count": self.count,
        }


@dataclass(frozen=True, slots=True)
class TrickplayTiles:
    """Trickplay tiles Jellyfin already made for the mirrored media source (one width of
    its item's `Trickplay`), fetched from `/Videos/{id}/Trickplay/{width}/{index}.jpg`."""

    media_source_id: str
    width: int  # of one thumbnail, also the URL's `{width}`
    height: int
    columns: int  # TileWidth
    rows: int  # TileHeight
    count: int  # ThumbnailCount
    interval_s: float  # Interval (milliseconds in Jellyfin's JSON)

    @property
    def grid(self) -> ThumbnailGrid:
        return ThumbnailGrid(
            interval_s=self.interval_s,
            width=self.width,
            height=self.height,
            count=self.count,
            columns=self.columns,
            rows=self.rows,
        )


def thumbnail_count(duration_s: float, interval_s: float) -> int:
    """Thumbnails at 0, interval, 2 x interval, ... before the end: at least one."""
    if duration_s <= 0 or interval_s <= 0:
        return 1
    # A hair of tolerance: a 30.000 s video at 10 s has 3, not 4 (a float's last digit).
    return max(1, math.ceil(duration_s / interval_s - 1e-6))


def thumbnail_track(
    grid: ThumbnailGrid,
    duration_s: float | None,
    sheet_uri: Callable[[int], str] = sheet_file_name,
) -> str:
    """The WebVTT text: cue N covers [N x interval, its next cue or the end) and points at
    its rectangle of its sheet; `sheet_uri` names a sheet as the track refers to it
    (relative by default: the sheets sit beside the track)."""
    lines = ["WEBVTT", ""]
    for number in range(grid.count):
        start = number * grid.interval_s
        end = (number + 1) * grid.interval_s
        if duration_s is not None and number == grid.count - 1 and duration_s > start:
            end = duration_s
        sheet, x, y = grid.place(number)
        lines += [
            f"{_timestamp(start)} --> {_timestamp(end)}",
            f"{sheet_uri(sheet)}#xywh={x},{y},{grid.width},{grid.height}",
            "",
        ]
    return "\n".join(lines)


def _timestamp(seconds: float) -> str:
    """WebVTT's `HH:MM:SS.mmm`."""
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"


def thumbnails_json(
    grid: ThumbnailGrid,
    track_key: str,
    origin: str,
    objects: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The manifest's `thumbnails`: the track's key, the grid, where the sheets came from
    (`ffmpeg` or `jellyfin`) and every object (sheets and track) with size and SHA-256."""
    return {"track": track_key, "origin": origin, **grid.to_json(), "objects": list(objects)}


def thumbnail_objects(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The thumbnail objects a manifest lists (key, size, sha256), for `mirror verify`;
    none for a manifest without thumbnails (older ones, MIRROR_THUMBNAILS=false)."""
    thumbnails = manifest.get("thumbnails")
    if not isinstance(thumbnails, dict) or not isinstance(thumbnails.get("objects"), list):
        return []
    return [
        {"key": entry["key"], "size": entry.get("size"), "sha256": entry.get("sha256")}
        for entry in thumbnails["objects"]
        if isinstance(entry, dict) and isinstance(entry.get("key"), str)
    ]
