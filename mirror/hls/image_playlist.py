"""The scrubbing thumbnails' sheets as an HLS image playlist, named in the master.

Roku's and Apple's image media playlists (`EXT-X-IMAGES-ONLY`, one segment per sheet
cut in `EXT-X-TILES`), the form Jellyfin's `tiles.m3u8` has too; the master names it in
`EXT-X-IMAGE-STREAM-INF`, which Shaka Player and Roku read and hls.js, video.js, Safari
and ffmpeg skip. Pure text.
"""

from __future__ import annotations

import math

from mirror.domain.thumbnails import ThumbnailGrid, sheet_file_name


def image_playlist(grid: ThumbnailGrid, duration_s: float | None) -> str:
    """The sheets as an image media playlist: one segment per sheet lasting its
    thumbnails' intervals (the last one up to the end), each cut in `LAYOUT` tiles of
    `RESOLUTION` pixels shown `DURATION` seconds each."""
    per_sheet = grid.per_sheet * grid.interval_s
    lengths = []
    for sheet in range(grid.sheets):
        start = sheet * per_sheet
        end = min((sheet + 1) * per_sheet, grid.count * grid.interval_s)
        if sheet == grid.sheets - 1 and duration_s is not None and duration_s > start:
            end = duration_s
        lengths.append(max(end - start, 0.001))
    lines = [
        "#EXTM3U",
        "#EXT-X-VERSION:7",
        f"#EXT-X-TARGETDURATION:{math.ceil(max(lengths))}",
        "#EXT-X-MEDIA-SEQUENCE:0",
        "#EXT-X-PLAYLIST-TYPE:VOD",
        "#EXT-X-IMAGES-ONLY",
    ]
    tiles = (
        f"#EXT-X-TILES:RESOLUTION={grid.width}x{grid.height},"
        f"LAYOUT={grid.columns}x{grid.rows},DURATION={_decimal(grid.interval_s)}"
    )
    for sheet, length in enumerate(lengths):
        lines += [f"#EXTINF:{_decimal(length)},", tiles, sheet_file_name(sheet)]
    return "\n".join([*lines, "#EXT-X-ENDLIST", ""])


def image_stream_line(grid: ThumbnailGrid, peak_bits_per_s: int, uri: str) -> str:
    """The master's `EXT-X-IMAGE-STREAM-INF` naming the image playlist at `uri`."""
    return (
        f"#EXT-X-IMAGE-STREAM-INF:BANDWIDTH={max(1, peak_bits_per_s)},"
        f'RESOLUTION={grid.width}x{grid.height},CODECS="jpeg",URI="{uri}"'
    )


def _decimal(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")
