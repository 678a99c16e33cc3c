"""Picture facts read from `ffmpeg -i`: field order, colour tags, SAR, rotation, Dolby Vision.

The listings are what the bundled ffmpeg 9.0.2 prints for the shapes of
mirror.testing.picture_samples (trimmed), plus a Dolby Vision profile 5 MKV's side data
and the older `displaymatrix:` spelling (ffmpeg before 7).
"""

from __future__ import annotations

import pytest

from mirror.transcode.picture_listing import Picture, parse_picture
from mirror.transcode.probe import parse_probe

HDR10_MP4 = """\
Input #0, mov,mp4,m4a,3gp,3g2,mj2, from 'hdr10.mp4':
  Duration: 00:00:02.00, start: 0.000000, bitrate: 539 kb/s
  Stream #0:0[0x1](und): Video: hevc (Main 10) (hvc1 / 0x31637668), \
yuv420p10le(tv, bt2020nc/bt2020/smpte2084, progressive), 640x360 [SAR 1:1 DAR 16:9], 523 kb/s, \
25 fps, 25 tbr, 12800 tbn (default)
    Metadata:
      handler_name    : VideoHandler
"""

DVD_MPG = """\
Input #0, mpeg, from 'dvd.mpg':
  Duration: 00:00:02.00, start: 0.540000, bitrate: 6463 kb/s
  Stream #0:0[0x1e0]: Video: mpeg2video (Main), yuv420p(tv, top first), 720x576 \
[SAR 16:15 DAR 4:3], 25 fps, 25 tbr, 90k tbn, start 0.540000
    Side data:
      CPB properties: bitrate max/min/avg: 0/0/0 buffer size: 1703936 vbv_delay: N/A
  Stream #0:1[0x1c0]: Audio: mp2, 48000 Hz, stereo, fltp, 192 kb/s, start 0.540000
"""

ROTATED_MP4 = """\
Input #0, mov,mp4,m4a,3gp,3g2,mj2, from 'phone.mp4':
  Duration: 00:00:02.00, start: 0.000000, bitrate: 3033 kb/s
  Stream #0:0[0x1](und): Video: h264 (High) (avc1 / 0x31637661), yuv420p(progressive), \
1280x720 [SAR 1:1 DAR 16:9], 3027 kb/s, 30 fps, 30 tbr, 15360 tbn (default)
    Metadata:
      handler_name    : VideoHandler
    Side data:
      Display Matrix: rotation of -90.00 degrees
  Stream #0:1[0x2](eng): Audio: aac (LC) (mp4a / 0x6134706D), 48000 Hz, stereo, fltp, 64 kb/s
"""

DOLBY_VISION_5_MKV = """\
Input #0, matroska,webm, from 'dv5.mkv':
  Duration: 01:56:22.68, start: 0.000000, bitrate: 16000 kb/s
  Stream #0:0: Video: hevc (Main 10), yuv420p10le(tv), 3840x2160 [SAR 1:1 DAR 16:9], \
23.98 fps, 23.98 tbr, 1k tbn (default)
    Metadata:
      BPS             : 14434899
    Side data:
      DOVI configuration record: version: 1.0, profile: 5, level: 6, rpu flag: 1, el flag: 0, \
bl flag: 1, compatibility id: 0
  Stream #0:1(eng): Audio: dts (DTS), 48000 Hz, 5.1(side), s32p (24 bit), 1536 kb/s (default)
"""

OLD_FFMPEG_IPHONE = """\
Input #0, mov,mp4,m4a,3gp,3g2,mj2, from 'IMG_0001.MOV':
  Duration: 00:00:12.34, start: 0.000000, bitrate: 9874 kb/s
  Stream #0:0[0x1](und): Video: hevc (Main 10) (hvc1 / 0x31637668), \
yuv420p10le(tv, bt2020nc/bt2020/arib-std-b67), 1920x1080, 9800 kb/s, 29.98 fps, 30 tbr, 600 tbn
    Side data:
      DOVI configuration record: version: 1.0, profile: 8, level: 4, rpu flag: 1, el flag: 0, \
bl flag: 1, compatibility id: 4
      displaymatrix: rotation of -90.00 degrees
"""


def test_hdr10_colour_tags_are_matrix_primaries_and_transfer() -> None:
    (video,) = parse_probe(HDR10_MP4).streams

    assert video.picture == Picture(
        field_order="progressive",
        primaries="bt2020",
        transfer="smpte2084",
        matrix="bt2020nc",
        sar=(1, 1),
    )
    assert video.pixel_format == "yuv420p10le"  # still read from the same parenthesis


def test_dvd_is_interlaced_top_field_first_with_its_pixel_shape() -> None:
    video, audio = parse_probe(DVD_MPG).streams

    assert video.picture.field_order == "tff"
    assert video.picture.interlaced is True
    assert video.picture.sar == (16, 15)
    assert video.picture.transfer is None  # untagged
    assert audio.picture == Picture()
    media = video.to_media_stream()
    assert (media.is_interlaced, media.color_transfer) == (True, None)


def test_rotation_comes_from_the_display_matrix_side_data() -> None:
    video, audio = parse_probe(ROTATED_MP4).streams

    assert (video.width, video.height, video.picture.rotation) == (1280, 720, -90)
    assert audio.picture.rotation is None  # side data belongs to the stream above it


def test_dolby_vision_profile_comes_from_its_configuration_record() -> None:
    (video, _) = parse_probe(DOLBY_VISION_5_MKV).streams

    assert video.picture.dovi_profile == 5
    assert video.picture.transfer is None  # profile 5 carries no HDR10 tags
    assert video.to_media_stream().dv_profile == 5


def test_older_ffmpeg_spellings_are_read_too() -> None:
    (video,) = parse_probe(OLD_FFMPEG_IPHONE).streams

    assert video.picture.transfer == "arib-std-b67"
    assert video.picture.field_order is None  # not printed: unknown
    assert video.picture.interlaced is None
    assert (video.picture.dovi_profile, video.picture.rotation) == (8, -90)


@pytest.mark.parametrize(
    ("rest", "expected"),
    [
        (", yuv420p(tv, bt709, progressive), 1920x1080", Picture("progressive", *["bt709"] * 3)),
        (", yuv420p(tv, bottom first), 720x480 [SAR 8:9 DAR 4:3]", Picture("bff", sar=(8, 9))),
        (", yuv420p(top coded first (swapped)), 720x576", Picture("bff")),
        (", yuv420p(bottom coded first (swapped)), 720x576", Picture("tff")),
        (", yuv420p(tv, unknown/bt709/unknown), 1280x720", Picture(primaries="bt709")),
        (", yuv420p, 720x405 [SAR 0:1 DAR 0:1]", Picture()),  # MPEG-4 part 2: nothing said
    ],
)
def test_stream_line_attributes(rest: str, expected: Picture) -> None:
    assert parse_picture(rest) == expected
