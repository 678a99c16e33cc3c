"""The Jellyfin stand-in speaks the protocol of ../shared/jellyfin/, checked with raw HTTP."""

from __future__ import annotations

import http.client
import json
import os
import select
import time
import uuid
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from mirror.demo.stand_in.handler import DownloadSpan
from mirror.demo.stand_in.server import JellyfinStandIn, most_at_once
from mirror.domain.item import MediaStream

SIZE = 100_000


@pytest.fixture
def media(tmp_path: Path) -> Path:
    path = tmp_path / 'Big "Buck" Bunny (2008).mkv'
    path.write_bytes(os.urandom(SIZE))
    return path


@pytest.fixture
def conn(jellyfin: JellyfinStandIn) -> Iterator[http.client.HTTPConnection]:
    url = urlsplit(jellyfin.url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    yield connection
    connection.close()


def get(
    conn: http.client.HTTPConnection,
    standin: JellyfinStandIn,
    path: str,
    *,
    auth: str | None = "default",
    **headers: str,
) -> tuple[http.client.HTTPResponse, bytes]:
    if auth == "default":
        auth = f'MediaBrowser Client="test", Device="t", DeviceId="1", Token="{standin.api_key}"'
    if auth is not None:
        headers["Authorization"] = auth
    conn.request("GET", path, headers={k.replace("_", "-"): v for k, v in headers.items()})
    response = conn.getresponse()
    return response, response.read()


def get_json(conn: http.client.HTTPConnection, standin: JellyfinStandIn, path: str) -> Any:
    response, body = get(conn, standin, path)
    assert response.status == 200
    assert response.getheader("Content-Type") == "application/json; charset=utf-8"
    return json.loads(body)


def test_every_call_but_public_info_needs_the_key_and_401_has_an_empty_body(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    item_id = jellyfin.add_item(media, name="x", streams=[], duration_s=1)
    for path in ("/Items?ids=" + item_id, "/Library/VirtualFolders", f"/Items/{item_id}/Download"):
        for auth in (None, 'MediaBrowser Token="nope"', f"Bearer {jellyfin.api_key}"):
            response, body = get(conn, jellyfin, path, auth=auth)
            assert (response.status, body, response.getheader("Content-Length")) == (401, b"", "0")
    # key=value pairs in any order and spacing, unquoted too
    unquoted = f"MediaBrowser Token={jellyfin.api_key}, Client=x"
    response, _ = get(conn, jellyfin, "/Library/VirtualFolders", auth=unquoted)
    assert response.status == 200
    info = get_json(conn, jellyfin, "/System/Info/Public")
    response, _ = get(conn, jellyfin, "/System/Info/Public", auth=None)
    assert response.status == 200
    assert info["Version"] and info["Id"] == jellyfin.server_id


def test_download_headers_and_ranges_follow_aspnet_physical_file(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    item_id = jellyfin.add_item(media, name="x", streams=[], duration_s=1)
    content = media.read_bytes()
    last_modified = formatdate(int(media.stat().st_mtime), usegmt=True)
    path = f"/Items/{item_id}/Download"

    full, body = get(conn, jellyfin, path)
    assert (full.status, body) == (200, content)
    assert full.getheader("Content-Length") == str(SIZE)
    assert full.getheader("Content-Type") == "video/x-matroska"
    assert full.getheader("Accept-Ranges") == "bytes"
    assert full.getheader("Last-Modified") == last_modified
    assert full.getheader("ETag") is None
    assert full.getheader("Content-Disposition") == (
        'attachment; filename="Big Buck Bunny (2008).mkv"; '
        "filename*=UTF-8''Big%20Buck%20Bunny%20%282008%29.mkv"
    )

    tail, body = get(conn, jellyfin, path, Range="bytes=1000-")
    assert (tail.status, body) == (206, content[1000:])
    assert tail.getheader("Content-Range") == f"bytes 1000-{SIZE - 1}/{SIZE}"
    assert tail.getheader("Content-Length") == str(SIZE - 1000)

    middle, body = get(conn, jellyfin, path, Range="bytes=10-19")
    assert (middle.status, body, middle.getheader("Content-Range")) == (
        206,
        content[10:20],
        f"bytes 10-19/{SIZE}",
    )

    past_end, body = get(conn, jellyfin, path, Range=f"bytes={SIZE}-")
    assert (past_end.status, body) == (416, b"")
    assert past_end.getheader("Content-Range") == f"bytes */{SIZE}"

    same, body = get(conn, jellyfin, path, Range="bytes=5-", If_Range=last_modified)
    assert (same.status, body) == (206, content[5:])
    older = "Thu, 01 Jan 2015 00:00:00 GMT"
    stale, body = get(conn, jellyfin, path, Range="bytes=5-", If_Range=older)
    assert (stale.status, body) == (200, content)

    # All of it over one keep-alive connection, as HTTP/1.1 clients expect.
    assert conn.sock is not None


def test_ids_must_be_guids_and_unknown_ones_are_404(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    item_id = jellyfin.add_item(media, name="x", streams=[], duration_s=1)
    dashed = str(uuid.UUID(item_id)).upper()

    response, body = get(conn, jellyfin, "/Items/not-a-guid/Download")
    assert (response.status, body) == (400, b"Error processing request.")
    response, body = get(conn, jellyfin, f"/Items/{uuid.uuid4().hex}/Download")
    assert response.status == 404 and json.loads(body)["status"] == 404
    response, _ = get(conn, jellyfin, f"/Items/{dashed}/Download", Range="bytes=0-0")
    assert response.status == 206

    found = get_json(conn, jellyfin, f"/Items?ids={dashed}")
    assert [item["Id"] for item in found["Items"]] == [item_id]
    unknown = get_json(conn, jellyfin, f"/Items?ids={uuid.uuid4()}")
    assert unknown == {"Items": [], "TotalRecordCount": 0, "StartIndex": 0}
    response, _ = get(conn, jellyfin, "/Items?ids=nope")
    assert response.status == 400
    # With an API key and no userId, /Items/{id} fails like the real server.
    response, body = get(conn, jellyfin, f"/Items/{item_id}")
    assert (response.status, body) == (400, b"Error processing request.")


def test_item_json_is_pascal_case_without_nulls_and_fields_on_request(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    library = jellyfin.add_library("Films")
    item_id = jellyfin.add_item(
        media,
        name="x",
        streams=[
            MediaStream(0, "Video", "h264", width=640, height=360, frame_rate=25.0),
            MediaStream(1, "Audio", "aac", channels=2),
        ],
        duration_s=4.5,
        library_id=library,
    )
    bare = get_json(conn, jellyfin, f"/Items?ids={item_id}")["Items"][0]
    assert {"Path", "MediaSources", "MediaStreams"}.isdisjoint(bare)
    assert (bare["Id"], bare["Type"], bare["RunTimeTicks"]) == (item_id, "Movie", 45_000_000)

    full = get_json(conn, jellyfin, f"/Items?ids={item_id}&fields=Path,MediaSources,MediaStreams")
    item = full["Items"][0]
    source = item["MediaSources"][0]
    assert (source["Id"], source["Size"], source["Path"]) == (item_id, SIZE, str(media))
    audio = source["MediaStreams"][1]
    assert audio["Type"] == "Audio" and audio["Channels"] == 2
    assert "Language" not in audio and "Width" not in audio  # nulls omitted
    assert item["MediaStreams"] == source["MediaStreams"]

    libraries = get_json(conn, jellyfin, "/Library/VirtualFolders")
    assert [(lib["Name"], lib["ItemId"], lib["CollectionType"]) for lib in libraries] == [
        ("Films", library, "movies")
    ]


def test_cut_drops_the_connection_mid_body_and_fail_next_matches_its_prefix(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    item_id = jellyfin.add_item(media, name="x", streams=[], duration_s=1)
    path = f"/Items/{item_id}/Download"
    jellyfin.cut_after(30_000)
    jellyfin.fail_next(503, retry_after=2, path_prefix=path)

    response, body = get(conn, jellyfin, "/Library/VirtualFolders")
    assert response.status == 200  # other paths unaffected
    response, body = get(conn, jellyfin, path)
    assert (response.status, response.getheader("Retry-After")) == (503, "2")
    conn.request("GET", path, headers={"Authorization": f'MediaBrowser Token="{jellyfin.api_key}"'})
    cut = conn.getresponse()
    with pytest.raises(http.client.IncompleteRead) as caught:
        cut.read()
    assert len(caught.value.partial) == 30_000
    conn.close()
    response, body = get(conn, jellyfin, path)  # the cut was used up
    assert (response.status, len(body)) == (200, SIZE)
    assert jellyfin.downloads_bytes_served == 30_000 + SIZE


def test_stalled_download_sends_headers_then_resumes_when_released(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    item_id = jellyfin.add_item(media, name="x", streams=[], duration_s=1)
    jellyfin.stall_downloads(True)
    conn.request(
        "GET",
        f"/Items/{item_id}/Download",
        headers={"Authorization": f'MediaBrowser Token="{jellyfin.api_key}"'},
    )
    response = conn.getresponse()
    assert response.status == 200
    assert conn.sock is not None
    readable, _, _ = select.select([conn.sock], [], [], 0.3)
    assert readable == []  # headers only, then silence
    jellyfin.stall_downloads(False)
    assert len(response.read(SIZE)) == SIZE


def test_throttle_slows_the_body_down(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    item_id = jellyfin.add_item(media, name="x", streams=[], duration_s=1)
    jellyfin.throttle(400_000)
    began = time.monotonic()
    _, body = get(conn, jellyfin, f"/Items/{item_id}/Download")
    assert len(body) == SIZE
    assert 0.2 <= time.monotonic() - began < 2  # 100 kB at 400 kB/s


def spans_once_recorded(standin: JellyfinStandIn, count: int) -> list[DownloadSpan]:
    """The spans, once `count` are there: a span is written just after its last byte."""
    deadline = time.monotonic() + 10
    while len(spans := standin.download_spans()) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return spans


def test_download_spans_time_each_body_on_the_server_side(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    item_id = jellyfin.add_item(media, name="x", streams=[], duration_s=1)
    jellyfin.throttle(400_000)
    get(conn, jellyfin, f"/Items/{item_id}/Download")
    get(conn, jellyfin, f"/Items/{item_id}/Download", Range="bytes=50000-")
    first, second = spans_once_recorded(jellyfin, 2)
    assert (first.item_id, first.status, first.bytes_sent) == (item_id, 200, SIZE)
    assert (second.status, second.bytes_sent) == (206, SIZE - 50_000)
    assert 0.2 <= first.ended - first.started < 2  # 100 kB at 400 kB/s
    assert first.ended <= second.started
    assert most_at_once([first, second]) == 1


def test_most_at_once_counts_overlapping_spans(jellyfin: JellyfinStandIn, media: Path) -> None:
    item_id = jellyfin.add_item(media, name="x", streams=[], duration_s=1)
    jellyfin.throttle(200_000)  # each body takes about half a second
    url = urlsplit(jellyfin.url)
    connections = [
        http.client.HTTPConnection(url.hostname or "", url.port, timeout=10) for _ in range(3)
    ]
    auth = f'MediaBrowser Token="{jellyfin.api_key}"'
    for connection in connections:  # three requests in flight before any is read
        connection.request("GET", f"/Items/{item_id}/Download", headers={"Authorization": auth})
    for connection in connections:
        assert len(connection.getresponse().read()) == SIZE
        connection.close()
    assert most_at_once(spans_once_recorded(jellyfin, 3)) == 3


def test_stop_ends_even_a_stalled_download(media: Path) -> None:
    standin = JellyfinStandIn().start()
    item_id = standin.add_item(media, name="x", streams=[], duration_s=1)
    standin.stall_downloads(True)
    url = urlsplit(standin.url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    try:
        connection.request(
            "GET",
            f"/Items/{item_id}/Download",
            headers={"Authorization": f'MediaBrowser Token="{standin.api_key}"'},
        )
        response = connection.getresponse()
        began = time.monotonic()
        standin.stop()
        with pytest.raises(http.client.IncompleteRead):
            response.read()
        assert time.monotonic() - began < 2
    finally:
        connection.close()


def test_if_range_is_compared_as_a_date_and_an_etag_never_matches(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    item_id = jellyfin.add_item(media, name="x", streams=[], duration_s=1)
    content = media.read_bytes()
    path = f"/Items/{item_id}/Download"
    later = formatdate(int(media.stat().st_mtime) + 3600, usegmt=True)

    newer_date, body = get(conn, jellyfin, path, Range="bytes=5-", If_Range=later)
    assert (newer_date.status, body) == (206, content[5:])
    etag, body = get(conn, jellyfin, path, Range="bytes=5-", If_Range='"abc"')
    assert (etag.status, body) == (200, content)


def test_sidecars_are_listed_first_and_shift_the_index_of_the_files_streams(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    from mirror.demo.stand_in.catalog import Sidecar

    srt = media.with_suffix(".en.srt")
    item_id = jellyfin.add_item(
        media,
        name="x",
        streams=[MediaStream(0, "Video", "h264"), MediaStream(1, "Audio", "aac", "eng")],
        duration_s=1,
        sidecars=[Sidecar(srt, language="eng")],
    )
    data = get_json(conn, jellyfin, f"/Items?ids={item_id}&fields=MediaSources,MediaStreams")
    streams = data["Items"][0]["MediaSources"][0]["MediaStreams"]
    assert [(s["Index"], s["Type"], s["IsExternal"]) for s in streams] == [
        (0, "Subtitle", True),
        (1, "Video", False),
        (2, "Audio", False),
    ]
    assert streams[0]["Path"] == str(srt)
    assert "Path" not in streams[1]


def test_an_unprobed_item_has_no_streams_nor_runtime_until_probed(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    item_id = jellyfin.add_item(
        media, name="x", streams=[MediaStream(0, "Video", "h264")], duration_s=3, probed=False
    )
    query = f"/Items?ids={item_id}&fields=MediaSources,MediaStreams"
    before = get_json(conn, jellyfin, query)["Items"][0]
    assert before["MediaStreams"] == before["MediaSources"][0]["MediaStreams"] == []
    assert "RunTimeTicks" not in before
    jellyfin.mark_probed(item_id)
    after = get_json(conn, jellyfin, query)["Items"][0]
    assert [s["Type"] for s in after["MediaStreams"]] == ["Video"]
    assert after["RunTimeTicks"] == 30_000_000


def test_non_file_sources_look_like_jellyfins_and_folders_cannot_be_downloaded(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path, tmp_path: Path
) -> None:
    strm = tmp_path / "Movie.strm"
    strm.write_text("http://media.example/stream.mkv\n")
    strm_id = jellyfin.add_item(strm, name="strm", streams=[], duration_s=1, protocol="Http")
    iso_id = jellyfin.add_item(media, name="iso", streams=[], duration_s=1, video_type="Iso")
    dvd_id = jellyfin.add_item(tmp_path, name="dvd", streams=[], duration_s=1, video_type="Dvd")
    virtual_id = jellyfin.add_item(
        media, name="missing", streams=[], duration_s=1, location_type="Virtual"
    )
    fields = "fields=Path,MediaSources"
    strm_json = get_json(conn, jellyfin, f"/Items?ids={strm_id}&{fields}")["Items"][0]
    source = strm_json["MediaSources"][0]
    assert (source["Protocol"], source["IsRemote"], "Size" in source) == ("Http", True, False)
    assert strm_json["Path"] == str(strm)
    iso_json = get_json(conn, jellyfin, f"/Items?ids={iso_id}&{fields}")["Items"][0]
    assert iso_json["VideoType"] == iso_json["MediaSources"][0]["VideoType"] == "Iso"
    virtual_json = get_json(conn, jellyfin, f"/Items?ids={virtual_id}&{fields}")["Items"][0]
    assert virtual_json["LocationType"] == "Virtual"
    assert "MediaSources" not in virtual_json and "Path" not in virtual_json

    strm_download, body = get(conn, jellyfin, f"/Items/{strm_id}/Download")
    assert (strm_download.status, body) == (200, strm.read_bytes())
    iso_download, body = get(conn, jellyfin, f"/Items/{iso_id}/Download")
    assert (iso_download.status, len(body)) == (200, SIZE)
    for folder_like in (dvd_id, virtual_id):
        refused, body = get(conn, jellyfin, f"/Items/{folder_like}/Download")
        assert (refused.status, body) == (400, b"Error processing request.")


def test_other_versions_come_first_and_size_may_be_absent(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path, tmp_path: Path
) -> None:
    other = tmp_path / "Movie - 720p.mkv"
    other.write_bytes(b"x" * 10)
    item_id = jellyfin.add_item(
        media, name="x", streams=[], duration_s=1, other_versions=[other], omit_size=True
    )
    sources = get_json(conn, jellyfin, f"/Items?ids={item_id}&fields=MediaSources")["Items"][0][
        "MediaSources"
    ]
    assert [s["Id"] == item_id for s in sources] == [False, True]
    assert sources[0]["Path"] == str(other)
    assert "Size" not in sources[1]


def test_unknown_item_types_are_dropped_and_then_every_kind_comes_back(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path
) -> None:
    library = jellyfin.add_library("Shows", "tvshows")
    jellyfin.add_item(media, name="ep", streams=[], duration_s=1, item_type="Episode",
                      library_id=library)  # fmt: skip
    jellyfin.add_folder("A Series", item_type="Series", library_id=library)
    jellyfin.add_item(media, name="gone", streams=[], duration_s=1, item_type="Episode",
                      library_id=library, location_type="Virtual")  # fmt: skip
    base = f"/Items?parentId={library}&recursive=true"

    def kinds(query: str) -> list[str]:
        return sorted(i["Type"] for i in get_json(conn, jellyfin, base + query)["Items"])

    assert kinds("&includeItemTypes=Episode") == ["Episode", "Episode"]
    assert kinds("&includeItemTypes=Episdoe") == ["Episode", "Episode", "Series"]
    assert kinds("&includeItemTypes=episode&excludeLocationTypes=Virtual") == ["Episode"]
    assert kinds("&includeItemTypes=Episode&isMissing=false") == ["Episode"]
    series = get_json(conn, jellyfin, base + "&includeItemTypes=Series")["Items"][0]
    assert series["IsFolder"] is True and "MediaSources" not in series


def test_symlink_bug_of_10_11_1_to_4_sends_the_links_size_and_500_on_ranges(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link.mkv"
    link.symlink_to(media)
    jellyfin.version = "10.11.3"
    item_id = jellyfin.add_item(link, name="x", streams=[], duration_s=1, symlink_bug=True)
    link_size = link.lstat().st_size
    info = get_json(conn, jellyfin, "/System/Info/Public")
    assert info["Version"] == "10.11.3"
    source = get_json(conn, jellyfin, f"/Items?ids={item_id}&fields=MediaSources")["Items"][0][
        "MediaSources"
    ][0]
    assert source["Size"] == link_size
    full, body = get(conn, jellyfin, f"/Items/{item_id}/Download")
    assert (full.status, len(body)) == (200, link_size)
    ranged, _ = get(conn, jellyfin, f"/Items/{item_id}/Download", Range="bytes=5-")
    assert ranged.status == 500


def test_the_startup_503_is_html_without_a_message_header(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection
) -> None:
    jellyfin.fail_next(503)
    response, body = get(conn, jellyfin, "/Items")
    assert response.status == 503
    assert response.getheader("Content-Type", "").startswith("text/html")
    assert response.getheader("Message") is None and response.getheader("Retry-After") is None
    assert b"Jellyfin" in body


def test_trickplay_is_listed_on_request_and_its_sheets_and_playlist_are_served(
    jellyfin: JellyfinStandIn, conn: http.client.HTTPConnection, media: Path, tmp_path: Path
) -> None:
    from mirror.demo.stand_in.trickplay import Trickplay

    tiles = tmp_path / "trickplay" / "320"
    tiles.mkdir(parents=True)
    for index in (0, 1):
        (tiles / f"{index}.jpg").write_bytes(b"\xff\xd8sheet %d" % index)
    trickplay = Trickplay(tiles, width=320, height=180, thumbnail_count=150)
    tiled = jellyfin.add_item(media, name="Tiled", streams=[], duration_s=1500, trickplay=trickplay)
    plain = jellyfin.add_item(media, name="Plain", streams=[], duration_s=10)

    items = get_json(conn, jellyfin, f"/Items?ids={tiled},{plain}&fields=Trickplay")["Items"]
    assert items[0]["Trickplay"] == {
        tiled: {
            "320": {"Width": 320, "Height": 180, "TileWidth": 10, "TileHeight": 10,
                    "ThumbnailCount": 150, "Interval": 10000, "Bandwidth": 0}
        }
    }  # fmt: skip
    assert items[1]["Trickplay"] == {}  # a video without tiles: an empty map, not absent
    assert "Trickplay" not in get_json(conn, jellyfin, f"/Items?ids={tiled}")["Items"][0]

    response, body = get(
        conn, jellyfin, f"/Videos/{tiled}/Trickplay/320/1.jpg?mediaSourceId={tiled}"
    )
    assert (response.status, response.getheader("Content-Type"), body) == (
        200, "image/jpeg", b"\xff\xd8sheet 1",
    )  # fmt: skip
    response, body = get(conn, jellyfin, f"/Videos/{tiled}/Trickplay/320/tiles.m3u8")
    playlist = body.decode()
    assert response.status == 200 and "#EXT-X-IMAGES-ONLY" in playlist
    assert playlist.count("#EXT-X-TILES:RESOLUTION=320x180,LAYOUT=10x10,DURATION=10") == 2
    assert "#EXTINF:500," in playlist  # the last sheet holds the 50 left
    for missing in (
        f"/Videos/{tiled}/Trickplay/320/2.jpg",  # past the last sheet
        f"/Videos/{tiled}/Trickplay/640/0.jpg",  # a width it has none of
        f"/Videos/{plain}/Trickplay/320/0.jpg",
        f"/Videos/{plain}/Trickplay/320/tiles.m3u8",
    ):
        assert get(conn, jellyfin, missing)[0].status == 404, missing
    assert get(conn, jellyfin, f"/Videos/{tiled}/Trickplay/320/0.jpg", auth=None)[0].status == 401
