"""JellyfinClient against the real-HTTP Jellyfin stand-in: mapping, errors, downloads."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.errors import JobCancelled, PermanentError, TransientError
from mirror.domain.item import MediaStream
from mirror.domain.progress import AbortSignal, Progress
from mirror.jellyfin.client import JellyfinClient
from mirror.jellyfin.partial import PartialRecord, read_record, write_record

EXAMPLE = Path("/work/shared/jellyfin/example-movie.json")
MB = 1024 * 1024


def make_client(standin: JellyfinStandIn, **overrides: Any) -> JellyfinClient:
    """A client with near-zero back-off, so retry tests take milliseconds."""
    options: dict[str, Any] = {
        "retry_initial_wait": 0.001,
        "retry_max_wait": 0.01,
        "read_timeout": 10,
    }
    options.update(overrides)
    return JellyfinClient(standin.url, standin.api_key, **options)


@pytest.fixture
def client(jellyfin: JellyfinStandIn) -> Iterator[JellyfinClient]:
    with make_client(jellyfin) as jellyfin_client:
        yield jellyfin_client


@pytest.fixture(scope="session")
def payload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 MiB of random bytes standing in for a movie (shared, never modified)."""
    path = tmp_path_factory.mktemp("jellyfin") / "payload.mkv"
    path.write_bytes(os.urandom(8 * MB))
    return path


class Recorder:
    """An on_progress callback that keeps every report."""

    def __init__(self) -> None:
        self.reports: list[Progress] = []

    def __call__(self, progress: Progress) -> None:
        self.reports.append(progress)

    @property
    def bytes_done(self) -> int:
        return (self.reports[-1].bytes_done or 0) if self.reports else 0


def add_payload(standin: JellyfinStandIn, path: Path, **kwargs: Any) -> str:
    return standin.add_item(path, name=path.stem, streams=[], duration_s=4.0, **kwargs)


def download(client: JellyfinClient, item_id: str, dest: Path, **kwargs: Any) -> int:
    kwargs.setdefault("expected_size", None)
    kwargs.setdefault("on_progress", Recorder())
    kwargs.setdefault("abort", AbortSignal())
    return client.download(item_id, dest, **kwargs).size


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


# metadata -----------------------------------------------------------------------------
def test_get_item_maps_the_streams_of_the_example_movie(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path
) -> None:
    example = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    raw_streams = example["MediaSources"][0]["MediaStreams"]
    item_id = jellyfin.add_item(
        payload,
        name=example["Name"],
        streams=raw_streams,
        duration_s=example["RunTimeTicks"] / 10_000_000,
        item_id=example["Id"].upper(),
    )

    item = client.get_item("A3F4C2E1-B5D6-4E0F-9C8B-7A6D5E4F3A21")  # webhook-style spelling

    assert item_id == item.id == "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
    assert (item.name, item.type, item.container) == ("Big Buck Bunny", "Movie", "mkv")
    assert item.size == payload.stat().st_size
    assert item.duration_s == 5965.0
    assert item.streams == (
        MediaStream(
            0,
            "Video",
            "h264",
            width=1920,
            height=1080,
            frame_rate=23.976025,
            is_default=True,
            pixel_format="yuv420p",
            profile="High",
            bit_depth=8,
            color_primaries="bt709",
            color_transfer="bt709",
            color_space="bt709",
            video_range_type="SDR",
        ),
        MediaStream(1, "Audio", "eac3", "eng", "English 5.1", channels=6, is_default=True),
        MediaStream(2, "Audio", "aac", "fre", "Français Stéréo", channels=2, profile="LC"),
        MediaStream(3, "Subtitle", "subrip", "eng", "English (SDH)"),
    )


def test_unknown_item_is_a_permanent_not_found(client: JellyfinClient) -> None:
    unknown = uuid.uuid4().hex
    with pytest.raises(PermanentError, match=f"item {unknown} not found in Jellyfin"):
        client.get_item(unknown)


def test_wrong_key_is_rejected_and_never_shown(jellyfin: JellyfinStandIn, payload: Path) -> None:
    item_id = add_payload(jellyfin, payload)
    secret = "wrong-key-5f2b9c0d1e"
    with JellyfinClient(jellyfin.url, secret, retry_max_wait=0.01) as bad_client:
        with pytest.raises(PermanentError, match=r"rejected the API key \(401\)") as caught:
            bad_client.get_item(item_id)
        with pytest.raises(PermanentError, match="rejected the API key") as caught_download:
            download(bad_client, item_id, Path(os.devnull + ".never"))
        shown = [repr(bad_client), str(bad_client)]
    for exc in (caught.value, caught_download.value):
        shown += [str(exc), repr(exc), *map(str, exc.args)]
    assert not [text for text in shown if secret in text]
    assert [r.status for r in jellyfin.requests] == [401, 401]


def test_key_travels_in_the_header_only(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    client.get_item(item_id)
    download(client, item_id, tmp_path / "movie.mkv")
    assert jellyfin.requests and all(r.status < 300 for r in jellyfin.requests)
    for record in jellyfin.requests:
        assert jellyfin.api_key not in record.path + record.query


def test_libraries_are_listed_and_found_by_name(
    jellyfin: JellyfinStandIn, client: JellyfinClient
) -> None:
    films = jellyfin.add_library("Films")
    shows = jellyfin.add_library("Shows", collection_type="tvshows")
    assert [(lib.name, lib.item_id, lib.collection_type) for lib in client.list_libraries()] == [
        ("Films", films, "movies"),
        ("Shows", shows, "tvshows"),
    ]
    assert client.find_library("shows").item_id == shows
    with pytest.raises(
        PermanentError, match=r"no Jellyfin library named 'Music'.*'Films', 'Shows'"
    ):
        client.find_library("Music")


def test_library_listing_pages_through_450_items_in_3_pages(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path
) -> None:
    library = jellyfin.add_library("Films")
    other = jellyfin.add_library("Elsewhere")
    for number in range(450):
        jellyfin.add_item(
            payload, name=f"Movie {number:03d}", streams=[], duration_s=1, library_id=library
        )
    jellyfin.add_item(payload, name="A Series", streams=[], duration_s=1, item_type="Series",
                      library_id=library)  # fmt: skip
    jellyfin.add_item(payload, name="Not here", streams=[], duration_s=1, library_id=other)
    jellyfin.clear_request_log()

    pages = list(client.iter_library_pages(library, page_size=200))

    assert [(len(page.items), page.start_index, page.total) for page in pages] == [
        (200, 0, 450),
        (200, 200, 450),
        (50, 400, 450),
    ]
    names = [summary.name for page in pages for summary in page.items]
    assert names == [f"Movie {number:03d}" for number in range(450)]
    assert {summary.size for page in pages for summary in page.items} == {payload.stat().st_size}
    queries = [r.query for r in jellyfin.requests]
    assert len(queries) == 3
    for query, start in zip(queries, (0, 200, 400), strict=True):
        assert f"startIndex={start}&limit=200" in query
        assert "recursive=true" in query and "sortBy=SortName" in query
    assert next(client.iter_library_pages(library, page_size=1)).total == 450
    assert (
        sum(len(page.items) for page in client.iter_library_pages(library, page_size=1000)) == 450
    )


# error mapping ----------------------------------------------------------------------
def test_download_refused_403_is_permanent(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    jellyfin.fail_next(403, path_prefix=f"/Items/{item_id}/Download")
    with pytest.raises(PermanentError, match=f"refused access to item {item_id} \\(403\\)"):
        download(client, item_id, tmp_path / "movie.mkv")


def test_item_that_cannot_be_downloaded_400_is_permanent(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload, downloadable=False)
    with pytest.raises(PermanentError, match=f"cannot serve item {item_id} \\(400"):
        download(client, item_id, tmp_path / "movie.mkv")
    assert [r.status for r in jellyfin.requests] == [400]  # permanent: asked once


def test_503_with_retry_after_is_waited_out_then_succeeds(
    jellyfin: JellyfinStandIn, payload: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    jellyfin.fail_next(503, times=1, retry_after=1)
    with make_client(jellyfin, retry_max_wait=5) as patient:
        began = time.monotonic()
        assert patient.get_item(item_id).id == item_id
        waited = time.monotonic() - began
    assert [r.status for r in jellyfin.requests] == [503, 200]
    assert 0.9 <= waited < 3  # Retry-After: 1, not the 1 ms back-off


def test_server_errors_are_retried_until_attempts_run_out(
    jellyfin: JellyfinStandIn, payload: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    jellyfin.fail_next(500)
    jellyfin.fail_next(502)
    with make_client(jellyfin, retry_attempts=3) as retrying:
        assert retrying.get_item(item_id).id == item_id
        assert [r.status for r in jellyfin.requests] == [500, 502, 200]

        jellyfin.clear_request_log()
        jellyfin.fail_next(503, times=10, retry_after=0)
        with pytest.raises(TransientError, match=r"answered 503 \(GET /Items\).*3 failed tries"):
            retrying.get_item(item_id)
    assert [r.status for r in jellyfin.requests] == [503, 503, 503]


def test_unreachable_server_is_transient() -> None:
    with JellyfinStandIn() as stopped_later:
        url = stopped_later.url
    with (
        JellyfinClient(url, "key", retry_attempts=2, retry_max_wait=0.01) as lost,
        pytest.raises(
            TransientError, match=r"Jellyfin unreachable \(GET /Library/VirtualFolders\)"
        ),
    ):
        lost.list_libraries()


# downloads --------------------------------------------------------------------------
def test_download_is_equal_byte_for_byte_with_progress(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    size = payload.stat().st_size
    progress = Recorder()
    dest = tmp_path / item_id / "source.mkv"

    assert download(client, item_id, dest, expected_size=size, on_progress=progress) == size

    assert dest.read_bytes() == payload.read_bytes()
    assert progress.reports[0].bytes_done == 0
    assert (progress.reports[-1].bytes_done, progress.reports[-1].bytes_total) == (size, size)
    assert all(report.phase == "download" for report in progress.reports)
    # Kept for a later resume: the file's Last-Modified, as the server sent it.
    record = read_record(dest)
    assert record is not None
    assert record.last_modified == formatdate(int(payload.stat().st_mtime), usegmt=True)
    assert record.size == size


def test_download_cut_three_times_resumes_each_time(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    size = payload.stat().st_size
    jellyfin.cut_after(2 * MB, times=3)
    dest = tmp_path / "movie.mkv"

    assert download(client, item_id, dest, expected_size=size) == size

    assert dest.read_bytes() == payload.read_bytes()
    assert jellyfin.downloads_bytes_served < 1.3 * size
    assert [(r.status, r.range) for r in jellyfin.download_requests()] == [
        (200, None),
        (206, f"bytes={2 * MB}-"),
        (206, f"bytes={4 * MB}-"),
        (206, f"bytes={6 * MB}-"),
    ]


def test_partial_file_of_an_earlier_attempt_is_resumed_with_if_range(
    jellyfin: JellyfinStandIn, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    size = payload.stat().st_size
    dest = tmp_path / "movie.mkv"
    jellyfin.cut_after(3 * MB)
    with (
        make_client(jellyfin, retry_attempts=1) as first_attempt,
        pytest.raises(TransientError, match="interrupted after"),
    ):
        download(first_attempt, item_id, dest, expected_size=size)
    assert dest.stat().st_size == 3 * MB
    record = read_record(dest)
    assert record is not None
    last_modified = record.last_modified

    with make_client(jellyfin) as later_attempt:
        assert download(later_attempt, item_id, dest, expected_size=size) == size

    assert dest.read_bytes() == payload.read_bytes()
    resumed = jellyfin.download_requests()[-1]
    assert (resumed.status, resumed.range, resumed.if_range) == (
        206,
        f"bytes={3 * MB}-",
        last_modified,
    )
    assert jellyfin.downloads_bytes_served == size


def test_file_changed_on_the_server_is_downloaded_again_from_zero(
    jellyfin: JellyfinStandIn, client: JellyfinClient, tmp_path: Path
) -> None:
    source = tmp_path / "served.mkv"
    source.write_bytes(os.urandom(4 * MB))
    item_id = add_payload(jellyfin, source)
    dest = tmp_path / "work" / "movie.mkv"
    jellyfin.cut_after(1 * MB)
    with make_client(jellyfin, retry_attempts=1) as first_attempt, pytest.raises(TransientError):
        download(first_attempt, item_id, dest)
    replacement = os.urandom(5 * MB)
    source.write_bytes(replacement)
    later = source.stat().st_mtime + 60
    os.utime(source, (later, later))  # Last-Modified has whole seconds

    # No metadata to compare (the item's size would tell): the If-Range answer does.
    assert download(client, item_id, dest) == 5 * MB

    assert dest.read_bytes() == replacement
    restarted = jellyfin.download_requests()[-1]
    assert (restarted.status, restarted.range) == (200, f"bytes={1 * MB}-")


def test_complete_partial_is_confirmed_by_416_without_downloading_again(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    size = payload.stat().st_size
    dest = tmp_path / "movie.mkv"
    download(client, item_id, dest, expected_size=size)
    served = jellyfin.downloads_bytes_served

    assert download(client, item_id, dest, expected_size=size) == size

    assert [r.status for r in jellyfin.download_requests()] == [200, 416]
    assert jellyfin.downloads_bytes_served == served
    assert dest.read_bytes() == payload.read_bytes()


def test_size_other_than_media_sources_size_is_transient(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    size = payload.stat().st_size
    item_id = add_payload(jellyfin, payload, reported_size=size + 1)
    reported = client.get_item(item_id).size
    assert reported == size + 1
    with pytest.raises(TransientError, match="MediaSources Size"):
        download(client, item_id, tmp_path / "movie.mkv", expected_size=reported)


def test_partial_larger_than_expected_is_discarded(
    jellyfin: JellyfinStandIn, client: JellyfinClient, tmp_path: Path
) -> None:
    source = tmp_path / "served.mkv"
    source.write_bytes(os.urandom(1 * MB))
    item_id = add_payload(jellyfin, source)
    dest = tmp_path / "movie.mkv"
    dest.write_bytes(b"x" * (2 * MB))
    write_record(dest, PartialRecord(2 * MB, "Thu, 01 Jan 2015 00:00:00 GMT", None))

    assert download(client, item_id, dest, expected_size=1 * MB) == 1 * MB
    assert dest.read_bytes() == source.read_bytes()
    assert [(r.status, r.range) for r in jellyfin.download_requests()] == [(200, None)]


def run_in_thread(target: Any) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # collected for the test thread to inspect
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def test_abort_mid_download_ends_it_within_a_second(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    jellyfin.throttle(256 * 1024)
    abort, progress = AbortSignal(), Recorder()
    thread, errors = run_in_thread(
        lambda: download(client, item_id, tmp_path / "m.mkv", on_progress=progress, abort=abort)
    )
    wait_for(lambda: progress.bytes_done > 0)

    began = time.monotonic()
    abort.trigger(JobCancelled("job cancelled by the user"))
    thread.join(timeout=5)

    assert not thread.is_alive() and time.monotonic() - began < 1
    assert len(errors) == 1 and isinstance(errors[0], JobCancelled)
    assert len(jellyfin.download_requests()) == 1  # not retried


def test_abort_while_the_server_sends_nothing_ends_at_once(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    item_id = add_payload(jellyfin, payload)
    jellyfin.stall_downloads(True)
    abort = AbortSignal()
    thread, errors = run_in_thread(
        lambda: download(client, item_id, tmp_path / "m.mkv", abort=abort)
    )
    wait_for(lambda: len(jellyfin.download_requests()) == 1)  # headers go, then nothing

    began = time.monotonic()
    abort.trigger(JobCancelled("job cancelled by the user"))
    thread.join(timeout=5)

    assert not thread.is_alive() and time.monotonic() - began < 1
    assert len(errors) == 1 and isinstance(errors[0], JobCancelled)
    assert jellyfin.downloads_bytes_served == 0


# -- Jellyfin 10.11.1-10.11.4 and symlinked files (#15279) --------------------------------


def _symlinked(jellyfin: JellyfinStandIn, payload: Path, tmp_path: Path, **options: Any) -> str:
    link = tmp_path / "linked.mkv"
    link.symlink_to(payload)
    return jellyfin.add_item(
        link, name="Linked", streams=[], duration_s=1.0, symlink_bug=True, **options
    )


def test_symlink_bug_size_mismatch_is_permanent_and_names_the_bug(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    jellyfin.version = "10.11.3"
    item = _symlinked(jellyfin, payload, tmp_path, reported_size=payload.stat().st_size)
    with pytest.raises(PermanentError) as raised:
        download(client, item, tmp_path / "out.mkv", expected_size=payload.stat().st_size)
    message = str(raised.value)
    assert "#15279" in message and "10.11.5" in message and "Jellyfin 10.11.3" in message
    assert len(jellyfin.download_requests()) == 1  # no retries: they cannot help


def test_symlink_bug_with_a_matching_size_is_caught_by_a_range_request(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    jellyfin.version = "10.11.1"
    item = _symlinked(jellyfin, payload, tmp_path)  # Size is the link's own size too
    with pytest.raises(PermanentError, match="#15279"):
        download(client, item, tmp_path / "out.mkv", expected_size=None)
    assert [r.range for r in jellyfin.download_requests()] == [None, "bytes=0-0"]


def test_a_size_mismatch_on_a_fixed_release_stays_a_transient_rescan_hint(
    jellyfin: JellyfinStandIn, client: JellyfinClient, payload: Path, tmp_path: Path
) -> None:
    jellyfin.version = "10.11.5"
    item = _symlinked(jellyfin, payload, tmp_path, reported_size=payload.stat().st_size)
    with pytest.raises(TransientError, match="rescan"):
        download(client, item, tmp_path / "out.mkv", expected_size=payload.stat().st_size)
    assert len(jellyfin.download_requests()) == 1  # and no range probe on a fixed release
