"""The picture facts of a video stream, read from what `ffmpeg -i` prints about it.

A stream line carries the scan and colour in the pixel format's parenthesis
(`yuv420p10le(tv, bt2020nc/bt2020/smpte2084, progressive)`: range, then matrix /
primaries / transfer - one name when all three agree - then the field order) and the
pixel shape in brackets (`[SAR 64:45 DAR 16:9]`). Rotation and Dolby Vision come as
side data on the lines below it. These are what decide deinterlacing, tone-mapping and
the displayed size (mirror.transcode.picture); pure parsing, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Picture:
    """How a video stream's frames are to be shown. None: ffmpeg did not say."""

    field_order: str | None = None  # progressive, tff or bff (in display order)
    primaries: str | None = None  # ffmpeg's names: bt709, bt2020, bt470bg, smpte170m...
    transfer: str | None = None  # bt709, smpte2084 (PQ), arib-std-b67 (HLG)...
    matrix: str | None = None  # bt709, bt2020nc, bt470bg, smpte170m...
    sar: tuple[int, int] | None = None  # sample (pixel) aspect ratio
    rotation: int | None = None  # display matrix, degrees counter-clockwise
    dovi_profile: int | None = None  # Dolby Vision configuration record's profile

    @property
    def interlaced(self) -> bool | None:
        if self.field_order is None:
            return None
        return self.field_order != "progressive"


NO_PICTURE_FACTS = Picture()

# ffmpeg's av_field_order names; the two "swapped" ones are coded in one order and shown
# in the other, and display order is what a deinterlacer needs.
_FIELD_ORDERS = {
    "progressive": "progressive",
    "top first": "tff",
    "bottom first": "bff",
    "top coded first (swapped)": "bff",
    "bottom coded first (swapped)": "tff",
}
_RANGES = frozenset({"tv", "pc", "unknown"})
_UNSPECIFIED = frozenset({"unknown", "unspecified", "reserved", "reserved0"})
# `yuv420p(tv, bt709, top first)`: no space before the parenthesis, unlike a profile's.
_PIXEL_ATTRIBUTES = re.compile(r", [a-z][a-z0-9_]*\((?P<attrs>(?:[^()]|\([^()]*\))*)\)")
_SAR = re.compile(r"\[SAR (\d+):(\d+) DAR \d+:\d+\]")
_ROTATION = re.compile(r"display ?matrix: rotation of (-?\d+(?:\.\d+)?) degrees", re.IGNORECASE)
_DOVI = re.compile(r"dovi configuration record:.*?\bprofile: (\d+)", re.IGNORECASE)


def parse_picture(rest: str) -> Picture:
    """The facts on a video's `Stream #0:N: Video: ...` line (`rest`: after the codec)."""
    picture = NO_PICTURE_FACTS
    attributes = _PIXEL_ATTRIBUTES.search(rest)
    if attributes:
        for token in (part.strip() for part in attributes["attrs"].split(", ")):
            picture = _with_attribute(picture, token)
    if (sar := _SAR.search(rest)) and int(sar[1]) > 0 and int(sar[2]) > 0:
        picture = replace(picture, sar=(int(sar[1]), int(sar[2])))
    return picture


def parse_side_data_line(line: str, picture: Picture) -> Picture:
    """`picture` with what one side-data line below the stream adds (itself if nothing)."""
    if rotation := _ROTATION.search(line):
        return replace(picture, rotation=_normalized_degrees(float(rotation[1])))
    if dovi := _DOVI.search(line):
        return replace(picture, dovi_profile=int(dovi[1]))
    return picture


def _with_attribute(picture: Picture, token: str) -> Picture:
    if token in _FIELD_ORDERS:
        return replace(picture, field_order=_FIELD_ORDERS[token])
    if token in _RANGES or not token:
        return picture
    names = token.split("/")
    if len(names) == 3:
        matrix, primaries, transfer = names
    elif len(names) == 1:
        matrix = primaries = transfer = token
    else:
        return picture
    return replace(
        picture,
        matrix=_specified(matrix),
        primaries=_specified(primaries),
        transfer=_specified(transfer),
    )


def _specified(name: str) -> str | None:
    return None if name in _UNSPECIFIED else name


def _normalized_degrees(degrees: float) -> int:
    """-90.00 -> -90, 270 -> -90: whole degrees in (-180, 180]."""
    whole = round(degrees) % 360
    return whole - 360 if whole > 180 else whole
