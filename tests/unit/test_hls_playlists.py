"""The HLS playlists and the fragment index they are built from: pure, no files."""

from __future__ import annotations

import itertools
import struct

import pytest

from mirror.domain.errors import PermanentError
from mirror.hls.fragments import (
    ByteRange,
    Fragment,
    FragmentIndex,
    aligned,
    codec_string,
    index_from_boxes,
    moof_duration,
    track_timing,
)
from mirror.hls.package import playlist_path
from mirror.hls.playlists import (
    AudioRendition,
    SubtitleRendition,
    VideoRendition,
    master_playlist,
    media_playlist,
    subtitle_playlist,
)


def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def _full(kind: bytes, version: int, flags: int, payload: bytes) -> bytes:
    return _box(kind, bytes([version]) + flags.to_bytes(3, "big") + payload)


def _moov(timescale: int, trex_duration: int = 0) -> bytes:
    mdhd = _full(b"mdhd", 0, 0, struct.pack(">IIII", 0, 0, timescale, 0) + b"\0" * 4)
    trak = _box(b"trak", _box(b"tkhd", b"\0" * 84) + _box(b"mdia", mdhd))
    trex = _full(b"trex", 0, 0, struct.pack(">IIIII", 1, 1, trex_duration, 0, 0))
    return _box(b"moov", _box(b"mvhd", b"\0" * 100) + trak + _box(b"mvex", trex))


def _moof(durations: list[int] | None, count: int = 0, tfhd_duration: int | None = None) -> bytes:
    tfhd_flags = 0x020000 | (0x08 if tfhd_duration is not None else 0)
    tfhd = _full(b"tfhd", 0, tfhd_flags, struct.pack(">I", 1))
    if tfhd_duration is not None:
        tfhd = _full(b"tfhd", 0, tfhd_flags, struct.pack(">II", 1, tfhd_duration))
    if durations is None:  # no per-sample durations: data offset only
        trun = _full(b"trun", 0, 0x001, struct.pack(">Ii", count, 0))
    else:  # data offset, then duration + size per sample
        samples = b"".join(struct.pack(">II", d, 100) for d in durations)
        trun = _full(b"trun", 0, 0x301, struct.pack(">Ii", len(durations), 0) + samples)
    tfdt = _full(b"tfdt", 1, 0, struct.pack(">Q", 0))
    return _box(
        b"moof", _full(b"mfhd", 0, 0, struct.pack(">I", 1)) + _box(b"traf", tfhd + tfdt + trun)
    )


def _walk(*boxes: bytes) -> list[tuple[bytes, int, int, bytes]]:
    walked, offset = [], 0
    for box in boxes:
        kind = box[4:8]
        walked.append((kind, offset, len(box), box if kind != b"mdat" else b""))
        offset += len(box)
    return walked


def test_each_moof_and_its_mdat_become_one_fragment_timed_by_its_samples() -> None:
    ftyp, moov = _box(b"ftyp", b"isom" * 4), _moov(1000)
    first, second = _moof([400, 600]), _moof([250])
    mdat1, mdat2 = _box(b"mdat", b"\0" * 200), _box(b"mdat", b"\0" * 100)
    index = index_from_boxes(_walk(ftyp, moov, first, mdat1, second, mdat2), "video.mp4")
    assert index.init == ByteRange(0, len(ftyp) + len(moov))
    start = len(ftyp) + len(moov)
    assert index.fragments == (
        Fragment(start, len(first) + len(mdat1), 1.0),
        Fragment(start + len(first) + len(mdat1), len(second) + len(mdat2), 0.25),
    )


def test_sample_durations_fall_back_to_the_tfhd_then_the_trex_default() -> None:
    assert moof_duration(_moof(None, count=3, tfhd_duration=1024), 0) == 3 * 1024
    assert moof_duration(_moof(None, count=4), default_duration=512) == 4 * 512
    assert track_timing(_moov(48000, trex_duration=1024)) == (48000, 1024)


def test_a_file_without_fragments_is_refused_by_name() -> None:
    walked = _walk(_box(b"ftyp", b""), _moov(1000), _box(b"mdat", b"\0"))
    with pytest.raises(PermanentError, match=r"video\.mp4 has no fragments"):
        index_from_boxes(walked, "video.mp4")


def test_codec_strings_come_from_avcc_and_esds() -> None:
    avcc = _box(b"avcC", bytes([1, 0x64, 0x00, 0x1F, 0xFF]))
    assert codec_string(_box(b"moov", avcc)) == "avc1.64001f"
    # ES_Descriptor > DecoderConfigDescriptor (0x40: MPEG-4 audio) > AudioSpecificConfig
    # 0x12 0x10: audio object type 2 (AAC LC), 44.1 kHz, stereo.
    dsi = bytes([0x05, 0x02, 0x12, 0x10])
    dcd = bytes([0x04, 13 + len(dsi), 0x40, 0x15]) + b"\0" * 11 + dsi
    esd = bytes([0x03, 3 + len(dcd), 0, 1, 0]) + dcd
    esds = _box(b"esds", b"\0\0\0\0" + esd)
    assert codec_string(_box(b"moov", esds)) == "mp4a.40.2"


def _index(*durations: float, size: int = 1000, codec: str = "avc1.64001f") -> FragmentIndex:
    fragments = []
    offset = 900
    for duration in durations:
        fragments.append(Fragment(offset, size, duration))
        offset += size
    return FragmentIndex(ByteRange(0, 800), tuple(fragments), codec)


def test_media_playlist_points_every_segment_into_the_one_object() -> None:
    text = media_playlist("video.mp4", _index(4.0, 4.0, 2.0))
    lines = text.splitlines()
    assert lines[0] == "#EXTM3U"
    assert '#EXT-X-MAP:URI="video.mp4",BYTERANGE="800@0"' in lines
    assert lines.count("video.mp4") == 3
    assert "#EXT-X-BYTERANGE:1000@900" in lines
    assert "#EXT-X-BYTERANGE:1000@2900" in lines
    assert "#EXT-X-TARGETDURATION:4" in lines
    assert lines[-1] == "#EXT-X-ENDLIST"


def test_target_duration_is_the_longest_segment_rounded_to_nearest() -> None:
    # 4.01 s audio fragments round to 4; a 4.6 s one needs 5.
    assert "#EXT-X-TARGETDURATION:4" in media_playlist("a.m4a", _index(4.01, 4.01))
    assert "#EXT-X-TARGETDURATION:5" in media_playlist("a.m4a", _index(4.6, 1.0))


def test_subtitle_playlist_is_one_segment_as_long_as_the_video() -> None:
    text = subtitle_playlist("3-eng.vtt", 10.0)
    assert "#EXTINF:10.000000," in text
    assert "3-eng.vtt" in text.splitlines()


def test_master_lists_video_with_codecs_bandwidth_resolution_and_groups() -> None:
    video = VideoRendition("video.m3u8", _index(4.0, size=100_000), 1920, 1080)
    audio = [
        AudioRendition("audio/1-eng.m3u8", _index(4.0, codec="mp4a.40.2"), "English", "eng", False),
        AudioRendition("audio/2-fra.m3u8", _index(4.0, codec="mp4a.40.2"), 'Fr "VF"', "fra", True),
    ]
    subs = [SubtitleRendition("subtitles/3-eng.m3u8", "English", "eng")]
    text = master_playlist(video, audio, subs)
    assert (
        '#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="audio",NAME="English",LANGUAGE="eng",'
        'DEFAULT=NO,AUTOSELECT=YES,URI="audio/1-eng.m3u8"'
    ) in text
    assert 'NAME="Fr \'VF\'",LANGUAGE="fra",DEFAULT=YES' in text
    assert 'TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="eng"' in text
    stream = next(line for line in text.splitlines() if line.startswith("#EXT-X-STREAM-INF"))
    assert "BANDWIDTH=202000," in stream  # 100 kB in 4 s = 200 kbit/s, + 2 kbit/s audio
    assert 'CODECS="avc1.64001f,mp4a.40.2"' in stream
    assert "RESOLUTION=1920x1080" in stream
    assert 'AUDIO="audio"' in stream and 'SUBTITLES="subs"' in stream
    assert text.splitlines()[-1] == "video.m3u8"


def test_without_a_jellyfin_default_the_first_audio_track_is_default() -> None:
    video = VideoRendition("video.m3u8", _index(4.0), None, None)
    audio = [
        AudioRendition("audio/1-eng.m3u8", _index(4.0, codec="mp4a.40.2"), "Same", "eng", False),
        AudioRendition("audio/2-eng.m3u8", _index(4.0, codec="mp4a.40.2"), "Same", "eng", False),
    ]
    text = master_playlist(video, audio)
    assert 'NAME="Same (1)",LANGUAGE="eng",DEFAULT=YES' in text
    assert 'NAME="Same (2)",LANGUAGE="eng",DEFAULT=NO' in text
    assert "RESOLUTION" not in text and "SUBTITLES" not in text


@pytest.mark.parametrize(
    "separator", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\r\n", "\x00"]
)
def test_a_title_from_the_files_tags_stays_one_attribute_on_one_line(separator: str) -> None:
    """Issue 20: a title with a line separator made `private/payroll.csv` a line of its own."""
    video = VideoRendition("video.m3u8", _index(4.0), None, None)
    title = f'Commentary{separator}private/payroll.csv", URI="x'
    audio = [AudioRendition("audio/1-eng.m3u8", _index(4.0), title, f"en{separator}g", True)]
    subs = [SubtitleRendition("subtitles/2-eng.vtt.m3u8", title, "eng")]
    text = master_playlist(video, audio, subs)
    for split in (text.splitlines(), text.split("\n")[:-1]):
        assert len(split) == 7  # header x3, two EXT-X-MEDIA, EXT-X-STREAM-INF + its URI
        assert [line for line in split if not line.startswith("#")] == ["video.m3u8"]
    media = [line for line in text.split("\n") if line.startswith("#EXT-X-MEDIA:")]
    for line in media:
        assert line.isprintable()
        assert "NAME=\"Commentary private/payroll.csv' URI='x\"" in line
        assert line.count('"') == line.count('="') * 2  # every quote opens or closes a value
    assert 'LANGUAGE="en g"' in media[0]


def test_each_playlist_sits_beside_its_object() -> None:
    assert playlist_path("video.mp4") == "video.m3u8"
    assert playlist_path("audio/1-eng.m4a") == "audio/1-eng.m3u8"
    assert playlist_path("subtitles/3-eng.vtt") == "subtitles/3-eng.m3u8"


def test_audio_fragments_are_grouped_into_segments_ending_with_the_videos() -> None:
    # 0.512 s AAC fragments (24 frames at 48 kHz) against 4 s video segments: grouped
    # they end within a quarter second of every video boundary, however long the file.
    audio = _index(*([0.512] * 80), size=100)  # 40.96 s
    video_ends = [4.0 * n for n in range(1, 10)]
    segments = aligned(audio, video_ends).fragments
    ends = list(itertools.accumulate(f.duration_s for f in segments))
    assert len(segments) == 10
    for end, boundary in zip(ends, video_ends, strict=False):
        assert abs(end - boundary) <= 0.256 + 1e-9
    # One byte range per segment, back to back, covering every fragment.
    assert segments[0].offset == audio.fragments[0].offset
    for before, after in itertools.pairwise(segments):
        assert before.offset + before.length == after.offset
    assert sum(s.length for s in segments) == 80 * 100
    assert sum(s.duration_s for s in segments) == pytest.approx(40.96)


def test_a_ladder_is_one_variant_per_rendition_sharing_the_audio_group() -> None:
    source = VideoRendition("video/source.m3u8", _index(4.0, size=400_000), 1920, 1080,
                            frame_rate=25.0, video_range="PQ")  # fmt: skip
    rung = VideoRendition("video/720p.m3u8", _index(4.0, size=100_000), 1280, 720, 25.0)
    audio = [AudioRendition("audio/1-eng.m3u8", _index(4.0, codec="mp4a.40.2"), "E", "eng", True)]
    text = master_playlist(source, audio, ladder=[rung])
    lines = text.splitlines()
    variants = [
        (lines[i], lines[i + 1]) for i, line in enumerate(lines) if line.startswith("#EXT-X-STREAM")
    ]
    assert [uri for _, uri in variants] == ["video/source.m3u8", "video/720p.m3u8"]
    (top, _), (low, _) = variants
    assert "BANDWIDTH=802000," in top and "AVERAGE-BANDWIDTH=802000," in top
    assert "BANDWIDTH=202000," in low and "RESOLUTION=1280x720" in low
    assert "FRAME-RATE=25.000" in low and 'AUDIO="audio"' in low
    # A copied HDR source says so; its re-encoded rungs are SDR, which needs no attribute.
    assert "VIDEO-RANGE=PQ" in top and "VIDEO-RANGE" not in low
    assert text.count("#EXT-X-MEDIA:TYPE=AUDIO") == 1
