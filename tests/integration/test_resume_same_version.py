"""A resume continues the bytes on disk only with bytes of the same version of the file.

The real client against the Jellyfin stand-in (ASP.NET's range rules: a date If-Range is
honoured when the file is not newer than it). Each test cuts a download, replaces the
file on the server at the cut and checks what the next request asked for and what the
file on disk holds at the end: never bytes of two versions.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.errors import SourceChanged, TransientError
from mirror.domain.progress import AbortSignal
from mirror.files.growing_file import GrowingFile
from mirror.jellyfin.client import JellyfinClient
from mirror.jellyfin.partial import PartialRecord, read_record, record_path, write_record

MB = 1024 * 1024
ITEM_ID = "5f0c1e2d3b4a59687766554433221100"


def make_client(standin: JellyfinStandIn, **overrides: Any) -> JellyfinClient:
    options: dict[str, Any] = {"retry_initial_wait": 0.001, "retry_max_wait": 0.01}
    options.update(overrides)
    return JellyfinClient(standin.url, standin.api_key, **options)


@pytest.fixture
def client(jellyfin: JellyfinStandIn) -> Iterator[JellyfinClient]:
    with make_client(jellyfin) as jellyfin_client:
        yield jellyfin_client


def serve(jellyfin: JellyfinStandIn, path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return jellyfin.add_item(path, name=path.stem, streams=[], duration_s=4.0)


def replace(path: Path, data: bytes, *, shift_mtime_s: float) -> None:
    """Swap the file for another (a new inode, as a library manager does), its mtime
    moved by `shift_mtime_s` from the old one's (Last-Modified has whole seconds)."""
    mtime = path.stat().st_mtime + shift_mtime_s
    staged = path.with_name(path.name + ".new")
    staged.write_bytes(data)
    os.utime(staged, (mtime, mtime))
    os.replace(staged, path)


def download(client: JellyfinClient, item_id: str, dest: Path, **kwargs: Any) -> int:
    kwargs.setdefault("expected_size", None)
    kwargs.setdefault("on_progress", lambda _: None)
    kwargs.setdefault("abort", AbortSignal())
    return client.download(item_id, dest, **kwargs).size


def test_a_replacement_with_an_older_mtime_is_downloaded_again_not_spliced(
    jellyfin: JellyfinStandIn, client: JellyfinClient, tmp_path: Path
) -> None:
    """Same size, older mtime (`cp -p`, `rsync -a`): ASP.NET honours the date If-Range
    and answers 206 with the new file's bytes. Its Last-Modified is not the recorded one,
    so the client starts over instead of appending them to the old bytes."""
    served = tmp_path / "served.mkv"
    old, new = os.urandom(3 * MB), os.urandom(3 * MB)
    item_id = serve(jellyfin, served, old)
    dest = tmp_path / "work" / "source.mkv"
    jellyfin.cut_after(1 * MB, then=lambda: replace(served, new, shift_mtime_s=-3600))

    assert download(client, item_id, dest, expected_size=3 * MB) == 3 * MB

    assert dest.read_bytes() == new
    answers = [(r.status, r.range) for r in jellyfin.download_requests()]
    assert answers == [(200, None), (206, f"bytes={1 * MB}-"), (200, None)]
    record = read_record(dest)
    assert record is not None
    assert record.last_modified == formatdate(int(served.stat().st_mtime), usegmt=True)


def test_a_partial_the_item_no_longer_fits_is_dropped_before_any_request(
    jellyfin: JellyfinStandIn, tmp_path: Path
) -> None:
    """A later attempt whose metadata lists another size, or another ETag, never asks
    for the rest of the old bytes: it starts from byte 0."""
    served = tmp_path / "served.mkv"
    item_id = serve(jellyfin, served, os.urandom(2 * MB))
    dest = tmp_path / "work" / "source.mkv"
    jellyfin.cut_after(1 * MB)
    with make_client(jellyfin, retry_attempts=1) as first, pytest.raises(TransientError):
        download(first, item_id, dest, expected_size=2 * MB, listed={"etag": "old"})
    assert dest.stat().st_size == 1 * MB
    new = os.urandom(3 * MB)
    replace(served, new, shift_mtime_s=60)

    with make_client(jellyfin) as later:
        assert download(later, item_id, dest, expected_size=3 * MB) == 3 * MB
    assert dest.read_bytes() == new
    assert [(r.status, r.range) for r in jellyfin.download_requests()][-1] == (200, None)

    # Same size, same bytes even, but the listing moved on (a new ETag): not resumed.
    jellyfin.clear_request_log()
    with dest.open("r+b") as file:
        file.truncate(1 * MB)
    with make_client(jellyfin) as later:
        download(later, item_id, dest, expected_size=3 * MB, listed={"etag": "new"})
    assert [(r.status, r.range) for r in jellyfin.download_requests()] == [(200, None)]
    assert dest.read_bytes() == new


@pytest.mark.parametrize(
    "record",
    [None, PartialRecord(size=2 * MB, last_modified=None, etag=None)],
    ids=["no record", "a record without a validator"],
)
def test_bytes_without_a_recorded_validator_are_never_resumed(
    jellyfin: JellyfinStandIn, client: JellyfinClient, tmp_path: Path, record: PartialRecord | None
) -> None:
    """No Range without an If-Range naming these bytes: they are dropped instead (a
    `.last-modified` sidecar of an older release counts as no record)."""
    served = tmp_path / "served.mkv"
    data = os.urandom(2 * MB)
    item_id = serve(jellyfin, served, data)
    dest = tmp_path / "work" / "source.mkv"
    dest.parent.mkdir()
    dest.write_bytes(data[: 1 * MB])
    dest.with_name(dest.name + ".last-modified").write_text(
        formatdate(int(served.stat().st_mtime), usegmt=True)
    )
    if record is not None:
        write_record(dest, record)

    assert download(client, item_id, dest, expected_size=2 * MB) == 2 * MB

    requests = jellyfin.download_requests()
    assert [(r.status, r.range, r.if_range) for r in requests] == [(200, None, None)]
    assert dest.read_bytes() == data
    assert record_path(dest).exists()


def test_a_start_over_after_bytes_were_vouched_for_raises_source_changed(
    jellyfin: JellyfinStandIn, client: JellyfinClient, tmp_path: Path
) -> None:
    """Inside one download: cut, the file replaced, Jellyfin answers the conditional
    resume with the whole new file. A reader was already told of the old bytes, so the
    download stops with SourceChanged and leaves nothing of either version behind."""
    served = tmp_path / "served.mkv"
    item_id = serve(jellyfin, served, os.urandom(2 * MB))
    dest = tmp_path / "work" / "source.mkv"
    growing = GrowingFile(dest, AbortSignal(), writer_reports=True)
    jellyfin.cut_after(1 * MB, then=lambda: replace(served, os.urandom(3 * MB), shift_mtime_s=60))

    with pytest.raises(SourceChanged, match="changed on the server"):
        download(client, item_id, dest, on_write=growing.wrote, on_restart=growing.start_over)

    assert [(r.status, r.range) for r in jellyfin.download_requests()] == [
        (200, None),
        (200, f"bytes={1 * MB}-"),
    ]
    assert not dest.exists() and not record_path(dest).exists()
    with pytest.raises(SourceChanged):
        growing.require_unchanged()


class NoValidatorServer:
    """A server (or proxy) sending no Last-Modified and no ETag, whose first body is cut
    after 1 MiB; every request it saw."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/Download"):
            return httpx.Response(404)  # /System/Info/Public: a version is not needed
        self.requests.append(request)
        headers = {"Content-Length": str(len(self.data))}
        if len(self.requests) > 1:
            return httpx.Response(200, headers=headers, content=iter([self.data]))

        def cut() -> Iterator[bytes]:
            yield self.data[: 1 * MB]
            raise httpx.ReadError("peer closed connection")

        return httpx.Response(200, headers=headers, content=cut())


def test_a_cut_body_without_a_validator_is_fetched_again_whole_never_by_range(
    tmp_path: Path,
) -> None:
    data = os.urandom(2 * MB)
    server = NoValidatorServer(data)
    dest = tmp_path / "source.mkv"
    with JellyfinClient(
        "http://jellyfin.invalid", "key", transport=httpx.MockTransport(server),
        retry_initial_wait=0.001,
    ) as client:  # fmt: skip
        assert download(client, ITEM_ID, dest) == 2 * MB

    assert dest.read_bytes() == data
    assert [r.headers.get("Range") for r in server.requests] == [None, None]
    assert [r.headers.get("If-Range") for r in server.requests] == [None, None]


def test_a_cut_body_without_a_validator_that_ffmpeg_was_fed_ends_the_try_as_transient(
    tmp_path: Path,
) -> None:
    """Its bytes cannot be resumed and a reader already has them: the attempt ends (a
    network failure, so it uses an attempt: a cut is no change of the file)."""
    server = NoValidatorServer(os.urandom(2 * MB))
    dest = tmp_path / "source.mkv"
    growing = GrowingFile(dest, AbortSignal(), writer_reports=True)
    with (
        JellyfinClient(
            "http://jellyfin.invalid", "key", transport=httpx.MockTransport(server),
            retry_initial_wait=0.001,
        ) as client,
        pytest.raises(TransientError, match=r"no validator .* after part of it was read") as raised,
    ):  # fmt: skip
        download(client, ITEM_ID, dest, on_write=growing.wrote, on_restart=growing.start_over)

    assert not isinstance(raised.value, SourceChanged)
    assert len(server.requests) == 1
    assert not dest.exists()
