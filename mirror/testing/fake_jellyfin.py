"""An in-memory `MediaServer` (the pipeline's Jellyfin port) for in-process tests.

It holds the Jellyfin stand-in's own `Catalog` (same `add_item` options: sidecars,
unprobed items, disc images, virtual items, other versions) and answers `get_item` with
the very JSON the stand-in serves, parsed by the client's own parser, so an item looks
the same to the pipeline whichever way it arrives. Downloads copy the item's local file,
resuming what `dest` already holds if the file is still the version those bytes came
from (its size and mtime, remembered per `dest` like the client's record), and can be
cut, stalled, throttled or failed.
tests/integration/test_fake_conformance.py runs one scenario on this and on the stand-in
through the real JellyfinClient.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from email.utils import formatdate
from pathlib import Path
from typing import Any

from mirror.demo.stand_in.catalog import Catalog
from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.item import MediaItem, MediaStream, ServedFile, normalize_item_id
from mirror.domain.progress import AbortSignal, Progress, ProgressCallback
from mirror.domain.thumbnails import TrickplayTiles
from mirror.jellyfin.client import ITEM_FIELDS
from mirror.jellyfin.failures import file_missing, size_mismatch
from mirror.jellyfin.models import parse_media_item

CHUNK = 64 * 1024


class InMemoryJellyfin:
    """A `MediaServer` over local files. Faults, like the stand-in's: `cut_after`,
    `stall_downloads`, `stall_metadata`, `throttle`, `fail_downloads`; observations:
    `download_requests` (item ids, one per request), `range_requests` and `bytes_served`."""

    def __init__(self, *, retry_attempts: int = 5, ffmpeg_path: str | None = None) -> None:
        self.catalog = Catalog()
        self.server_id = uuid.uuid4().hex
        self.retry_attempts = retry_attempts
        self.ffmpeg_path = ffmpeg_path
        self.download_requests: list[str] = []
        self.range_requests: list[tuple[str, int, int]] = []  # fetch_range: (item, start, length)
        self.metadata_requests: list[str] = []
        self.bytes_served = 0
        self._lock = threading.Lock()
        self._cuts: list[list[int]] = []  # [after n bytes, times left]
        self._failures: list[tuple[BaseException, int]] = []  # (error, times left)
        self._throttle_bps: int | None = None
        self._unstalled = threading.Event()
        self._unstalled.set()
        self._metadata_unstalled = threading.Event()
        self._metadata_unstalled.set()
        self.metadata_waiting = 0
        self._versions: dict[Path, tuple[int, int]] = {}  # dest -> (size, mtime) of its bytes

    # -- the catalog (the stand-in's options) ---------------------------------------------

    def add_item(
        self,
        path: Path,
        *,
        name: str,
        streams: Sequence[MediaStream | Mapping[str, Any]],
        duration_s: float,
        **options: Any,
    ) -> str:
        return self.catalog.add_item(
            path, name=name, streams=streams, duration_s=duration_s, **options
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
        return self.catalog.add_episode(
            path,
            series=series,
            season=season,
            episode=episode,
            name=name,
            streams=streams,
            duration_s=duration_s,
            **options,
        )

    def add_folder(self, name: str, *, item_type: str = "Folder") -> str:
        return self.catalog.add_folder(name, item_type=item_type)

    def mark_probed(self, item_id: str, probed: bool = True) -> None:
        self.catalog.mark_probed(item_id, probed)

    # -- faults ---------------------------------------------------------------------------

    def cut_after(self, n_bytes: int, times: int = 1) -> None:
        """Drop the next `times` download bodies longer than `n_bytes` after `n_bytes`."""
        with self._lock:
            self._cuts.append([n_bytes, times])

    def fail_downloads(self, error: BaseException, times: int = 1) -> None:
        """The next `times` download requests raise `error` (the client's own kinds)."""
        with self._lock:
            self._failures.append((error, times))

    def throttle(self, bytes_per_s: int | None) -> None:
        self._throttle_bps = bytes_per_s or None

    def stall_downloads(self, stalled: bool) -> None:
        """Stalled: download bodies send nothing until un-stalled (or the abort fires)."""
        if stalled:
            self._unstalled.clear()
        else:
            self._unstalled.set()

    def stall_metadata(self, stalled: bool) -> None:
        """Stalled: `get_item` answers nothing until un-stalled."""
        if stalled:
            self._metadata_unstalled.clear()
        else:
            self._metadata_unstalled.set()

    # -- the port -------------------------------------------------------------------------

    def get_item(self, item_id: str) -> MediaItem:
        item_id = normalize_item_id(item_id)
        with self._lock:
            self.metadata_requests.append(item_id)
            self.metadata_waiting += 1
        try:
            self._metadata_unstalled.wait()
        finally:
            with self._lock:
                self.metadata_waiting -= 1
        entry = self.catalog.item(item_id)
        if entry is None:
            raise PermanentError(f"item {item_id} not found in Jellyfin")
        return parse_media_item(entry.to_json(ITEM_FIELDS.split(","), self.server_id))

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
        """Copy the item's file to `dest` from the bytes already there (if of the same
        version), retrying a cut body like the client does (resuming)."""
        item_id = normalize_item_id(item_id)
        entry = self.catalog.item(item_id)
        if entry is None:
            raise PermanentError(f"item {item_id} not found in Jellyfin")
        if not entry.has_file:
            raise PermanentError(f"Jellyfin cannot download item {item_id}: it is no file")
        source = entry.path
        try:
            total = source.stat().st_size
        except FileNotFoundError:  # a known item whose file is gone: the client's answer
            raise file_missing(item_id) from None
        if expected_size is not None and total != expected_size:
            with self._lock:
                self.download_requests.append(item_id)
            raise size_mismatch(item_id, total, expected_size)
        failures = 0
        while True:
            abort.raise_if_set()
            try:
                size = self._one_request(
                    item_id, source, dest, on_progress, abort, on_write, on_restart
                )
                break
            except _Cut as cut:
                failures += 1
                if failures >= self.retry_attempts:
                    raise TransientError(str(cut)) from None
        return ServedFile(size, last_modified=formatdate(source.stat().st_mtime, usegmt=True))

    def fetch_range(self, item_id: str, start: int, length: int) -> bytes | None:
        """Bytes [start, start + length) of the item's file, as a 206 would carry them."""
        entry = self.catalog.item(normalize_item_id(item_id))
        if entry is None or not entry.has_file:
            raise PermanentError(f"item {item_id} not found in Jellyfin")
        with self._lock:
            self.range_requests.append((item_id, start, length))
        with entry.path.open("rb") as file:
            file.seek(start)
            body = file.read(length)
        return body if len(body) == length else None

    def fetch_trickplay_tile(self, item_id: str, tiles: TrickplayTiles, index: int) -> bytes:
        """Sheet `index` of the trickplay tiles the item's source has (the catalog's)."""
        entry = self.catalog.item(normalize_item_id(tiles.media_source_id or item_id))
        trickplay = entry.trickplay if entry is not None else None
        sheet = trickplay.tile(index) if trickplay and trickplay.width == tiles.width else None
        if sheet is None:
            raise PermanentError(f"item {item_id} not found in Jellyfin (trickplay sheet {index})")
        return sheet.read_bytes()

    def fetch_subtitle(self, item_id: str, media_source_id: str, index: int) -> bytes:
        """WebVTT of one subtitle stream by Jellyfin's Index (sidecars first), via ffmpeg."""
        entry = self.catalog.item(normalize_item_id(item_id))
        listed = entry.media_streams() if entry is not None else []
        stream = next((st for st in listed if st.get("Index") == index), None)
        if entry is None or stream is None or stream.get("Type") != "Subtitle":
            raise PermanentError(f"item {item_id} not found in Jellyfin")
        if stream.get("IsExternal"):
            argv = ["-i", str(stream["Path"])]
        else:
            own = [st for st in listed if not st.get("IsExternal")]
            argv = ["-i", str(entry.path), "-map", f"0:{own.index(stream)}"]
        ffmpeg = self.ffmpeg_path or _ffmpeg()
        result = subprocess.run(
            [ffmpeg, "-nostdin", "-loglevel", "error", *argv, "-f", "webvtt", "pipe:1"],
            capture_output=True,
            check=True,
        )
        return result.stdout

    # -- inside ---------------------------------------------------------------------------

    def _one_request(
        self,
        item_id: str,
        source: Path,
        dest: Path,
        on_progress: ProgressCallback,
        abort: AbortSignal,
        on_write: Callable[[int], None] | None,
        on_restart: Callable[[], None] | None,
    ) -> int:
        with self._lock:
            self.download_requests.append(item_id)
            error = self._take_failure()
        if error is not None:
            raise error
        stat = source.stat()
        total, version = stat.st_size, (stat.st_size, stat.st_mtime_ns)
        offset = dest.stat().st_size if dest.exists() else 0
        if offset and self._versions.get(dest) != version:  # another file: start over
            dest.unlink()
            offset = 0
            if on_restart is not None:
                on_restart()
        self._versions[dest] = version
        if offset and on_write is not None:
            on_write(offset)  # the resumed bytes are current
        cut_at = self._take_cut(total - offset)
        sent = 0
        started = time.monotonic()
        on_progress(Progress("download", bytes_done=offset, bytes_total=total))
        with source.open("rb") as reader, dest.open("ab") as writer:
            reader.seek(offset)
            while True:
                while not self._unstalled.wait(0.05):
                    abort.raise_if_set()
                abort.raise_if_set()
                want = CHUNK if cut_at is None else min(CHUNK, cut_at - sent)
                chunk = reader.read(want)
                if not chunk:
                    break
                writer.write(chunk)
                sent += len(chunk)
                if on_write is not None:  # a reader of the growing file waits for this
                    writer.flush()
                    on_write(offset + sent)
                with self._lock:
                    self.bytes_served += len(chunk)
                on_progress(Progress("download", bytes_done=offset + sent, bytes_total=total))
                if cut_at is not None and sent >= cut_at:
                    writer.flush()
                    raise _Cut(f"Jellyfin closed the download of item {item_id} early")
                self._pace(sent, started, abort)
        return offset + sent

    def _pace(self, sent: int, started: float, abort: AbortSignal) -> None:
        rate = self._throttle_bps
        if rate is None:
            return
        ahead = sent / rate - (time.monotonic() - started)
        if ahead > 0 and abort.wait(ahead):
            abort.raise_if_set()

    def _take_failure(self) -> BaseException | None:
        while self._failures:
            error, times = self._failures[0]
            if times <= 1:
                self._failures.pop(0)
            else:
                self._failures[0] = (error, times - 1)
            return error
        return None

    def _take_cut(self, body: int) -> int | None:
        with self._lock:
            for cut in self._cuts:
                if cut[1] > 0 and body > cut[0]:
                    cut[1] -= 1
                    return cut[0]
        return None


class _Cut(Exception):
    """A body that ended early: the client retries it with a range request."""


def _ffmpeg() -> str:
    import imageio_ffmpeg

    return str(imageio_ffmpeg.get_ffmpeg_exe())
