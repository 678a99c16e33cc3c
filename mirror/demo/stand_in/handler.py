"""The request handler of the Jellyfin stand-in and the state it shares with the tests.

Routes, status codes and headers follow ../shared/jellyfin/: 401 with an empty body
without the `MediaBrowser ... Token="<key>"` header, 400 for ids that are not GUIDs,
404 for unknown ones (and, plain text, for the missing file of a known item), and
downloads served like ASP.NET's PhysicalFile with range processing (206 +
Content-Range, 416 past the end, If-Range against Last-Modified).
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import os
import secrets
import select
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import imageio_ffmpeg

from mirror.demo.stand_in.catalog import (
    VERSION,
    Catalog,
    content_disposition,
    content_type_for,
    http_date,
    parse_authorization,
    parse_byte_range,
    parse_guid,
)

_CHUNK = 1024 * 1024


def _not_newer(mtime: float, if_range: str) -> bool:
    """Whether the file is not newer than the If-Range date (False for an ETag or junk)."""
    try:
        when = email.utils.parsedate_to_datetime(if_range.strip())
    except (TypeError, ValueError):
        return False
    return int(mtime) <= when.timestamp()


_POLL_S = 0.05


@dataclass(frozen=True)
class RequestRecord:
    """One answered request, for assertions (the Authorization header is left out)."""

    method: str
    path: str
    query: str
    range: str | None
    if_range: str | None
    status: int


@dataclass(frozen=True)
class DownloadSpan:
    """One download body as the server sent it: when its first and last bytes went out
    (time.monotonic() of this process) and how many bytes that was."""

    item_id: str
    started: float
    ended: float
    bytes_sent: int
    status: int


@dataclass
class Cut:
    """Drop a download body after `n_bytes`, for `times` bodies; `then` runs at the cut,
    before the connection drops (e.g. a test replaces the file there)."""

    n_bytes: int
    times: int
    then: Callable[[], None] | None = None


@dataclass
class FailRule:
    status: int
    times: int
    retry_after: int | None
    path_prefix: str | None


class Faults:
    """The misbehaviour currently asked for; read and changed under `lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.unstalled = threading.Condition(self.lock)
        self.throttle_bps: int | None = None
        self.send_buffer: int | None = None  # SO_SNDBUF of download answers (None: the kernel's)
        self.stalled = False
        self.metadata_stalled = False  # GET /Items answers nothing until un-stalled
        self.metadata_waiting = 0  # requests held by that stall right now
        self.cuts: list[Cut] = []
        self.failures: list[FailRule] = []

    def take_failure(self, path: str) -> FailRule | None:
        with self.lock:
            for rule in self.failures:
                if rule.path_prefix is None or path.lower().startswith(rule.path_prefix.lower()):
                    rule.times -= 1
                    if rule.times <= 0:
                        self.failures.remove(rule)
                    return rule
        return None

    def take_cut(self, body_length: int) -> Cut | None:
        """The cut that applies to a body this long, if any."""
        with self.lock:
            if not self.cuts or self.cuts[0].n_bytes >= body_length:
                return None
            cut = self.cuts[0]
            cut.times -= 1
            if cut.times <= 0:
                self.cuts.pop(0)
            return cut


@dataclass
class StandInState:
    """Everything the handler threads and the test share; thread-safe."""

    api_key: str
    server_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    version: str = VERSION  # what /System/Info/Public says (10.11.1-10.11.4 have the symlink bug)
    catalog: Catalog = field(default_factory=Catalog)
    faults: Faults = field(default_factory=Faults)
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    log: list[RequestRecord] = field(default_factory=list)
    download_spans: list[DownloadSpan] = field(default_factory=list)
    bytes_served: int = 0
    connections: set[socket.socket] = field(default_factory=set)

    def record(self, record: RequestRecord) -> None:
        with self.lock:
            self.log.append(record)

    def record_span(self, span: DownloadSpan) -> None:
        with self.lock:
            self.download_spans.append(span)

    def count_served(self, n_bytes: int) -> None:
        with self.lock:
            self.bytes_served += n_bytes

    def track(self, conn: socket.socket, *, open_: bool) -> None:
        with self.lock:
            if open_:
                self.connections.add(conn)
            else:
                self.connections.discard(conn)

    def hang_up_all(self) -> None:
        """Shut every open connection, waking handler threads blocked on them."""
        with self.lock:
            connections = list(self.connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class StandInHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], state: StandInState) -> None:
        self.state = state
        super().__init__(address, JellyfinHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up mid-answer is the normal case here, not worth a traceback."""


class JellyfinHandler(BaseHTTPRequestHandler):
    """Answers one connection's requests like Jellyfin's controllers do."""

    protocol_version = "HTTP/1.1"  # keep-alive, like Kestrel
    server_version = "Kestrel"
    sys_version = ""
    server: StandInHTTPServer

    @property
    def state(self) -> StandInState:
        return self.server.state

    def setup(self) -> None:
        super().setup()
        self.state.track(self.connection, open_=True)

    def finish(self) -> None:
        self.state.track(self.connection, open_=False)
        with contextlib.suppress(OSError):  # a client or a cut fault closed the socket
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `requests` instead of stderr."""

    def send_response(self, code: int, message: str | None = None) -> None:
        url = urlsplit(self.path)
        self.state.record(
            RequestRecord(
                method=self.command,
                path=url.path,
                query=url.query,
                range=self.headers.get("Range"),
                if_range=self.headers.get("If-Range"),
                status=code,
            )
        )
        super().send_response(code, message)

    # routing ----------------------------------------------------------------------
    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        query = {key.lower(): values[-1] for key, values in parse_qs(url.query).items()}
        rule = self.state.faults.take_failure(path)
        if rule is not None:
            self._send_failure(rule)
            return
        parts = [part.lower() for part in path.strip("/").split("/")]
        if parts == ["system", "info", "public"]:
            self._send_json(self._public_info())
            return
        auth = parse_authorization(self.headers.get("Authorization"))
        if auth is None or auth.get("Token") != self.state.api_key:
            self._send_body(401, b"")
            return
        if parts == ["items"]:
            if self._hold_metadata():
                self._answer_items(query)
        elif parts == ["library", "virtualfolders"]:
            self._send_json([lib.to_json() for lib in self.state.catalog.libraries()])
        elif len(parts) == 3 and parts[0] == "items" and parts[2] == "download":
            self._answer_download(parts[1])
        elif len(parts) == 6 and parts[0] == "videos" and parts[3] == "subtitles":
            self._answer_subtitle(parts[1], parts[4], parts[5])
        elif len(parts) == 5 and parts[0] == "videos" and parts[2] == "trickplay":
            self._answer_trickplay(parts[1], parts[3], parts[4], query.get("mediasourceid"))
        elif len(parts) == 2 and parts[0] == "items":
            # With an API key and no userId, Jellyfin looks up user Guid.Empty: 400.
            self._send_text(400, "Error processing request.")
        else:
            self._send_not_found()

    def _answer_subtitle(self, raw_id: str, raw_index: str, name: str) -> None:
        """`/Videos/{id}/{source}/Subtitles/{index}/Stream.vtt`: converted with ffmpeg.

        Like Jellyfin, `index` counts sidecars first, then the file's own streams.
        """
        item_id = parse_guid(raw_id)
        item = self.state.catalog.item(item_id) if item_id else None
        if item is None or not raw_index.isdigit() or name != "stream.vtt":
            self._send_not_found()
            return
        listed = item.media_streams()
        stream = next((st for st in listed if st.get("Index") == int(raw_index)), None)
        if stream is None or stream.get("Type") != "Subtitle":
            self._send_not_found()
            return
        if stream.get("IsExternal"):
            argv = ["-i", str(stream["Path"])]
        else:  # the file's own stream: its position among the file's streams
            own = [st for st in listed if not st.get("IsExternal")]
            argv = ["-i", str(item.path), "-map", f"0:{own.index(stream)}"]
        result = subprocess.run(
            [imageio_ffmpeg.get_ffmpeg_exe(), "-nostdin", "-loglevel", "error", *argv,
             "-f", "webvtt", "pipe:1"],
            capture_output=True,
            check=False,
        )  # fmt: skip
        if result.returncode != 0:
            self._send_text(500, "Error processing request.")
            return
        self._send_body(200, result.stdout, content_type="text/vtt; charset=utf-8")

    def _answer_trickplay(
        self, raw_id: str, raw_width: str, name: str, media_source_id: str | None
    ) -> None:
        """`/Videos/{id}/Trickplay/{width}/{index}.jpg` and `.../tiles.m3u8`: the item is
        looked up by `mediaSourceId`, else its id; 404 without tiles of that width or
        without that sheet's file (mirror.demo.stand_in.trickplay)."""
        item_id = parse_guid(media_source_id or raw_id)
        item = self.state.catalog.item(item_id) if item_id else None
        tiles = item.trickplay if item is not None else None
        if item is None or tiles is None or raw_width != str(tiles.width):
            self._send_not_found()
        elif name == "tiles.m3u8":
            body = tiles.playlist(item.id, self.state.api_key).encode()
            self._send_body(200, body, content_type="application/x-mpegURL")
        elif (
            name.endswith(".jpg") and name[:-4].isdigit() and (sheet := tiles.tile(int(name[:-4])))
        ):
            self._send_body(200, sheet.read_bytes(), content_type="image/jpeg")
        else:
            self._send_not_found()

    def _public_info(self) -> dict[str, Any]:
        return {
            "LocalAddress": f"http://{self.server.server_address[0]!s}",
            "ServerName": "mirror stand-in",
            "Version": self.state.version,
            "ProductName": "Jellyfin Server",
            "Id": self.state.server_id,
            "StartupWizardCompleted": True,
        }

    def _answer_items(self, query: Mapping[str, str]) -> None:
        ids: list[str] | None = None
        if "ids" in query:
            parsed = [parse_guid(text) for text in query["ids"].split(",") if text]
            if any(value is None for value in parsed):
                self._send_text(400, "Error processing request.")
                return
            ids = [value for value in parsed if value is not None]
        parent_id = None
        if query.get("parentid"):
            parent_id = parse_guid(query["parentid"])
            if parent_id is None:
                self._send_text(400, "Error processing request.")
                return
        try:
            start = int(query.get("startindex") or 0)
            limit = int(query["limit"]) if query.get("limit") else None
        except ValueError:
            self._send_text(400, "Error processing request.")
            return
        missing = query.get("ismissing", "").lower()
        items = self.state.catalog.query(
            ids=ids,
            parent_id=parent_id,
            include_types=[t for t in query.get("includeitemtypes", "").split(",") if t],
            sort_by=query.get("sortby", "").split(","),
            exclude_location_types=[
                t for t in query.get("excludelocationtypes", "").split(",") if t
            ],
            is_missing={"true": True, "false": False}.get(missing),
            search_term=query.get("searchterm") or None,
        )
        page = items[start:] if limit is None else items[start : start + limit]
        fields = query.get("fields", "").split(",")
        self._send_json(
            {
                "Items": [item.to_json(fields, self.state.server_id) for item in page],
                "TotalRecordCount": len(items),
                "StartIndex": start,
            }
        )

    def _answer_download(self, raw_id: str) -> None:
        item_id = parse_guid(raw_id)
        if item_id is None:
            self._send_text(400, "Error processing request.")
            return
        item = self.state.catalog.item(item_id)
        if item is None:
            self._send_not_found()
            return
        if not item.has_file:
            self._send_text(400, "Error processing request.")
            return
        try:
            file = item.path.open("rb")
        except (FileNotFoundError, NotADirectoryError):
            # Every version: GetDownload's PhysicalFile throws FileNotFoundException (a
            # gone folder: DirectoryNotFoundException) for a file missing on disk, and
            # Jellyfin.Api/Middleware/ExceptionMiddleware.cs answers both with a plain
            # 404 while the item's metadata still answers (a share offline, a NAS asleep).
            self._send_text(404, "Error processing request.")
            return
        with file:
            stat = os.fstat(file.fileno())
            size, last_modified = stat.st_size, http_date(stat.st_mtime)
            range_header, if_range = self.headers.get("Range"), self.headers.get("If-Range")
            if item.symlink_bug:
                # The link's own size whatever Size says: real servers report the
                # target's size there (their scan resolves links), so pass
                # `reported_size` for the mismatch real libraries show.
                link_size = item.path.lstat().st_size
                self._answer_symlink_bug(file, link_size, range_header, last_modified)
                return
            byte_range: tuple[int, int] | None = None
            # ASP.NET compares If-Range as a date: bytes newer than it mean the client's
            # copy is stale, and an ETag (Jellyfin sends none) never matches: whole file.
            if range_header and (if_range is None or _not_newer(stat.st_mtime, if_range)):
                parsed = parse_byte_range(range_header, size)
                if parsed is False:
                    self._send_body(416, b"", {"Content-Range": f"bytes */{size}"})
                    return
                byte_range = parsed if isinstance(parsed, tuple) else None
            first, last = byte_range or (0, size - 1)
            self.send_response(206 if byte_range else 200)
            self.send_header("Content-Type", content_type_for(item.path))
            self.send_header("Content-Length", str(last - first + 1))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Last-Modified", last_modified)
            self.send_header("Content-Disposition", content_disposition(item.path))
            if byte_range:
                self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            self.end_headers()
            with self.state.faults.lock:
                send_buffer = self.state.faults.send_buffer
            if send_buffer:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
            started, sent = time.monotonic(), 0
            try:
                sent = self._send_file(file, first, last - first + 1)
            finally:
                status = 206 if byte_range else 200
                span = DownloadSpan(item_id, started, time.monotonic(), sent, status)
                self.state.record_span(span)

    def _answer_symlink_bug(
        self, file: Any, link_size: int, range_header: str | None, last_modified: str
    ) -> None:
        """Jellyfin 10.11.1-10.11.4 (#15279): the link's own length, and 500 on any range."""
        if range_header:
            self._send_text(500, "Error processing request.")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(link_size))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Last-Modified", last_modified)
        self.end_headers()
        self._send_file(file, 0, link_size)

    # download body ----------------------------------------------------------------
    def _send_file(self, file: Any, offset: int, length: int) -> int:
        """sendfile() in slices, so throttles, cuts and stalls apply between them; bytes sent."""
        faults = self.state.faults
        cut = faults.take_cut(length)
        sent = 0
        while sent < length:
            if not self._wait_while_stalled():
                return sent
            with faults.lock:
                rate = faults.throttle_bps
            size = min(length - sent, _CHUNK)
            if rate:
                size = min(size, max(1, rate // 20))
            if cut is not None:
                size = min(size, cut.n_bytes - sent)
                if size <= 0:
                    if cut.then is not None:
                        cut.then()
                    self._hang_up()
                    return sent
            # Counted before sending: a client holding the bytes always sees them counted.
            self.state.count_served(size)
            try:
                n = os.sendfile(self.connection.fileno(), file.fileno(), offset + sent, size)
            except OSError:
                n = 0
            self.state.count_served(n - size)
            if n == 0:
                self.close_connection = True
                return sent
            sent += n
            if rate and self.state.stopping.wait(n / rate):
                self._hang_up()
                return sent
        return sent

    def _wait_while_stalled(self) -> bool:
        """Block while downloads are stalled; False once the client or server gave up."""
        faults = self.state.faults
        while True:
            with faults.lock:
                if not faults.stalled:
                    return not self.state.stopping.is_set()
                faults.unstalled.wait(_POLL_S)
            if self.state.stopping.is_set() or self._client_gone():
                self._hang_up()
                return False

    def _hold_metadata(self) -> bool:
        """Say nothing while metadata is stalled; False once the client or server gave up."""
        faults = self.state.faults
        with faults.lock:
            faults.metadata_waiting += 1
        try:
            while True:
                with faults.lock:
                    if not faults.metadata_stalled:
                        return not self.state.stopping.is_set()
                    faults.unstalled.wait(_POLL_S)
                if self.state.stopping.is_set() or self._client_gone():
                    self._hang_up()
                    return False
        finally:
            with faults.lock:
                faults.metadata_waiting -= 1

    def _client_gone(self) -> bool:
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True
        return peeked == b""

    def _hang_up(self) -> None:
        """Drop the connection mid-answer, as a proxy cutting a long download does."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # plain answers ----------------------------------------------------------------
    def _send_failure(self, rule: FailRule) -> None:
        headers: dict[str, str] = {}
        if rule.retry_after is not None:
            headers["Retry-After"] = str(rule.retry_after)
        if 300 <= rule.status < 400:  # back to the same URL: a redirect loop
            headers["Location"] = self.path
            self._send_body(rule.status, b"", headers)
        elif rule.status == 503:
            # The start-up page: HTML, no Message header; 10.11 adds Retry-After.
            body = b"<!DOCTYPE html><html><body>Jellyfin is starting</body></html>"
            self._send_body(503, body, headers, "text/html; charset=utf-8")
        elif rule.status == 401:
            self._send_body(401, b"", headers)
        else:
            self._send_body(rule.status, b"Error processing request.", headers, "text/plain")

    def _send_not_found(self) -> None:
        problem = {
            "type": "https://tools.ietf.org/html/rfc9110#section-15.5.5",
            "title": "Not Found",
            "status": 404,
            "traceId": f"00-{uuid.uuid4().hex}-{secrets.token_hex(8)}-00",
        }
        body = json.dumps(problem).encode()
        self._send_body(404, body, content_type="application/problem+json; charset=utf-8")

    def _send_text(self, status: int, text: str) -> None:
        self._send_body(status, text.encode(), content_type="text/plain")

    def _send_json(self, data: Any) -> None:
        body = json.dumps(data, ensure_ascii=False).encode("utf-8")
        self._send_body(200, body, content_type="application/json; charset=utf-8")

    def _send_body(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(body)
