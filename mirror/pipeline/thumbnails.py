"""The scrubbing thumbnails' objects: sheets and track, beside the item's other outputs.

Jellyfin's own trickplay tiles, when it made them for the mirrored source, are copied
(a few requests of about a MiB each, before the download: Jellyfin's CPU was spent
already, and the mirror shows what Jellyfin shows); should a sheet not come, ffmpeg makes
them instead. Otherwise ffmpeg writes the sheets during the run
(mirror.transcode.thumbnails). Either way the track is written from the grid, and every
file joins the outputs' upload, before the playlists (the master stays the last object
before the manifest). The manifest's `thumbnails` lists them with size and SHA-256,
which is how `mirror verify` knows them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.item import MediaItem
from mirror.domain.logs import get_logger
from mirror.domain.objects import FileDigest, Upload, output_key
from mirror.domain.thumbnails import (
    IMAGE_PLAYLIST_FILE_NAME,
    SHEET_CONTENT_TYPE,
    THUMBNAILS_DIR,
    TRACK_CONTENT_TYPE,
    TRACK_FILE_NAME,
    ThumbnailGrid,
    sheet_file_name,
    thumbnail_track,
    thumbnails_json,
)
from mirror.hls.image_playlist import image_playlist, image_stream_line
from mirror.hls.playlists import PLAYLIST_CONTENT_TYPE
from mirror.transcode.outputs import TranscodePlan
from mirror.transcode.thumbnails import sheet_paths, write_thumbnail_track

log = get_logger("mirror.thumbnails")


@dataclass(frozen=True, slots=True)
class ThumbnailUploads:
    """The sheets and the track of one item, and the grid the track describes."""

    grid: ThumbnailGrid
    uploads: tuple[Upload, ...]  # the sheets in order, the track last
    origin: str  # `ffmpeg` (made in the run) or `jellyfin` (its trickplay tiles)

    @property
    def track_key(self) -> str:
        return self.uploads[-1].key

    def manifest_json(self, digests: Mapping[str, FileDigest]) -> dict[str, Any]:
        """The manifest's `thumbnails`, every object with its size and SHA-256."""
        objects = [{"key": u.key, **digests[u.key].facts()} for u in self.uploads]
        return thumbnails_json(self.grid, self.track_key, self.origin, objects)


def copy_trickplay(
    item: MediaItem,
    directory: Path,
    fetch: Callable[[int], bytes],
    prefix: str,
) -> ThumbnailUploads | None:
    """Jellyfin's trickplay sheets of `item` fetched into `directory`, with the track;
    None when it has none, or a sheet did not come (then ffmpeg makes the thumbnails)."""
    tiles = item.trickplay
    if tiles is None:
        return None
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    grid = tiles.grid
    sheets = []
    try:
        for index in range(grid.sheets):
            sheet = directory / sheet_file_name(index)
            sheet.write_bytes(fetch(index))
            sheets.append(sheet)
    except (PermanentError, TransientError) as error:
        log.warning("Jellyfin's trickplay tiles of %s not copied, making them: %s", item.id, error)
        return None
    track = directory / TRACK_FILE_NAME
    track.write_text(thumbnail_track(grid, item.duration_s), "utf-8")
    return ThumbnailUploads(grid, _uploads(prefix, item.id, sheets, track), "jellyfin")


def made_thumbnails(
    plan: TranscodePlan, prefix: str, item_id: str, duration_s: float | None
) -> ThumbnailUploads | None:
    """The sheets ffmpeg made in the run, with their track written now; None when off,
    or when the run made no sheet (then the item is mirrored without thumbnails: they
    are a help for scrubbing, not part of the media)."""
    if plan.thumbnails is None:
        return None
    try:
        grid = write_thumbnail_track(plan.thumbnails, duration_s)
    except PermanentError as error:
        log.warning("%s: mirrored without thumbnails", error)
        return None
    sheets = sheet_paths(plan.thumbnails)[: grid.sheets]
    track = plan.thumbnails.directory / TRACK_FILE_NAME
    return ThumbnailUploads(grid, _uploads(prefix, item_id, sheets, track), "ffmpeg")


def link_image_stream(thumbnails: ThumbnailUploads, master: Upload) -> ThumbnailUploads:
    """With format hls: the sheets' image playlist beside the track, named in the master
    (`EXT-X-IMAGE-STREAM-INF`, appended to its file); the thumbnails with that playlist."""
    sheets = [u for u in thumbnails.uploads if u.content_type == SHEET_CONTENT_TYPE]
    directory = sheets[0].path.parent
    grid = thumbnails.grid
    playlist = directory / IMAGE_PLAYLIST_FILE_NAME
    playlist.write_text(image_playlist(grid, grid.count * grid.interval_s), "utf-8")
    per_sheet_s = grid.per_sheet * grid.interval_s
    peak = max(round(u.path.stat().st_size * 8 / per_sheet_s) for u in sheets)
    uri = f"{THUMBNAILS_DIR}/{IMAGE_PLAYLIST_FILE_NAME}"
    with master.path.open("a", encoding="utf-8") as text:
        text.write(image_stream_line(grid, peak, uri) + "\n")
    key = master.key.rsplit("/", 1)[0] + "/" + uri
    upload = Upload(playlist, key, PLAYLIST_CONTENT_TYPE)
    return replace(thumbnails, uploads=(*thumbnails.uploads[:-1], upload, thumbnails.uploads[-1]))


def _uploads(prefix: str, item_id: str, sheets: Sequence[Path], track: Path) -> tuple[Upload, ...]:
    def key(name: str) -> str:
        return output_key(prefix, item_id, f"{THUMBNAILS_DIR}/{name}")

    uploads = [Upload(path, key(path.name), SHEET_CONTENT_TYPE) for path in sheets]
    return (*uploads, Upload(track, key(TRACK_FILE_NAME), TRACK_CONTENT_TYPE))
