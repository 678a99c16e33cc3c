"""What a re-encode must do to a picture so it looks in a browser as it does in Jellyfin.

Browsers show frames as they are: they neither deinterlace, nor tone-map HDR on an SDR
screen, and an H.264 encoder refuses odd sizes. So re-encoding a video:
- deinterlaces it (bwdif) when the probe or Jellyfin says it is interlaced;
- scales it to square pixels of even size (an anamorphic 720x576 at 16:9 becomes
  1024x576; ffmpeg has already turned a rotated video upright when it decodes it);
- tone-maps HDR (PQ, HLG) to SDR BT.709, and converts other SDR colours (BT.601,
  BT.2020) to BT.709, so every re-encode is tagged BT.709 and says the truth.
Pure: plain facts in, ffmpeg filter strings out (mirror.transcode.command joins them).
"""

from __future__ import annotations

from typing import Literal

from mirror.transcode.streams import FileStream

VideoRange = Literal["SDR", "PQ", "HLG"]

# bwdif (what Jellyfin's software path uses): one frame per frame (send_frame, as
# Jellyfin's default: the frame rate and frame count stay the source's), and only frames
# the decoder flags as interlaced, so progressive stretches of a mixed source stay as
# they are.
DEINTERLACE = "bwdif=mode=send_frame:parity=auto:deint=interlaced"
# Square pixels, even sides: the width stretched to the displayed one (width x SAR; a
# no-op for square pixels), then an odd side padded with one black line. Scaling 405
# lines to 406 would resample every line of the picture (a blur that ffmpeg's idet
# reads as combing on fine detail); one line of padding leaves the picture as it was.
SQUARE_EVEN = (
    "scale=trunc(iw*sar+0.5):ih",
    "pad=ceil(iw/2)*2:ceil(ih/2)*2",
    "setsar=1",
)
# mobius keeps what an SDR screen can show as it is and rolls off only the highlights
# above it; hable darkens the whole picture by about a third. desat=0: no grey highlights.
_TONE_MAP_CURVE = "tonemap=tonemap=mobius:desat=0"
# The frames' own tags: ffmpeg 9 gives the encoder the frames' primaries and transfer
# over `-color_primaries` / `-color_trc`, so an untagged source would stay untagged.
TAG_BT709 = "setparams=color_primaries=bt709:color_trc=bt709:colorspace=bt709"

_TRANSFER_RANGES: dict[str, VideoRange] = {"smpte2084": "PQ", "arib-std-b67": "HLG"}
# Jellyfin's VideoRangeType, for a stream whose tags the probe did not read.
_JELLYFIN_RANGES: dict[str, VideoRange] = {
    "HDR10": "PQ",
    "HDR10Plus": "PQ",
    "DOVI": "PQ",
    "DOVIWithHDR10": "PQ",
    "DOVIWithHDR10Plus": "PQ",
    "DOVIWithEL": "PQ",
    "DOVIWithELHDR10Plus": "PQ",
    "HLG": "HLG",
    "DOVIWithHLG": "HLG",
}
# Names zscale takes for input colours; anything else is treated as untagged.
_MATRICES = frozenset({"bt709", "bt470bg", "smpte170m", "smpte240m", "bt2020nc", "bt2020c", "fcc"})
# Gamuts an SDR picture is worth converting from. SD's (EBU bt470bg, SMPTE-C smpte170m)
# are within a hair of BT.709 and players show them as BT.709; converting them, from a
# tag or a guess, moves colours more than it corrects them.
_WIDE_GAMUTS = frozenset({"bt2020", "smpte432"})
# Above this many lines an untagged video is HD (BT.709), at or below it SD (BT.601).
_SD_MAX_HEIGHT = 576


def video_range(stream: FileStream) -> VideoRange:
    """SDR, PQ (HDR10, HDR10+, Dolby Vision 5/8.1) or HLG: the tags first, then Jellyfin."""
    if stream.color_transfer in _TRANSFER_RANGES:
        return _TRANSFER_RANGES[stream.color_transfer]
    if stream.color_transfer is None and stream.video_range_type in _JELLYFIN_RANGES:
        return _JELLYFIN_RANGES[stream.video_range_type]
    return "SDR"


def range_of_transfer(transfer: str | None) -> VideoRange:
    """The HLS VIDEO-RANGE a transfer tag means (an output's, read back from the file)."""
    return _TRANSFER_RANGES.get(transfer or "", "SDR")


def dolby_vision_without_fallback(stream: FileStream) -> bool:
    """Dolby Vision profile 5 (Jellyfin: DOVI): its base layer is IPTPQc2, not HDR10 or
    SDR, so without the RPU's reshaping (libplacebo, which needs Vulkan) every tone-map
    gives wrong, green-purple colours."""
    return stream.dv_profile == 5 or stream.video_range_type == "DOVI"


def shows_as_is(stream: FileStream) -> bool:
    """Progressive SDR: what a browser shows right without any help."""
    return not stream.interlaced and video_range(stream) == "SDR"


def video_filters(stream: FileStream) -> tuple[str, ...]:
    """The `-vf` chain for re-encoding `stream`, in order; the last one tags BT.709.

    Deinterlacing comes first (scaling mixes the fields); colours last, after scaling
    has made the picture no bigger than it needs.
    """
    filters: list[str] = []
    if stream.interlaced:
        filters.append(DEINTERLACE)
    if _needs_square_even(stream):
        filters += SQUARE_EVEN
    filters += _to_bt709(stream)
    filters.append(TAG_BT709)
    return tuple(filters)


def colour_filters(stream: FileStream) -> tuple[str, ...]:
    """Only the colour part of `video_filters` (tone-map or convert to BT.709): what a
    thumbnail of the stream needs to look right in a browser."""
    return tuple(_to_bt709(stream))


def display_size(
    width: int, height: int, sar: tuple[int, int] | None, rotation: int | None
) -> tuple[int, int]:
    """The size a player shows: width stretched by the SAR, sides swapped when turned 90."""
    shown_width = round(width * sar[0] / sar[1]) if sar and sar[1] else width
    if rotation is not None and abs(rotation) % 180 == 90:
        return height, shown_width
    return shown_width, height


def _needs_square_even(stream: FileStream) -> bool:
    if stream.width is None or stream.height is None:
        return True  # the scale is a no-op on a square, even picture: cheap insurance
    odd = stream.width % 2 == 1 or stream.height % 2 == 1
    return odd or (stream.sar is not None and stream.sar[0] != stream.sar[1])


def _to_bt709(stream: FileStream) -> list[str]:
    hdr = video_range(stream)
    if hdr != "SDR":
        transfer = "smpte2084" if hdr == "PQ" else "arib-std-b67"
        matrix = stream.color_space if stream.color_space in _MATRICES else "bt2020nc"
        primaries = stream.color_primaries if stream.color_primaries in _WIDE_GAMUTS else "bt2020"
        return [
            f"zscale=tin={transfer}:min={matrix}:pin={primaries}:t=linear:npl=100",
            "format=gbrpf32le",
            "zscale=p=bt709",
            _TONE_MAP_CURVE,
            "zscale=t=bt709:m=bt709:r=tv",
            "format=yuv420p",
        ]
    matrix = _sdr_matrix(stream)
    wide_gamut = stream.color_primaries in _WIDE_GAMUTS
    if matrix == "bt709" and not wide_gamut:
        return []
    if not wide_gamut:
        # Only the matrix: every decoder turns the source into the same RGB as before.
        return [f"zscale=min={matrix}:m=bt709"]
    # The SD and HD camera curves are the same function (BT.601 = BT.709).
    return [f"zscale=tin=bt709:min={matrix}:pin={stream.color_primaries}:t=bt709:m=bt709:p=bt709"]


def _sdr_matrix(stream: FileStream) -> str:
    """The YUV matrix of an SDR stream; an untagged one as players assume it (ffmpeg, mpv,
    VLC, Kodi): BT.601 up to 576 lines - 625-line PAL (bt470bg) at 576, 525-line NTSC
    (smpte170m) below - and BT.709 above."""
    if stream.color_space in _MATRICES:
        return stream.color_space
    height = stream.height or _SD_MAX_HEIGHT + 1
    return "bt709" if height > _SD_MAX_HEIGHT else "bt470bg" if height == 576 else "smpte170m"
