"""Which filters a re-encode gets, what `auto` copies, and what is refused: plain data."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.domain.errors import PermanentError
from mirror.domain.item import MediaItem, MediaStream
from mirror.hls.fragments import ByteRange, Fragment, FragmentIndex
from mirror.hls.playlists import VideoRendition, master_playlist
from mirror.jellyfin.models import parse_media_stream
from mirror.transcode import build_command, plan_transcode
from mirror.transcode.picture import (
    DEINTERLACE,
    SQUARE_EVEN,
    TAG_BT709,
    display_size,
    video_filters,
)
from mirror.transcode.plan import plays_everywhere
from mirror.transcode.probe import parse_probe
from mirror.transcode.streams import FileStream
from mirror.transcode.verify import check_output
from tests.unit.test_probe_picture import DOLBY_VISION_5_MKV, HDR10_MP4

WORK = Path("/work/item")


def stream(**facts: object) -> FileStream:
    base: dict[str, object] = {
        "index": 0, "specifier": "v:0", "type": "Video", "codec": "h264", "width": 1920,
        "height": 1080, "pixel_format": "yuv420p", "profile": "High", "bit_depth": 8,
        "sar": (1, 1), "interlaced": False, "color_primaries": "bt709",
        "color_transfer": "bt709", "color_space": "bt709",
    }  # fmt: skip
    return FileStream(**{**base, **facts})  # type: ignore[arg-type]


def item(*streams: MediaStream) -> MediaItem:
    return MediaItem(
        id="a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21", name="Dune", type="Movie", container="mkv",
        size=1, duration_s=10.0, streams=streams,
    )  # fmt: skip


def test_progressive_bt709_square_even_picture_only_gets_its_tags() -> None:
    assert video_filters(stream()) == (TAG_BT709,)
    assert plays_everywhere(stream())


def test_interlaced_is_deinterlaced_first_and_never_copied() -> None:
    filters = video_filters(stream(interlaced=True, width=720, height=576, sar=(64, 45)))

    assert filters[0] == DEINTERLACE
    assert filters[1 : 1 + len(SQUARE_EVEN)] == SQUARE_EVEN
    assert not plays_everywhere(stream(interlaced=True))


@pytest.mark.parametrize(
    ("width", "height", "sar", "scaled"),
    [
        (720, 405, (1, 1), True),  # odd height: H.264 refuses it
        (721, 404, None, True),
        (720, 576, (64, 45), True),  # anamorphic: square pixels
        (720, 576, (1, 1), False),
        (None, None, None, True),  # unknown size: the even scale is a no-op when not needed
    ],
)
def test_odd_or_anamorphic_pictures_are_scaled_to_square_even_pixels(
    width: int | None, height: int | None, sar: tuple[int, int] | None, scaled: bool
) -> None:
    filters = video_filters(stream(width=width, height=height, sar=sar))

    assert (SQUARE_EVEN[0] in filters) is scaled
    assert ("setsar=1" in filters) is scaled


@pytest.mark.parametrize(
    ("facts", "transfer"),
    [
        ({"color_transfer": "smpte2084", "color_primaries": "bt2020"}, "smpte2084"),
        ({"color_transfer": "arib-std-b67", "color_primaries": "bt2020"}, "arib-std-b67"),
        # Tags unread, Jellyfin's VideoRangeType says it (DV 8.1 has an HDR10 base).
        (
            {"color_transfer": None, "color_primaries": None, "video_range_type": "DOVIWithHDR10"},
            "smpte2084",
        ),
    ],
)
def test_hdr_is_tone_mapped_to_bt709(facts: dict[str, object], transfer: str) -> None:
    filters = video_filters(stream(color_space="bt2020nc", **facts))

    assert filters[0] == f"zscale=tin={transfer}:min=bt2020nc:pin=bt2020:t=linear:npl=100"
    assert "tonemap=tonemap=mobius:desat=0" in filters
    assert filters[-2:] == ("format=yuv420p", TAG_BT709)


def test_hdr_tagged_h264_is_not_copied_under_auto() -> None:
    hdr = stream(color_transfer="smpte2084", color_primaries="bt2020", color_space="bt2020nc")

    assert not plays_everywhere(hdr)


@pytest.mark.parametrize(
    ("facts", "conversion"),
    [
        # Untagged SD: BT.601 as players assume it (PAL at 576 lines, NTSC below); only the
        # matrix changes, SD gamuts are shown as BT.709 anyway.
        ({"height": 576, "width": 720}, "zscale=min=bt470bg:m=bt709"),
        ({"height": 480, "width": 720}, "zscale=min=smpte170m:m=bt709"),
        ({"height": 480, "color_space": "bt470bg", "color_primaries": "smpte170m"},
         "zscale=min=bt470bg:m=bt709"),
        # A wide gamut in SDR is converted too.
        ({"color_space": "bt2020nc", "color_primaries": "bt2020"},
         "zscale=tin=bt709:min=bt2020nc:pin=bt2020:t=bt709:m=bt709:p=bt709"),
    ],
)  # fmt: skip
def test_other_sdr_colours_are_converted_to_bt709(
    facts: dict[str, object], conversion: str
) -> None:
    untagged = {"color_space": None, "color_primaries": None, "color_transfer": None}
    filters = video_filters(stream(**{**untagged, **facts}))

    assert filters == (conversion, TAG_BT709)


def test_untagged_hd_is_taken_as_bt709_and_only_tagged() -> None:
    untagged = stream(color_space=None, color_primaries=None, color_transfer=None)

    assert video_filters(untagged) == (TAG_BT709,)


@pytest.mark.parametrize(
    ("size", "sar", "rotation", "shown"),
    [
        ((720, 576), (64, 45), None, (1024, 576)),
        ((720, 480), (8, 9), None, (640, 480)),
        ((1280, 720), (1, 1), -90, (720, 1280)),
        ((1280, 720), None, 90, (720, 1280)),
        ((1920, 1080), (1, 1), 180, (1920, 1080)),
    ],
)
def test_display_size_applies_sar_then_rotation(
    size: tuple[int, int], sar: tuple[int, int] | None, rotation: int | None, shown: tuple[int, int]
) -> None:
    assert display_size(*size, sar, rotation) == shown


def test_dolby_vision_profile_5_is_refused_naming_the_item_and_why() -> None:
    probe = parse_probe(DOLBY_VISION_5_MKV)
    listed = item(*(s.to_media_stream() for s in probe.streams))

    with pytest.raises(PermanentError) as refused:
        plan_transcode(listed, WORK, WORK / "source.mkv", probe=probe)

    message = str(refused.value)
    assert "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21 (Dune)" in message
    assert "Dolby Vision profile 5" in message and "\n" not in message
    # Copying on request keeps it as it is; nothing is tone-mapped.
    copied = plan_transcode(listed, WORK, WORK / "source.mkv", probe=probe, video_codec="copy")
    assert copied.video.codec == "copy"


def test_jellyfins_dovi_range_type_alone_is_refused_too() -> None:
    dv = MediaStream(index=0, type="Video", codec="hevc", video_range_type="DOVI")

    with pytest.raises(PermanentError, match="Dolby Vision profile 5"):
        plan_transcode(item(dv), WORK, WORK / "source.mkv")


def test_jellyfin_picture_fields_are_parsed() -> None:
    parsed = parse_media_stream(
        {
            "Index": 0, "Type": "Video", "Codec": "hevc", "IsInterlaced": True,
            "ColorPrimaries": "bt2020", "ColorTransfer": "smpte2084", "ColorSpace": "bt2020nc",
            "DvProfile": 8, "VideoRangeType": "DOVIWithHDR10",
        }
    )  # fmt: skip
    assert parsed is not None
    assert (parsed.is_interlaced, parsed.color_primaries) == (True, "bt2020")
    assert (parsed.color_transfer, parsed.color_space) == ("smpte2084", "bt2020nc")
    assert (parsed.dv_profile, parsed.video_range_type) == (8, "DOVIWithHDR10")
    unknown = parse_media_stream(
        {"Index": 0, "Type": "Video", "IsInterlaced": False, "VideoRangeType": "Unknown"}
    )
    assert unknown is not None  # Jellyfin's defaults say nothing
    assert (unknown.is_interlaced, unknown.video_range_type) == (None, None)


def test_reencode_command_carries_the_filters_and_a_copy_none() -> None:
    hdr = parse_probe(HDR10_MP4)
    listed = item(*(s.to_media_stream() for s in hdr.streams))

    encode = plan_transcode(listed, WORK, WORK / "s.mp4", probe=hdr, output_format="hls")
    copy = plan_transcode(listed, WORK, WORK / "s.mp4", probe=hdr, video_codec="copy")

    argv = build_command(encode, "ffmpeg")
    assert argv[argv.index("-vf") + 1] == ",".join(encode.video.filters)
    assert "tonemap=tonemap=mobius:desat=0" in encode.video.filters
    assert "-vf" not in build_command(copy, "ffmpeg") and copy.video.filters == ()
    assert encode.video.frame_rate == 25.0


def test_reencoded_output_still_tagged_pq_fails_verification() -> None:
    hdr = parse_probe(HDR10_MP4)
    listed = item(*(s.to_media_stream() for s in hdr.streams))
    plan = plan_transcode(listed, WORK, WORK / "s.mp4", probe=hdr, video_codec="libx264")
    as_written = parse_probe(HDR10_MP4.replace("hevc (Main 10) (hvc1", "h264 (High 10) (avc1"))

    with pytest.raises(PermanentError, match=r"video\.mp4 is tagged bt2020nc/bt2020/smpte2084"):
        check_output(plan.video, as_written, 2.0)


def _index() -> FragmentIndex:
    fragment = Fragment(offset=100, length=1000, duration_s=4.0)
    return FragmentIndex(ByteRange(0, 100), (fragment,), "hvc1.2.4.L93.B0")


@pytest.mark.parametrize("video_range", ["PQ", "HLG"])
def test_master_says_frame_rate_and_an_hdr_range(video_range: str) -> None:
    video = VideoRendition("video.m3u8", _index(), 1024, 576, 23.976, video_range)

    stream_inf = master_playlist(video, [])

    assert f",RESOLUTION=1024x576,FRAME-RATE=23.976,VIDEO-RANGE={video_range}" in stream_inf


def test_master_leaves_sdr_implicit() -> None:
    video = VideoRendition("video.m3u8", _index(), 1920, 1080, 25.0)

    assert "VIDEO-RANGE" not in master_playlist(video, [])
