"""`mirror serve` rewrites an item's playlists for a private bucket: pure text in and out."""

from __future__ import annotations

from mirror.web.player import rewrite_playlist, rewrite_thumbnail_track, thumbnail_sheet_keys

MEDIA = """#EXTM3U
#EXT-X-VERSION:7
#EXT-X-MAP:URI="1-eng.m4a",BYTERANGE="738@0"
#EXTINF:4.010500,
#EXT-X-BYTERANGE:49800@814
1-eng.m4a
#EXT-X-ENDLIST
"""

MASTER = """#EXTM3U
#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="audio",NAME="English",URI="audio/1-eng.m3u8"
#EXT-X-STREAM-INF:BANDWIDTH=1000,CODECS="avc1.64001f,mp4a.40.2"
video.m3u8
"""


def presign(key: str) -> str:
    return f"https://bucket.example/{key}?X-Amz-Signature=abc"


LISTED = frozenset({"mirror/abc/audio/1-eng.m4a", "mirror/abc/video.mp4"})


def test_media_uris_and_the_init_map_become_presigned_urls_of_their_objects() -> None:
    text = rewrite_playlist(MEDIA, "mirror/abc/audio", presign, LISTED)
    url = "https://bucket.example/mirror/abc/audio/1-eng.m4a?X-Amz-Signature=abc"
    assert f'#EXT-X-MAP:URI="{url}",BYTERANGE="738@0"' in text
    assert url in text.splitlines()
    assert "#EXT-X-BYTERANGE:49800@814" in text


def test_playlist_uris_stay_relative_so_the_player_keeps_asking_mirror_serve() -> None:
    assert rewrite_playlist(MASTER, "mirror/abc", presign, LISTED) == MASTER


def test_a_line_separator_inside_a_title_does_not_start_a_line() -> None:
    """Issue 20: U+2028 in a NAME made the rest of the title a URI that got presigned."""
    for separator in ("\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"):
        master = MASTER.replace('NAME="English"', f'NAME="English{separator}../../payroll.csv"')
        text = rewrite_playlist(master, "mirror/abc", presign, LISTED)
        assert "X-Amz-Signature" not in text
        assert text == master


def test_only_keys_the_row_lists_are_presigned() -> None:
    hostile = MEDIA.replace("1-eng.m4a\n", "../../private/payroll.csv\n").replace(
        'URI="1-eng.m4a"', 'URI="../other/video.mp4"'
    )
    text = rewrite_playlist(hostile, "mirror/abc/audio", presign, LISTED)
    assert "X-Amz-Signature" not in text
    assert "payroll" not in text and "other" not in text
    assert "#EXT-X-BYTERANGE:49800@814" in text


def test_crlf_playlists_are_read_line_by_line() -> None:
    text = rewrite_playlist(MEDIA.replace("\n", "\r\n"), "mirror/abc/audio", presign, LISTED)
    assert text.count("X-Amz-Signature") == 2 and "\r" not in text


THUMBNAILS = """WEBVTT

00:00:00.000 --> 00:00:10.000
0.jpg#xywh=0,0,320,180

00:00:10.000 --> 00:00:20.000
../video.mp4#xywh=320,0,320,180

00:00:20.000 --> 00:00:25.000
1.jpg#xywh=320,0,320,180
"""


def test_thumbnail_sheets_become_presigned_urls_keeping_their_rectangles() -> None:
    text = rewrite_thumbnail_track(THUMBNAILS, "mirror/abc/thumbnails/thumbnails.vtt", presign)
    lines = text.splitlines()
    sheet = "https://bucket.example/mirror/abc/thumbnails/{}.jpg?X-Amz-Signature=abc"
    assert sheet.format(0) + "#xywh=0,0,320,180" in lines
    assert sheet.format(1) + "#xywh=320,0,320,180" in lines
    # Only a sheet beside the track is presigned: anything else is left out.
    assert not any("video.mp4" in line for line in lines)
    assert lines[:2] == ["WEBVTT", ""]


def test_the_image_playlist_presigns_only_the_sheets_beside_it() -> None:
    images = "#EXTM3U\n#EXT-X-IMAGES-ONLY\n#EXTINF:1000,\n0.jpg\n#EXTINF:10,\n../video.mp4\n"
    directory = "mirror/abc/thumbnails"
    allowed = thumbnail_sheet_keys(images, directory)
    assert allowed == {"mirror/abc/thumbnails/0.jpg"}
    text = rewrite_playlist(images, directory, presign, allowed)
    assert "https://bucket.example/mirror/abc/thumbnails/0.jpg?X-Amz-Signature=abc" in text
    assert "video.mp4" not in text
