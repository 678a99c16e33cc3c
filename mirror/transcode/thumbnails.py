"""Scrubbing thumbnails made in the mirror's own ffmpeg run: one more output, JPEG sheets.

The run already reads the source once; a thumbnail every 10 s costs little beside it:
- a copied video is otherwise never decoded, so the decoder is told to skip all but the
  keyframes (`-skip_frame:v nokey`): a fraction of the frames, and only the sheets use
  them (a stream copy takes packets, not decoded frames);
- a re-encoded video is decoded anyway, and its frames also feed the thumbnails' chain.
`fps` picks one frame per interval: with `round=up` the last frame at or before each
mark (a keyframe when copying: where a player's seek to the mark lands), not the last
one before the next half-interval as its default would; `eof_action=pass` keeps the
last mark of a short item, the colours are made BT.709
as a re-encode's are (HDR tone-mapped, on one frame in hundreds), the picture is scaled
to 320 pixels wide at its displayed aspect, and `tile` lays 10 x 10 to a sheet, as
Jellyfin's trickplay does. The sheets are small and written as the run goes; the
track (mirror.domain.thumbnails) is written once the run ended, from the sheets' size.
Not deinterlaced: deinterlacers need neighbouring frames, which keyframes-only lacks.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path

from mirror.domain.errors import PermanentError
from mirror.domain.thumbnails import (
    SHEET_COLUMNS,
    SHEET_ROWS,
    THUMBNAIL_WIDTH,
    THUMBNAILS_DIR,
    TRACK_FILE_NAME,
    ThumbnailGrid,
    thumbnail_count,
    thumbnail_track,
)
from mirror.transcode.picture import colour_filters
from mirror.transcode.streams import FileStream

# ffmpeg's JPEG quality scale (2 best .. 31 worst): 5 keeps a 320-pixel thumbnail sharp
# at about 10 KiB (a full sheet of 100 about 1 MiB).
JPEG_QUALITY = 5


@dataclass(frozen=True, slots=True)
class ThumbnailOutput:
    """The sheets one run writes into `directory` (`0.jpg`, `1.jpg`, ...)."""

    directory: Path
    interval_s: float
    filters: tuple[str, ...]  # from the decoded video to the sheets
    # The video is copied and nothing else in the run decodes it: its decoder may skip
    # all but keyframes (`-skip_frame:v nokey` applies to every user of that decoder,
    # so it must stay False as soon as any output re-encodes the video).
    keyframes_only: bool
    columns: int = SHEET_COLUMNS
    rows: int = SHEET_ROWS

    @property
    def pattern(self) -> Path:
        """image2's file pattern: `<directory>/%d.jpg`, numbered from 0."""
        return self.directory / "%d.jpg"

    @property
    def relative_dir(self) -> str:
        return THUMBNAILS_DIR


def plan_thumbnails(
    stream: FileStream,
    work_dir: Path,
    interval_s: float,
    *,
    copy: bool,
    duration_s: float | None = None,
) -> ThumbnailOutput:
    """The thumbnails of the video `stream` every `interval_s` (`copy`: the video is
    copied). An item with fewer than a sheet's worth gets a sheet just big enough
    (a 4 s trailer: one thumbnail, not one among 99 black ones)."""
    columns, rows = SHEET_COLUMNS, SHEET_ROWS
    if duration_s:
        count = thumbnail_count(duration_s, interval_s)
        columns = min(SHEET_COLUMNS, count)
        rows = min(SHEET_ROWS, math.ceil(count / columns))
    return ThumbnailOutput(
        directory=work_dir / THUMBNAILS_DIR,
        interval_s=interval_s,
        filters=thumbnail_filters(stream, interval_s, columns=columns, rows=rows),
        keyframes_only=copy,
        columns=columns,
        rows=rows,
    )


def thumbnail_filters(
    stream: FileStream,
    interval_s: float,
    width: int = THUMBNAIL_WIDTH,
    columns: int = SHEET_COLUMNS,
    rows: int = SHEET_ROWS,
) -> tuple[str, ...]:
    """The chain: one frame per interval, BT.709, `width` wide at the displayed aspect
    (`dar`: the SAR applied; ffmpeg has turned a rotated video upright), square pixels,
    `columns` x `rows` to a sheet."""
    interval_ms = max(1, round(interval_s * 1000))
    return (
        f"fps=1000/{interval_ms}:round=up:eof_action=pass",
        *colour_filters(stream),
        f"scale={width}:trunc({width}/dar/2+0.5)*2",
        "setsar=1",
        f"tile={columns}x{rows}",
    )


def write_thumbnail_track(output: ThumbnailOutput, duration_s: float | None) -> ThumbnailGrid:
    """After the run: the grid the sheets hold, and `thumbnails.vtt` beside them.

    A thumbnail's size is read from the first sheet (a sheet is always `columns` x
    `rows` of them, the last one padded); the count is one per interval over the
    duration, at most what the sheets hold.
    """
    sheets = sheet_paths(output)
    if not sheets:
        raise PermanentError("thumbnails: ffmpeg wrote no sheet (is the video decodable?)")
    sheet_width, sheet_height = jpeg_size(sheets[0])
    count = thumbnail_count(duration_s or 0.0, output.interval_s)
    grid = ThumbnailGrid(
        interval_s=output.interval_s,
        width=sheet_width // output.columns,
        height=sheet_height // output.rows,
        count=min(count, len(sheets) * output.columns * output.rows),
        columns=output.columns,
        rows=output.rows,
    )
    (output.directory / TRACK_FILE_NAME).write_text(thumbnail_track(grid, duration_s), "utf-8")
    return grid


def sheet_paths(output: ThumbnailOutput) -> list[Path]:
    """The sheets written, in order (`2.jpg` before `10.jpg`)."""
    found = [p for p in output.directory.glob("*.jpg") if p.stem.isdigit()]
    return sorted(found, key=lambda path: int(path.stem))


def jpeg_size(path: Path) -> tuple[int, int]:
    """Width and height from a JPEG's start-of-frame marker (no image library needed)."""
    with path.open("rb") as file:
        data = file.read(65536)
    position = 2
    while position + 9 <= len(data):
        if data[position] != 0xFF:
            break
        marker = data[position + 1]
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        # SOF0-SOF15, except DHT (C4), JPG (C8) and DAC (CC), which share the range.
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return width, height
        position += 2 + length
    raise PermanentError(f"thumbnails: {path.name} is not a JPEG ffmpeg could have written")
