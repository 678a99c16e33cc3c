"""A real HTTP server answering like Jellyfin, for tests and the demo.

It speaks the slice of the API mirror uses exactly as ../shared/jellyfin/ describes it
(status codes, headers, PascalCase JSON, Range/If-Range on downloads), and can be told
to misbehave the way real deployments do: slow links, proxies that cut long downloads,
a server that is still starting, a download that hangs. Faults can be set while it runs.

Standalone (for the demo or another process's fixture):
    python -m mirror.demo.stand_in.server --media movie.mkv --api-key KEY --port 8096
prints one JSON line with the url, key and item ids, then serves until interrupted.
"""

from __future__ import annotations

import argparse
import json
import secrets
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from mirror.demo.stand_in.catalog import Catalog
from mirror.demo.stand_in.handler import (
    Cut,
    DownloadSpan,
    FailRule,
    RequestRecord,
    StandInHTTPServer,
    StandInState,
)
from mirror.demo.stand_in.versions import strm_is_remote, strm_protocol
from mirror.demo.stand_in.webhook import WebhookPlugin
from mirror.domain.item import MediaStream

__all__ = ["JellyfinStandIn", "most_at_once"]


class JellyfinStandIn:
    """A Jellyfin look-alike on 127.0.0.1 (port 0 by default); start(), then use `.url`."""

    def __init__(
        self, api_key: str | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._state = StandInState(api_key=api_key or secrets.token_hex(16))
        self._address = (host, port)
        self._server: StandInHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._webhook: WebhookPlugin | None = None

    # life cycle -------------------------------------------------------------------
    def start(self) -> JellyfinStandIn:
        self._state.stopping.clear()
        self._server = StandInHTTPServer(self._address, self._state)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # stop() waits for one poll
            name="jellyfin-stand-in",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and hang up on every open connection (stalled ones included)."""
        state = self._state
        state.stopping.set()
        with state.faults.lock:
            state.faults.unstalled.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        state.hang_up_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> JellyfinStandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the stand-in is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def api_key(self) -> str:
        return self._state.api_key

    @property
    def server_id(self) -> str:
        return self._state.server_id

    @property
    def catalog(self) -> Catalog:
        return self._state.catalog

    # catalog ----------------------------------------------------------------------
    def add_library(self, name: str, collection_type: str | None = "movies") -> str:
        """A library (virtual folder); returns its id, the parentId for listings."""
        return self._state.catalog.add_library(name, collection_type)

    def add_item(
        self,
        path: Path,
        *,
        name: str,
        streams: Sequence[MediaStream | Mapping[str, Any]],
        duration_s: float,
        **options: Any,
    ) -> str:
        """Serve `path` as an item; returns its 32-hex id.

        `streams` are the file's own streams (raw Jellyfin MediaStreams JSON is served
        verbatim, Index shifted after any `sidecars`). Without a library the item goes to
        the first one ("Movies", made if needed). Options, as `Catalog.add_item`:
        `downloadable=False` answers /Download with 400; `reported_size` overrides
        MediaSources Size; `sidecars` lists external files first, as Jellyfin does;
        `probed=False` serves no MediaStreams until `mark_probed`; `video_type` Iso /
        Dvd / BluRay; `location_type="Virtual"`; `protocol="Http"` (a .strm);
        `other_versions`; `omit_size`; `symlink_bug` (with `version = "10.11.3"`).
        """
        return self._state.catalog.add_item(
            path, name=name, streams=streams, duration_s=duration_s, **options
        )

    def add_strm(self, path: Path, target: str, *, name: str, **options: Any) -> str:
        """Write a `.strm` at `path` holding `target` and serve it as this version lists
        one (see versions.py): from 10.11.7 a local `target` is Protocol File, not remote.
        /Download serves the .strm's text, as Jellyfin's does."""
        path.write_text(target + "\n", encoding="utf-8")
        return self._state.catalog.add_item(
            path,
            name=name,
            streams=[],
            duration_s=0.0,
            protocol=strm_protocol(target),
            strm_target=target,
            strm_remote=strm_is_remote(self.version, target),
            **options,
        )

    def add_episode(
        self,
        path: Path,
        *,
        series: str,
        season: int,
        episode: int,
        name: str,
        streams: Sequence[MediaStream | Mapping[str, Any]],
        duration_s: float,
        **options: Any,
    ) -> str:
        """An Episode in its Series and Season (made on first use), with SeriesName,
        SeriesId, SeasonId, ParentIndexNumber and IndexNumber as Jellyfin lists them."""
        return self._state.catalog.add_episode(
            path,
            series=series,
            season=season,
            episode=episode,
            name=name,
            streams=streams,
            duration_s=duration_s,
            **options,
        )

    def add_folder(
        self,
        name: str,
        *,
        item_type: str = "Folder",
        library_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """A Series, Season, BoxSet or Folder: listed by /Items, never downloadable.
        A season names its series in `extra` ({"SeriesId": ..., "SeriesName": ...}), an
        episode both in add_item's `extra`: a parentId listing of either finds it."""
        return self._state.catalog.add_folder(
            name, item_type=item_type, library_id=library_id, extra=extra
        )

    def remove_item(self, item_id: str) -> None:
        """Delete the item, as Jellyfin does after its file is gone and the library rescanned."""
        self._state.catalog.remove_item(item_id)

    def connect_webhook(self, plugin: WebhookPlugin | None) -> None:
        """Deliver item changes through this webhook plugin (None: no plugin installed)."""
        self._webhook = plugin

    def delete_item(self, item_id: str) -> list[str]:
        """Delete as Jellyfin's "Delete media item" does: a folder with everything under it;
        the plugin hears of it as this Jellyfin version reports it (see webhook.py).
        Returns the ids deleted, descendants first."""
        removed = self._state.catalog.delete_item(item_id)
        if self._webhook is not None:
            self._webhook.items_removed(removed, self.version)
        return [item.id for item in removed]

    def replace_file(self, item_id: str, path: Path) -> None:
        """The item's file replaced in place: the id stays (Jellyfin derives it from the
        path), the new file is served, and the plugin queues an ItemDeleted and an
        ItemAdded for the same id (its two queues: either can be sent first)."""
        old = self._state.catalog.item(item_id)
        new = self._state.catalog.replace_file(item_id, path)
        if self._webhook is not None and old is not None:
            self._webhook.items_removed([old], self.version)
            self._webhook.item_added(new)

    def scan(self, item_id: str) -> None:
        """Jellyfin's database takes the file's size and date now; the listing keeps them
        until the next scan (every version: MediaSources Size and ETag are stored)."""
        self.catalog.scan(item_id)

    def mark_probed(self, item_id: str, probed: bool = True) -> None:
        """Jellyfin's ffprobe ran: the item's MediaStreams and RunTimeTicks appear."""
        self._state.catalog.mark_probed(item_id, probed)

    @property
    def version(self) -> str:
        return self._state.version

    @version.setter
    def version(self, value: str) -> None:
        self._state.version = value

    # faults -----------------------------------------------------------------------
    def throttle(self, bytes_per_s: int | None) -> None:
        """Send download bodies at about this rate (None: as fast as possible)."""
        with self._state.faults.lock:
            self._state.faults.throttle_bps = bytes_per_s or None

    def limit_send_buffer(self, n_bytes: int | None) -> None:
        """Give download answers a send buffer of about `n_bytes` (None: the kernel's).

        Linux lets a socket buffer megabytes, so a server finishes sending long before
        a slow reader has read; with a small buffer the server's own timing
        (`download_spans`) follows the reader's pace, as a rate limit test needs.
        """
        with self._state.faults.lock:
            self._state.faults.send_buffer = n_bytes or None

    def cut_after(
        self, n_bytes: int, times: int = 1, *, then: Callable[[], None] | None = None
    ) -> None:
        """Drop the connection after `n_bytes` of a download body, for `times` downloads.

        Only bodies longer than `n_bytes` are cut (and use up one of the `times`).
        `then` runs at each cut, before the connection drops: a file replaced there is
        what every later request finds.
        """
        with self._state.faults.lock:
            self._state.faults.cuts.append(Cut(n_bytes, times, then))

    def fail_next(
        self,
        status: int,
        times: int = 1,
        retry_after: int | None = None,
        path_prefix: str | None = None,
    ) -> None:
        """Answer the next `times` requests (under `path_prefix`, if given) with `status`.

        Checked before authentication, like a server that is still starting. A 3xx
        status redirects to the same URL: with `times` above 20, a redirect loop.
        """
        with self._state.faults.lock:
            self._state.faults.failures.append(FailRule(status, times, retry_after, path_prefix))

    def stall_downloads(self, stalled: bool) -> None:
        """Stalled: download answers send headers, then nothing until un-stalled."""
        faults = self._state.faults
        with faults.lock:
            faults.stalled = stalled
            faults.unstalled.notify_all()

    def stall_metadata(self, stalled: bool) -> None:
        """Stalled: item queries (`GET /Items`) get no answer at all until un-stalled."""
        faults = self._state.faults
        with faults.lock:
            faults.metadata_stalled = stalled
            faults.unstalled.notify_all()

    @property
    def metadata_requests_held(self) -> int:
        """Item queries waiting on `stall_metadata` right now."""
        with self._state.faults.lock:
            return self._state.faults.metadata_waiting

    # observations -----------------------------------------------------------------
    @property
    def downloads_bytes_served(self) -> int:
        """Download body bytes handed to the kernel so far, over all requests."""
        with self._state.lock:
            return self._state.bytes_served

    @property
    def requests(self) -> list[RequestRecord]:
        """Every answered request so far, oldest first."""
        with self._state.lock:
            return list(self._state.log)

    def download_spans(self) -> list[DownloadSpan]:
        """Every download body sent so far (start and end, server side), oldest first."""
        with self._state.lock:
            return list(self._state.download_spans)

    def download_requests(self) -> list[RequestRecord]:
        return [r for r in self.requests if r.path.lower().endswith("/download")]

    def clear_request_log(self) -> None:
        with self._state.lock:
            self._state.log.clear()
            self._state.download_spans.clear()


def most_at_once(spans: Sequence[DownloadSpan]) -> int:
    """The most downloads that were being sent at the same moment.

    A span that ends exactly when another starts does not overlap it (ends sort first).
    """
    events = sorted([(s.started, 1) for s in spans] + [(s.ended, -1) for s in spans])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def main(argv: Sequence[str] | None = None) -> None:
    """Serve media files as Jellyfin items until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--media", type=Path, action="append", default=[], help="file to serve")
    parser.add_argument("--api-key", default=None, help="key clients must send (random)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--library", default="Movies")
    parser.add_argument(
        "--catalog",
        type=Path,
        help='JSON list of {"path", "name", "duration_s", "type", "streams": [MediaStreams JSON]}',
    )
    args = parser.parse_args(argv)
    standin = JellyfinStandIn(args.api_key, host=args.host, port=args.port).start()
    library_id = standin.add_library(args.library)
    entries: list[dict[str, Any]] = [{"path": str(path)} for path in args.media]
    if args.catalog:
        entries += json.loads(args.catalog.read_text(encoding="utf-8"))
    items = {
        entry["path"]: standin.add_item(
            Path(entry["path"]),
            name=entry.get("name") or Path(entry["path"]).stem,
            streams=entry.get("streams", []),
            duration_s=float(entry.get("duration_s", 0.0)),
            item_type=entry.get("type", "Movie"),
            library_id=library_id,
        )
        for entry in entries
    }
    print(json.dumps({"url": standin.url, "api_key": standin.api_key, "items": items}), flush=True)
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    done.wait()
    standin.stop()


if __name__ == "__main__":
    main()
