"""The Jellyfin HTTP client: item metadata, library listings and the original file.

Every call carries the API key in the `Authorization: MediaBrowser ...` header only
(never a URL, so it cannot leak into logs or error messages), retries network failures
and 5xx with backoff, and turns everything else into PermanentError / TransientError.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.item import MediaItem, ServedFile
from mirror.domain.listing import ItemHit, ItemPage, Library
from mirror.domain.progress import AbortSignal, ProgressCallback
from mirror.domain.thumbnails import TrickplayTiles
from mirror.jellyfin.download import ResumableDownload
from mirror.jellyfin.failures import (
    MAX_REDIRECTS,
    ItemNotFound,
    RetryableError,
    RetryPolicy,
    classify_http_error,
    file_missing,
    give_up,
    raise_for_status,
)
from mirror.jellyfin.models import (
    parse_item_hit,
    parse_item_summary,
    parse_library,
    parse_media_item,
    require_item_id,
)
from mirror.jellyfin.quirks import has_symlink_bug, symlink_bug_error

CLIENT_VERSION = "0.1.0"
# ParentId: the item's folder (an episode's season), kept with its jobs (domain.item.ItemTitle).
# Trickplay: the thumbnail tiles Jellyfin made, copied instead of making our own.
ITEM_FIELDS = "Path,MediaSources,MediaStreams,ParentId,Trickplay"
LISTING_FIELDS = "Path,MediaSources,ParentId"
# How long the server's version is trusted: long enough to cost one request per worker
# now and then, short enough to notice an upgrade of Jellyfin without a restart.
VERSION_TTL_S = 300.0
# What the dashboard's title search finds: what can be mirrored, and its parents.
SEARCH_TYPES = ("Movie", "Episode", "Series", "Season")
MAX_SEARCH_TERM = 200


def authorization_header(api_key: str) -> str:
    """The `MediaBrowser` scheme Jellyfin 10.9 through 12.x accepts; DeviceId per host."""
    device_id = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16]
    return (
        f'MediaBrowser Client="mirror", Device="mirror", DeviceId="mirror-{device_id}", '
        f'Version="{CLIENT_VERSION}", Token="{api_key}"'
    )


def tls_context() -> ssl.SSLContext:
    """The TLS settings httpx would build for a client (certifi's CAs, or SSL_CERT_FILE /
    SSL_CERT_DIR when set), built once per process and shared by every client: building
    them reads the whole CA bundle, ~20 ms of CPU for each of a client's two connection
    pools, and `mirror serve` makes a client per library search. A context is safe to
    share between threads."""
    return _tls_context_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _tls_context_for(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """Keyed by the variables httpx reads, so a changed bundle is read again."""
    return httpx.create_ssl_context()


class JellyfinClient:
    """Talks to one Jellyfin server with one API key. Thread-safe like httpx.Client."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        transport: httpx.BaseTransport | None = None,
        connect_timeout: float = 10,
        read_timeout: float = 60,
        retry_attempts: int = 5,
        retry_max_wait: float = 30,
        retry_initial_wait: float = 0.5,
        download_rate_limit: float | None = None,
    ) -> None:
        if not api_key:
            raise PermanentError("no Jellyfin API key given")
        self.base_url = base_url.rstrip("/")
        self.download_rate_limit = download_rate_limit  # bytes/s per download; None: no limit
        # No total timeout: a big original takes as long as it takes; `read` bounds
        # each single read, so a silent server is still noticed.
        timeout = httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
        )
        headers = {"Authorization": authorization_header(api_key)}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={**headers, "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
            verify=tls_context(),
            follow_redirects=True,
            max_redirects=MAX_REDIRECTS,
        )
        # Downloads get their own connection each time, so the abort hook can find the
        # socket as soon as it opens (see download._Interrupter).
        self._download_http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            transport=transport,
            verify=tls_context(),
            follow_redirects=True,
            max_redirects=MAX_REDIRECTS,
            # keep-alive off: the download fast path needs it (mirror/jellyfin/body.py)
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        self._version_lock = threading.Lock()
        self._version: tuple[float, str | None] | None = None  # (when read, Version)
        self._retry = RetryPolicy(
            attempts=max(1, retry_attempts),
            initial_wait=retry_initial_wait,
            max_wait=retry_max_wait,
        )

    def __repr__(self) -> str:
        return f"JellyfinClient(base_url={self.base_url!r})"

    def __enter__(self) -> JellyfinClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()
        self._download_http.close()

    def get_item(self, item_id: str) -> MediaItem:
        """The item with the streams of the media source that /Download serves."""
        item_id = require_item_id(item_id)
        data = self._get_json("/Items", {"ids": item_id, "fields": ITEM_FIELDS}, item_id=item_id)
        items = [entry for entry in _items_of(data, "/Items") if isinstance(entry, Mapping)]
        for entry in items:
            try:
                if require_item_id(str(entry.get("Id", ""))) == item_id:
                    return parse_media_item(entry)
            except PermanentError:
                continue
        raise PermanentError(f"item {item_id} not found in Jellyfin")

    def list_libraries(self) -> list[Library]:
        """Every library (virtual folder) the key can see."""
        data = self._get_json("/Library/VirtualFolders")
        if not isinstance(data, list):
            raise TransientError(
                "Jellyfin answered GET /Library/VirtualFolders with unexpected JSON"
            )
        return [
            library
            for entry in data
            if isinstance(entry, Mapping) and (library := parse_library(entry)) is not None
        ]

    def find_library(self, name: str) -> Library:
        """The library called `name` (exact match first, then ignoring case)."""
        libraries = self.list_libraries()
        exact = [lib for lib in libraries if lib.name == name]
        loose = [lib for lib in libraries if lib.name.casefold() == name.casefold()]
        if exact or loose:
            return (exact or loose)[0]
        available = ", ".join(repr(lib.name) for lib in libraries) or "none"
        raise PermanentError(f"no Jellyfin library named {name!r} (available: {available})")

    def iter_library_pages(
        self,
        parent_id: str,
        item_types: Sequence[str] = ("Movie", "Episode"),
        page_size: int = 200,
    ) -> Iterator[ItemPage]:
        """Pages of a library's items, sorted by name, each with the server's total."""
        parent_id = require_item_id(parent_id)
        start = 0
        seen: set[str] = set()
        while True:
            params = {
                "parentId": parent_id,
                "recursive": "true",
                "includeItemTypes": ",".join(item_types),
                # Missing episodes and the like have no file; Jellyfin lists them
                # unless told not to.
                "excludeLocationTypes": "Virtual",
                "fields": LISTING_FIELDS,
                "startIndex": str(start),
                "limit": str(page_size),
                "sortBy": "SortName",
            }
            data = self._get_json("/Items", params)
            raw_items = _items_of(data, "/Items")
            total = data.get("TotalRecordCount") if isinstance(data, dict) else None
            total = total if isinstance(total, int) else start + len(raw_items)
            summaries = []
            for entry in raw_items:
                summary = parse_item_summary(entry) if isinstance(entry, Mapping) else None
                # Items added or removed while paging shift the pages; skip repeats.
                if summary is not None and summary.id not in seen:
                    seen.add(summary.id)
                    summaries.append(summary)
            yield ItemPage(items=tuple(summaries), start_index=start, total=total)
            start += len(raw_items)
            if not raw_items or start >= total:
                return

    def search_items(
        self, term: str, *, item_types: Sequence[str] = SEARCH_TYPES, limit: int = 25
    ) -> list[ItemHit]:
        """Items whose title contains `term`, by Jellyfin's own search, best match first.

        `/Items` without a userId, like the sweep: an API key acts as an administrator
        and sees every library. Jellyfin orders by relevance when searchTerm is given.
        """
        term = term.strip()
        if not term or len(term) > MAX_SEARCH_TERM:
            raise PermanentError(f"a search term is 1 to {MAX_SEARCH_TERM} characters")
        params = {
            "searchTerm": term,
            "recursive": "true",
            "includeItemTypes": ",".join(item_types),
            "excludeLocationTypes": "Virtual",  # missing episodes: nothing to mirror
            "limit": str(limit),
        }
        data = self._get_json("/Items", params)
        hits = []
        for entry in _items_of(data, "/Items"):
            hit = parse_item_hit(entry) if isinstance(entry, Mapping) else None
            if hit is not None:
                hits.append(hit)
        return hits

    def existing_item_ids(self, item_ids: Sequence[str], batch: int = 100) -> set[str]:
        """Which of these items Jellyfin still has, in any library (`mirror sync`'s removed)."""
        found: set[str] = set()
        ids = [require_item_id(item_id) for item_id in item_ids]
        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            data = self._get_json("/Items", {"ids": ",".join(chunk), "recursive": "true"})
            for entry in _items_of(data, "/Items"):
                summary = parse_item_summary(entry) if isinstance(entry, Mapping) else None
                if summary is not None:
                    found.add(summary.id)
        return found

    def download(
        self,
        item_id: str,
        dest: Path,
        *,
        expected_size: int | None,
        on_progress: ProgressCallback,
        abort: AbortSignal,
        on_write: Callable[[int], None] | None = None,
        on_restart: Callable[[], None] | None = None,
        listed: Mapping[str, object] | None = None,
    ) -> ServedFile:
        """Stream the original file to `dest`, resuming bytes already there that are of
        the version Jellyfin serves now; returns its size and validators.

        Keeps `dest` plus a `<name>.version.json` record on failure so a later try (even
        from another process) resumes; the caller removes both when done. `listed` is
        the item as its metadata lists it now (`MediaItem.source_json()`): a partial
        recorded under other facts is not resumed. `on_write` is told the size of the
        current bytes after every chunk written (and once a resume is confirmed),
        `on_restart` when bytes it was told of are thrown away (it may raise).
        """
        item_id = require_item_id(item_id)
        try:
            served = ResumableDownload(
                self._download_http,
                item_id,
                dest,
                expected_size=expected_size,
                on_progress=on_progress,
                abort=abort,
                policy=self._retry,
                server_version=self.server_version,
                rate_limit=self.download_rate_limit,
                on_write=on_write,
                on_restart=on_restart,
                listed=listed,
            ).run()
        except ItemNotFound as exc:
            raise self._gone_or_file_missing(exc) from exc
        # 10.11.1-10.11.4 may have served a symlink's few bytes with a matching Size: a
        # range request tells (they answer it with 500 for such files only).
        version = self.server_version()
        if version is not None and has_symlink_bug(version) and self._range_fails(item_id):
            raise symlink_bug_error(item_id, version, "500 to a range request on its file")
        return served

    def fetch_subtitle(self, item_id: str, media_source_id: str, index: int) -> bytes:
        """One subtitle stream as WebVTT, by Jellyfin's `MediaStreams[].Index`.

        Jellyfin converts it (sidecars included) at `/Videos/{itemId}/{mediaSourceId}/
        Subtitles/{index}/Stream.vtt`; errors are classified like every other call.
        """
        path = f"/Videos/{require_item_id(item_id)}/{media_source_id}/Subtitles/{index}/Stream.vtt"
        try:
            for attempt in self._retry.retrying():
                with attempt:
                    try:
                        response = self._http.get(path)
                    except (httpx.HTTPError, httpx.InvalidURL) as exc:
                        raise classify_http_error("GET", path, exc) from exc
                    raise_for_status(response, path, item_id)
                    return response.content
        except RetryableError as exc:
            raise give_up(exc, self._retry.attempts) from exc
        raise AssertionError("unreachable: tenacity either returns or raises")

    def fetch_trickplay_tile(self, item_id: str, tiles: TrickplayTiles, index: int) -> bytes:
        """Sheet `index` of Jellyfin's trickplay tiles (`/Videos/{itemId}/Trickplay/
        {width}/{index}.jpg`); 404 (no such sheet, or its file is gone) is permanent."""
        path = f"/Videos/{require_item_id(item_id)}/Trickplay/{tiles.width}/{index}.jpg"
        params = {"mediaSourceId": tiles.media_source_id}
        try:
            for attempt in self._retry.retrying():
                with attempt:
                    try:
                        response = self._http.get(path, params=params)
                    except (httpx.HTTPError, httpx.InvalidURL) as exc:
                        raise classify_http_error("GET", path, exc) from exc
                    raise_for_status(response, path, item_id)
                    return response.content
        except RetryableError as exc:
            raise give_up(exc, self._retry.attempts) from exc
        raise AssertionError("unreachable: tenacity either returns or raises")

    def fetch_range(self, item_id: str, start: int, length: int) -> bytes | None:
        """Bytes [start, start + length) of the item's file (an MP4's moov at its end),
        or None when Jellyfin does not answer with exactly that range (206)."""
        path = f"/Items/{require_item_id(item_id)}/Download"
        headers = {"Range": f"bytes={start}-{start + length - 1}", "Accept-Encoding": "identity"}
        try:
            for attempt in self._retry.retrying():
                with attempt:
                    try:
                        with self._download_http.stream("GET", path, headers=headers) as response:
                            if response.status_code == 416:  # shorter than listed: no tail
                                return None
                            raise_for_status(response, path, item_id)
                            served = response.headers.get("Content-Range", "")
                            if response.status_code != 206 or not served.startswith(
                                f"bytes {start}-"
                            ):
                                return None  # never read a whole file answered instead
                            body = response.read()
                    except (httpx.HTTPError, httpx.InvalidURL) as exc:
                        raise classify_http_error("GET", path, exc) from exc
                    return body if len(body) == length else None
        except RetryableError as exc:
            raise give_up(exc, self._retry.attempts) from exc
        raise AssertionError("unreachable: tenacity either returns or raises")

    def _gone_or_file_missing(self, exc: ItemNotFound) -> PermanentError | TransientError:
        """What a 404 from /Download means: the item is gone (permanent), or Jellyfin
        still lists it and only its file is missing on disk (transient, `file_missing`)."""
        if exc.item_id in self.existing_item_ids([exc.item_id]):
            return file_missing(exc.item_id)
        return exc

    def server_version(self) -> str | None:
        """Jellyfin's Version from /System/Info/Public, cached; None when it cannot be read.

        One try, no retries: it only refines error messages, so it must never be the
        reason a job waits or fails.
        """
        with self._version_lock:
            cached = self._version
            if cached is not None and time.monotonic() - cached[0] < VERSION_TTL_S:
                return cached[1]
            version: str | None = None
            try:
                response = self._http.get("/System/Info/Public")
                data = response.json() if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                data = None
            if isinstance(data, dict) and isinstance(data.get("Version"), str):
                version = data["Version"]
            self._version = (time.monotonic(), version)
            return version

    def _range_fails(self, item_id: str) -> bool:
        """Whether /Download answers a one-byte range request with 500."""
        try:
            response = self._download_http.get(
                f"/Items/{item_id}/Download",
                headers={"Range": "bytes=0-0", "Accept-Encoding": "identity"},
            )
        except httpx.HTTPError:
            return False
        return response.status_code == 500

    def _get_json(
        self, path: str, params: Mapping[str, str] | None = None, *, item_id: str | None = None
    ) -> Any:
        try:
            for attempt in self._retry.retrying():
                with attempt:
                    return self._get_json_once(path, params, item_id)
        except RetryableError as exc:
            raise give_up(exc, self._retry.attempts) from exc
        raise AssertionError("unreachable: tenacity either returns or raises")

    def _get_json_once(
        self, path: str, params: Mapping[str, str] | None, item_id: str | None
    ) -> Any:
        try:
            response = self._http.get(path, params=params)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise classify_http_error("GET", path, exc) from exc
        raise_for_status(response, path, item_id)
        try:
            return response.json()
        except ValueError as exc:
            raise TransientError(
                f"Jellyfin answered GET {path} with something that is not JSON "
                f"({response.headers.get('Content-Type', 'no content type')}): "
                "is the Jellyfin URL right?"
            ) from exc


def _items_of(data: Any, path: str) -> list[Any]:
    items = data.get("Items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise TransientError(f"Jellyfin answered GET {path} without an Items list")
    return items
