"""`mirror serve` rewrites an item's playlists for a private bucket: pure text in and out."""

from __future__ import annotations

from mirror.web.player import rewrite_playlist

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


def test_media_uris_and_the_init_map_become_presigned_urls_of_their_objects() -> None:
    text = rewrite_playlist(MEDIA, "mirror/abc/audio", presign)
    url = "https://bucket.example/mirror/abc/audio/1-eng.m4a?X-Amz-Signature=abc"
    assert f'#EXT-X-MAP:URI="{url}",BYTERANGE="738@0"' in text
    assert url in text.splitlines()
    assert "#EXT-X-BYTERANGE:49800@814" in text


def test_playlist_uris_stay_relative_so_the_player_keeps_asking_mirror_serve() -> None:
    assert rewrite_playlist(MASTER, "mirror/abc", presign) == MASTER
