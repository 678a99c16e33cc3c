"""Issue 25 (3, 6, 7) against the stand-in playing the Jellyfin version that shows each:
a known item whose file is missing on disk, a local-path .strm listed as a plain file
(10.11.7+), a sidecar subtitle Jellyfin answers with 500 every time, and the message of
a file replaced after the scan."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirror.demo.stand_in.catalog import Sidecar
from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.item import MediaStream
from mirror.domain.progress import AbortSignal, Progress
from mirror.domain.sources import non_file_kind, require_media_file
from mirror.hls.subtitles import fetch_sidecar_subtitles
from mirror.jellyfin.client import JellyfinClient
from mirror.transcode import plan_transcode

FAST: dict[str, Any] = {"retry_initial_wait": 0.001, "retry_max_wait": 0.01, "read_timeout": 10}
SRT = "1\n00:00:00,000 --> 00:00:01,000\nBonjour\n"


def _download(client: JellyfinClient, item_id: str, dest: Path) -> int:
    def ignore(progress: Progress) -> None:
        del progress

    return client.download(
        item_id, dest, expected_size=None, on_progress=ignore, abort=AbortSignal()
    ).size


def _movie(jellyfin: JellyfinStandIn, folder: Path, **options: Any) -> tuple[str, Path]:
    path = folder / "Movie.mkv"
    path.write_bytes(os.urandom(64 * 1024))
    options.setdefault("streams", [MediaStream(index=0, type="Video", codec="h264")])
    return jellyfin.add_item(path, name="Movie", duration_s=4.0, **options), path


# point 3: a 404 from /Download -----------------------------------------------------------


def test_the_stand_in_answers_404_for_the_missing_file_of_a_known_item(
    jellyfin: JellyfinStandIn, tmp_path: Path
) -> None:
    item_id, path = _movie(jellyfin, tmp_path)
    path.unlink()  # the share went offline; Jellyfin still has the item
    headers = {"Authorization": f'MediaBrowser Token="{jellyfin.api_key}"'}
    answer = httpx.get(f"{jellyfin.url}/Items/{item_id}/Download", headers=headers)
    assert (answer.status_code, answer.text) == (404, "Error processing request.")


def test_a_known_item_whose_file_is_missing_is_transient_and_names_the_share(
    jellyfin: JellyfinStandIn, tmp_path: Path
) -> None:
    item_id, path = _movie(jellyfin, tmp_path)
    shutil.move(path, tmp_path / "elsewhere.mkv")  # the NAS is asleep
    with JellyfinClient(jellyfin.url, jellyfin.api_key, **FAST) as client:
        with pytest.raises(TransientError) as caught:
            _download(client, item_id, tmp_path / "out" / "source.mkv")
        assert str(caught.value) == (
            f"source file missing on the server: Jellyfin still lists item {item_id} but "
            "answers 404 for its file; check that the share or NAS holding it is mounted "
            "and awake (the job is retried)"
        )
        shutil.move(tmp_path / "elsewhere.mkv", path)  # the share is back
        assert _download(client, item_id, tmp_path / "out" / "source.mkv") == 64 * 1024


def test_an_item_jellyfin_no_longer_has_stays_a_permanent_not_found(
    jellyfin: JellyfinStandIn, tmp_path: Path
) -> None:
    item_id, path = _movie(jellyfin, tmp_path)
    path.unlink()
    jellyfin.remove_item(item_id)
    with (
        JellyfinClient(jellyfin.url, jellyfin.api_key, **FAST) as client,
        pytest.raises(PermanentError, match=f"^item {item_id} not found in Jellyfin$"),
    ):
        _download(client, item_id, tmp_path / "out" / "source.mkv")


# point 6: .strm on 10.11.7+ --------------------------------------------------------------


@pytest.mark.parametrize(("version", "remote"), [("10.11.6", True), ("10.11.7", False)])
def test_a_local_path_strm_is_refused_whatever_its_protocol_says(
    jellyfin: JellyfinStandIn, tmp_path: Path, version: str, remote: bool
) -> None:
    jellyfin.version = version
    target = tmp_path / "real.mkv"
    item_id = jellyfin.add_strm(tmp_path / "Movie.strm", str(target), name="Movie")
    with JellyfinClient(jellyfin.url, jellyfin.api_key, **FAST) as client:
        item = client.get_item(item_id)
        listed = [
            summary
            for page in client.iter_library_pages(jellyfin.catalog.default_library_id())
            for summary in page.items
        ]
    # As that version lists it: Protocol File, and IsRemote only before 10.11.7.
    assert (item.protocol, item.is_remote, item.container) == ("File", remote, "strm")
    assert item.path == str(target)
    assert non_file_kind(item) == ".strm link"
    assert [non_file_kind(summary) for summary in listed] == [".strm link"]
    with pytest.raises(PermanentError, match=r"is a \.strm link, not a media file"):
        require_media_file(item.id, item.name, item)


# point 7: a sidecar subtitle answered with 500 every time ---------------------------------


def test_a_sidecar_subtitle_jellyfin_always_fails_is_skipped_and_the_rest_kept(
    jellyfin: JellyfinStandIn, tmp_path: Path
) -> None:
    good, broken = tmp_path / "Movie.fr.srt", tmp_path / "Movie.en.srt"
    good.write_text(SRT, encoding="utf-8")
    broken.write_bytes(b"\x00\xff" * 4096)  # Jellyfin's converter throws on it: 500
    item_id, _ = _movie(
        jellyfin,
        tmp_path,
        sidecars=[Sidecar(good, language="fre"), Sidecar(broken, language="eng")],
    )
    with JellyfinClient(jellyfin.url, jellyfin.api_key, retry_attempts=3, **FAST) as client:
        item = client.get_item(item_id)
        plan = plan_transcode(item, tmp_path / "work", tmp_path / "source.mkv", output_format="hls")
        source_id = item.source_id or item.id
        plan = fetch_sidecar_subtitles(
            plan, lambda index: client.fetch_subtitle(item.id, source_id, index)
        )
    assert [(sub.stream_index, sub.language) for sub in plan.subtitles] == [(0, "fre")]
    assert plan.subtitles[0].path.read_text().startswith("WEBVTT")
    [skipped] = plan.skipped
    assert (skipped.index, skipped.kind, skipped.language) == (1, "Subtitle", "eng")
    assert skipped.reason == (
        f"sidecar subtitle not served by Jellyfin: Jellyfin answered 500 (GET /Videos/"
        f"{item_id}/{source_id}/Subtitles/1/Stream.vtt) (gave up after 3 failed tries in a row)"
    )
    tries = [r for r in jellyfin.requests if r.path.endswith("/Subtitles/1/Stream.vtt")]
    assert len(tries) == 3  # retried first, as any 5xx


def test_a_sidecar_subtitle_is_not_skipped_when_jellyfin_cannot_be_reached(
    jellyfin: JellyfinStandIn, tmp_path: Path
) -> None:
    srt = tmp_path / "Movie.fr.srt"
    srt.write_text(SRT, encoding="utf-8")
    item_id, _ = _movie(jellyfin, tmp_path, sidecars=[Sidecar(srt, language="fre")])
    with JellyfinClient(jellyfin.url, jellyfin.api_key, **FAST) as client:
        item = client.get_item(item_id)
    plan = plan_transcode(item, tmp_path / "work", tmp_path / "source.mkv", output_format="hls")
    url = jellyfin.url
    jellyfin.stop()
    with (
        JellyfinClient(url, jellyfin.api_key, retry_attempts=2, **FAST) as client,
        pytest.raises(TransientError, match=r"^Jellyfin unreachable"),
    ):
        fetch_sidecar_subtitles(plan, lambda index: client.fetch_subtitle(item_id, "src", index))


# point 7: the size-mismatch message ------------------------------------------------------


def test_a_size_mismatch_says_what_fixes_a_same_mtime_replacement(
    jellyfin: JellyfinStandIn, tmp_path: Path
) -> None:
    item_id, _ = _movie(jellyfin, tmp_path, reported_size=1000)
    with (
        JellyfinClient(jellyfin.url, jellyfin.api_key, **FAST) as client,
        pytest.raises(TransientError) as caught,
    ):
        client.download(
            item_id,
            tmp_path / "out.mkv",
            expected_size=1000,
            on_progress=lambda progress: None,
            abort=AbortSignal(),
        )
    assert str(caught.value) == (
        f"Jellyfin serves {64 * 1024} bytes for item {item_id} but reported 1000 "
        "(MediaSources Size): the file changed on the server after Jellyfin scanned it; "
        "refresh the item's metadata in Jellyfin (Refresh metadata > Replace all metadata) "
        "or touch the file and rescan, then retry"
    )


# point 8: Size and ETag as Jellyfin's database holds them ----------------------------------


def test_a_file_replaced_keeping_its_mtime_is_listed_as_scanned_and_the_download_says_why(
    jellyfin: JellyfinStandIn, tmp_path: Path
) -> None:
    """Every version lists the Size and ETag its last scan stored. A file replaced with
    its old mtime kept (`cp -p`, rsync -a) keeps the old ETag even after a rescan, and
    until the rescan also the old Size: the download answers the new length, and the
    error says what makes Jellyfin read the file again."""
    item_id, path = _movie(jellyfin, tmp_path)
    jellyfin.scan(item_id)
    stamp = path.stat().st_mtime_ns
    with JellyfinClient(jellyfin.url, jellyfin.api_key, **FAST) as client:
        scanned = client.get_item(item_id)
        path.write_bytes(os.urandom(96 * 1024))  # the replacement, same path
        os.utime(path, ns=(stamp, stamp))  # ... with the old date kept
        listed = client.get_item(item_id)
        assert (listed.size, listed.etag) == (64 * 1024, scanned.etag)
        with pytest.raises(TransientError, match=r"Refresh metadata > Replace all metadata"):
            client.download(
                item_id,
                tmp_path / "out.mkv",
                expected_size=listed.size,
                on_progress=lambda progress: None,
                abort=AbortSignal(),
            )
        jellyfin.scan(item_id)
        rescanned = client.get_item(item_id)
        # The size moves with the rescan; the ETag (DateModified's MD5) cannot.
        assert (rescanned.size, rescanned.etag) == (96 * 1024, scanned.etag)
        client.download(
            item_id,
            tmp_path / "again.mkv",
            expected_size=rescanned.size,
            on_progress=lambda progress: None,
            abort=AbortSignal(),
        )
    assert (tmp_path / "again.mkv").read_bytes() == path.read_bytes()
