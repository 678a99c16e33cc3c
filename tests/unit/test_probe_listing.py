from __future__ import annotations

from mirror.transcode.probe import parse_probe

# `ffmpeg -hide_banner -i` of an MP4 with cover art (imageio-ffmpeg 9.0), trimmed.
COVER_ART_MP4 = """\
Input #0, mov,mp4,m4a,3gp,3g2,mj2, from 'cover.mp4':
  Metadata:
    major_brand     : isom
  Duration: 00:00:02.00, start: 0.000000, bitrate: 220 kb/s
  Stream #0:0[0x2](und): Video: h264 (Constrained Baseline) (avc1 / 0x31637661), \
yuv420p(progressive), 320x240 [SAR 1:1 DAR 4:3], 137 kb/s, 25 fps, 25 tbr, 12800 tbn (default)
    Metadata:
      handler_name    : VideoHandler
  Stream #0:1[0x3](eng): Audio: aac (LC) (mp4a / 0x6134706D), 44100 Hz, mono, fltp, 69 kb/s \
(default)
  Stream #0:2[0x0]: Video: png, rgb24(pc, gbr/unknown/unknown), 64x64 [SAR 1:1 DAR 1:1], \
90k tbr, 90k tbn (attached pic)
At least one output file must be specified
"""

MKV_10BIT_AC3 = """\
Input #0, matroska,webm, from 'x.mkv':
  Duration: 01:02:03.50, start: 0.000000, bitrate: 1 kb/s
  Stream #0:0: Video: h264 (High 10), yuv420p10le(tv, progressive), 1920x1080, 23.98 fps, \
23.98 tbr, 1k tbn
  Stream #0:1(fre): Audio: ac3, 48000 Hz, 5.1(side), fltp, 448 kb/s
    Metadata:
      title           : Français 5.1
  Stream #0:2(eng): Subtitle: hdmv_pgs_subtitle (pgssub), 1920x1080
  Stream #0:3: Attachment: ttf
    Metadata:
      filename        : font.ttf
"""


def test_cover_art_is_an_attached_picture_listed_as_embedded_image() -> None:
    probed = parse_probe(COVER_ART_MP4)

    assert probed.duration_s == 2.0
    video, audio, cover = probed.streams
    assert (video.type, video.codec, video.attached_pic) == ("Video", "h264", False)
    assert (video.pixel_format, video.profile, video.bit_depth) == (
        "yuv420p",
        "Constrained Baseline",
        8,
    )
    assert (video.width, video.height, video.frame_rate, video.is_default) == (320, 240, 25.0, True)
    assert (audio.type, audio.codec, audio.language, audio.channels) == ("Audio", "aac", "eng", 1)
    assert audio.profile is None  # `(LC)` of audio is not a video profile
    assert (cover.index, cover.type, cover.codec, cover.attached_pic) == (2, "Video", "png", True)
    assert cover.jellyfin_type == "EmbeddedImage"
    assert cover.to_media_stream().type == "EmbeddedImage"


def test_ten_bit_video_surround_audio_image_subtitles_and_attachments() -> None:
    probed = parse_probe(MKV_10BIT_AC3)

    assert probed.duration_s == 3723.5
    video, audio, subtitle, font = probed.streams
    assert (video.profile, video.pixel_format, video.bit_depth) == ("High 10", "yuv420p10le", 10)
    assert video.frame_rate == 23.98
    assert (audio.codec, audio.channels, audio.language, audio.title) == (
        "ac3",
        6,
        "fre",
        "Français 5.1",
    )
    assert (subtitle.type, subtitle.codec) == ("Subtitle", "hdmv_pgs_subtitle")
    assert (font.type, font.codec) == ("Attachment", "ttf")
    assert [s.type for s in probed.of_type("Video")] == ["Video"]


def test_a_second_input_or_an_output_is_not_read_as_the_file() -> None:
    text = MKV_10BIT_AC3 + "Output #0, mp4, to 'out.mp4':\n  Stream #0:0: Video: h264\n"

    assert len(parse_probe(text).streams) == 4


def test_unreadable_output_has_no_streams_and_no_duration() -> None:
    probed = parse_probe("x.mkv: Invalid data found when processing input\n")

    assert probed.streams == ()
    assert probed.duration_s is None


def test_a_listing_of_several_inputs_gives_one_file_each() -> None:
    from mirror.transcode.probe import _input_sections

    second = MKV_10BIT_AC3.replace("Input #0", "Input #1").replace("Stream #0:", "Stream #1:")
    first, other = _input_sections(COVER_ART_MP4.replace("At least one output", "") + second)

    assert [s.codec for s in first.streams] == ["h264", "aac", "png"]
    assert first.duration_s == 2.0
    assert [s.index for s in other.streams] == [0, 1, 2, 3]
    assert other.duration_s == 3723.5
