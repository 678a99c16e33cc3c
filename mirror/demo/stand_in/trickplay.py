"""Trickplay tiles as Jellyfin (10.9+) keeps and serves them, for the stand-in.

Jellyfin's scheduled trickplay task extracts one frame per `Interval` (10 s), scales
it to `Width` (320), and tiles `TileWidth` x `TileHeight` (10 x 10) frames to a JPEG,
`<metadata>/trickplay/<width>/<index>.jpg` from 0. The item's JSON lists them with
`fields=Trickplay` as `{media source id: {width: {Width, Height, TileWidth,
TileHeight, ThumbnailCount, Interval, Bandwidth}}}` (`{}` when none were made; never
for folders), and `TrickplayController` serves `Videos/{itemId}/Trickplay/{width}/
{index}.jpg` (404 for an unknown item or a missing file) and `.../tiles.m3u8` (an
`EXT-X-IMAGES-ONLY` playlist; 404 when the width has none).
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirror.domain.thumbnails import thumbnail_count
from mirror.transcode.thumbnails import jpeg_size


@dataclass(frozen=True)
class Trickplay:
    """One width of an item's trickplay tiles: `directory` holds `<index>.jpg`."""

    directory: Path
    width: int
    height: int
    thumbnail_count: int
    tile_width: int = 10
    tile_height: int = 10
    interval_ms: int = 10_000
    bandwidth: int = 0

    def info_json(self) -> dict[str, Any]:
        """Jellyfin's `TrickplayInfoDto`."""
        return {
            "Width": self.width,
            "Height": self.height,
            "TileWidth": self.tile_width,
            "TileHeight": self.tile_height,
            "ThumbnailCount": self.thumbnail_count,
            "Interval": self.interval_ms,
            "Bandwidth": self.bandwidth,
        }

    def tile(self, index: int) -> Path | None:
        """Sheet `index`, if its file is there (Jellyfin answers 404 otherwise)."""
        path = self.directory / f"{index}.jpg"
        return path if path.is_file() else None

    def playlist(self, media_source_id: str, api_key: str) -> str:
        """`tiles.m3u8`, as TrickplayController writes it."""
        per_sheet = self.tile_width * self.tile_height
        sheets = math.ceil(self.thumbnail_count / per_sheet)
        seconds = self.interval_ms / 1000
        lines = ["#EXTM3U", f"#EXT-X-TARGETDURATION:{sheets}", "#EXT-X-VERSION:7"]
        lines += ["#EXT-X-MEDIA-SEQUENCE:1", "#EXT-X-PLAYLIST-TYPE:VOD", "#EXT-X-IMAGES-ONLY"]
        for index in range(sheets):
            count = per_sheet if index < sheets - 1 else self.thumbnail_count - index * per_sheet
            lines += [
                f"#EXTINF:{_decimal(seconds * count)},",
                f"#EXT-X-TILES:RESOLUTION={self.width}x{self.height},"
                f"LAYOUT={self.tile_width}x{self.tile_height},DURATION={_decimal(seconds)}",
                f"Trickplay/{self.width}/{index}.jpg?MediaSourceId={media_source_id}"
                f"&api_key={api_key}",
            ]
        return "\n".join([*lines, "#EXT-X-ENDLIST", ""])


def make_trickplay(
    video: Path,
    directory: Path,
    duration_s: float,
    *,
    ffmpeg: str,
    width: int = 320,
    interval_ms: int = 10_000,
) -> Trickplay:
    """Tiles of `video` made the way Jellyfin's trickplay task makes them (a frame per
    interval, `width` wide, 10 x 10 to a sheet) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [ffmpeg, "-nostdin", "-loglevel", "error", "-y", "-i", str(video),
         "-vf", f"fps=1000/{interval_ms}:round=up:eof_action=pass,scale={width}:-2,tile=10x10",
         "-fps_mode", "passthrough", "-start_number", "0", "-q:v", "4",
         str(directory / "%d.jpg")],
        check=True,
    )  # fmt: skip
    sheet_width, sheet_height = jpeg_size(directory / "0.jpg")
    return Trickplay(
        directory=directory,
        width=sheet_width // 10,
        height=sheet_height // 10,
        thumbnail_count=thumbnail_count(duration_s, interval_ms / 1000),
        interval_ms=interval_ms,
    )


def _decimal(value: float) -> str:
    """C#'s `{0:0.###}`."""
    return f"{value:.3f}".rstrip("0").rstrip(".")
