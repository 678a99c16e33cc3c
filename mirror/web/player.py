"""`GET /play/<item_id>`: a small page that plays a mirrored item straight from the bucket.

Buckets are private by default (MinIO, S3), so the page cannot just point a player at
`master.m3u8`: every object needs a presigned URL, and a presigned URL cannot be reached
through the playlists' relative URIs. So `mirror serve` serves the item's playlists
itself (read from S3, a few KiB each) and rewrites each media URI to a presigned URL
of its object: the video, audio and subtitle bytes go from the bucket to the browser
directly (byte ranges, CDN-able), never through `mirror serve`. The browser fetches
them cross-origin, hence the bucket's CORS rule (README). Those URLs are made for where
the browser reaches S3, MIRROR_S3_PUBLIC_URL when `mirror serve` itself uses an address
only it resolves (compose), and are plain for a public bucket (`link`, from wiring). The
same playlists in the bucket stay untouched: a public bucket or CDN can serve
`master.m3u8` as it is.

The page uses the browser's native HLS where it has one with audio-track switching
(Safari); elsewhere hls.js, from a pinned CDN URL with its integrity hash, or from a
local copy of the npm package when `MIRROR_HLSJS_PATH` names one (offline sites, tests).
"""

from __future__ import annotations

import html
import posixpath
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from mirror.domain.item import normalize_item_id
from mirror.domain.jobs import JobNotFound, JobRecord, Status
from mirror.domain.thumbnails import IMAGE_PLAYLIST_FILE_NAME, THUMBNAILS_DIR, TRACK_FILE_NAME

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# hls.js as published on npm; jsDelivr serves the npm tarball's bytes, so the hash of
# node_modules/hls.js/dist/hls.min.js is the integrity of this URL.
HLSJS_VERSION = "1.6.15"
HLSJS_CDN_URL = f"https://cdn.jsdelivr.net/npm/hls.js@{HLSJS_VERSION}/dist/hls.min.js"
HLSJS_INTEGRITY = "sha384-iZBI1/lW9u8FcBjxuQ8nPTsU7TXhZNtzkV8H3gQHSTgz+VYQoKWqGlBHqhO84alJ"
HLSJS_LOCAL_ROUTE = "/play-assets/hls.min.js"
ASSETS_ROUTE = "/play-assets/<name>"
# The page's own script and stylesheet: served files, so the CSP needs no inline code.
ASSETS = {"player.js": "text/javascript", "player.css": "text/css"}
PLAYLIST_CONTENT_TYPE = "application/vnd.apple.mpegurl"
_URI_ATTRIBUTE = re.compile(r'URI="([^"]+)"')
# The thumbnails' track, relative to the master (mirror.domain.thumbnails), and one cue's
# reference to its sheet: `<n>.jpg#xywh=x,y,w,h`.
THUMBNAIL_TRACK = f"{THUMBNAILS_DIR}/{TRACK_FILE_NAME}"
_SHEET_REFERENCE = re.compile(r"(\d{1,6}\.jpg)(#xywh=\d+,\d+,\d+,\d+)")
_SHEET_NAME = re.compile(r"\d{1,6}\.jpg")
PresignFn = Callable[[str], str]  # an object's key -> the URL the browser fetches it at


class ItemJobs(Protocol):
    def latest_for_item(self, item_id: str) -> JobRecord: ...


@dataclass(frozen=True, slots=True)
class PlayerAnswer:
    status: int
    body: bytes
    content_type: str
    cache_control: str = "no-store"
    csp: str | None = None  # the page's Content-Security-Policy


class Player:
    """Answers the player's page and the item's (rewritten) playlists."""

    def __init__(
        self,
        jobs: ItemJobs,
        client: S3Client,
        bucket: str,
        link: PresignFn,
        hlsjs_path: Path | None = None,
    ) -> None:
        self.jobs = jobs
        self.client = client  # reads the playlists, at the endpoint `mirror serve` uses
        self.bucket = bucket
        self.link = link  # an object's URL for the browser (mirror.s3.links, via wiring)
        self.hlsjs_path = hlsjs_path

    def page(self, raw_item_id: str) -> PlayerAnswer:
        """The HTML page, or 404 when the item has no playable mirror."""
        job, problem = self._playable(raw_item_id)
        if job is None:
            return _text(404, problem)
        name = (job.source or {}).get("path") or job.item_id
        script = (
            f'<script src="{HLSJS_LOCAL_ROUTE}"></script>'
            if self.hlsjs_path is not None
            else f'<script src="{HLSJS_CDN_URL}" integrity="{HLSJS_INTEGRITY}" '
            'crossorigin="anonymous"></script>'
        )
        template = (
            resources.files("mirror.web").joinpath("templates/player.html").read_text("utf-8")
        )
        body = (
            template.replace("{{title}}", html.escape(posixpath.basename(str(name))))
            .replace("{{hlsjs}}", script)
            # An attribute the page's script reads (the id is 32 hex chars).
            .replace("{{master}}", html.escape(f"/play/{job.item_id}/master.m3u8"))
        )
        return PlayerAnswer(200, body.encode(), "text/html; charset=utf-8", csp=self.csp)

    @cached_property
    def csp(self) -> str:
        """Our script and stylesheet, hls.js (local or its pinned CDN file), and requests to
        `mirror serve` (playlists) and the origin the media links point at (the bucket's as
        the browser reaches it: MIRROR_S3_PUBLIC_URL when set), also for the thumbnails'
        sheets."""
        hlsjs = "" if self.hlsjs_path is not None else f" {HLSJS_CDN_URL}"
        media = _origin(self.link("x"))
        return (
            f"default-src 'none'; script-src 'self'{hlsjs}; style-src 'self'; "
            f"connect-src 'self' {media}; media-src 'self' blob: {media}; worker-src blob:; "
            f"img-src 'self' {media}; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
        )

    def playlist(self, raw_item_id: str, name: str) -> PlayerAnswer:
        """A playlist of the item with every media URI presigned; 404 for anything else."""
        job, problem = self._playable(raw_item_id)
        if job is None or job.hls_key is None:
            return _text(404, problem)
        root = posixpath.dirname(job.hls_key)
        key = posixpath.normpath(posixpath.join(root, name))
        if name == THUMBNAIL_TRACK:
            return self._thumbnail_track(key)
        if not name.endswith(".m3u8") or not key.startswith(root + "/"):
            return _text(404, "not a playlist of this item")
        text, failed = self._read(key)
        if failed is not None:
            return failed
        allowed = media_keys(job)
        if key == f"{root}/{THUMBNAILS_DIR}/{IMAGE_PLAYLIST_FILE_NAME}":
            # The thumbnails' image playlist: its sheets, which no row column lists.
            allowed |= thumbnail_sheet_keys(text, posixpath.dirname(key))
        rewritten = rewrite_playlist(text, posixpath.dirname(key), self.link, allowed)
        return PlayerAnswer(200, rewritten.encode(), PLAYLIST_CONTENT_TYPE)

    def _thumbnail_track(self, key: str) -> PlayerAnswer:
        """The scrubbing thumbnails' WebVTT track, its sheets presigned (404: none made)."""
        text, failed = self._read(key)
        if failed is not None:
            return failed
        return PlayerAnswer(200, rewrite_thumbnail_track(text, key, self.link).encode(), "text/vtt")

    def _read(self, key: str) -> tuple[str, PlayerAnswer | None]:
        try:
            text = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read().decode()
        except ClientError:
            return "", _text(404, f"{key} is not in the bucket")
        except BotoCoreError as error:
            return "", _text(502, f"S3 did not answer: {error}")
        return text, None

    def hlsjs(self) -> PlayerAnswer:
        if self.hlsjs_path is None:
            return _text(404, "hls.js comes from its CDN (MIRROR_HLSJS_PATH is not set)")
        body = self.hlsjs_path.read_bytes()
        return PlayerAnswer(200, body, "text/javascript", "public, max-age=86400")

    def asset(self, name: str) -> PlayerAnswer:
        """The page's own script or stylesheet."""
        if name not in ASSETS:
            return _text(404, "no such file")
        body = resources.files("mirror.web").joinpath("templates", name).read_bytes()
        return PlayerAnswer(200, body, ASSETS[name], "max-age=300")

    def _playable(self, raw_item_id: str) -> tuple[JobRecord | None, str]:
        try:
            job = self.jobs.latest_for_item(normalize_item_id(raw_item_id))
        except (ValueError, JobNotFound) as error:
            return None, str(error)
        if job.status != Status.DONE or not job.hls_key:
            return None, (
                f"item {job.item_id} has no playable mirror (latest job {job.status}; "
                "mirrored with MIRROR_OUTPUT_FORMAT=hls?)"
            )
        return job, ""


def media_keys(job: JobRecord) -> frozenset[str]:
    """The objects the row lists under the item's own prefix: the only keys presigned."""
    assert job.hls_key is not None
    prefix = posixpath.dirname(job.hls_key) + "/"
    listed = [job.video_key, *(entry.get("key") for entry in job.audio_keys or ())]
    listed += [entry.get("key") for entry in job.subtitle_keys or ()]
    return frozenset(k for k in listed if isinstance(k, str) and k.startswith(prefix))


def rewrite_playlist(
    text: str, directory: str, presign: PresignFn, allowed: Collection[str]
) -> str:
    """Media URIs (segments, EXT-X-MAP) become presigned URLs; playlist URIs stay relative,
    so the player keeps asking `mirror serve` for them. Pure but for `presign`.

    Lines are split on LF only (RFC 8216; CR before it dropped): `str.splitlines()` also
    splits on U+2028 and friends inside a quoted title, and the rest of the title became a
    "URI" that got presigned. A URI whose key is not in `allowed` (the objects the job row
    lists) is never presigned: its line is left out.
    """

    def resolve(uri: str) -> str | None:
        if uri.endswith(".m3u8") or "://" in uri:
            return uri
        key = posixpath.normpath(posixpath.join(directory, uri))
        return presign(key) if key in allowed else None

    lines = []
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if line.startswith("#EXT-X-MAP:"):
            uris = [resolve(uri) for uri in _URI_ATTRIBUTE.findall(line)]
            if None in uris:
                continue
            line = _URI_ATTRIBUTE.sub(_replace_each(uris), line)
        elif line and not line.startswith("#"):
            resolved = resolve(line)
            if resolved is None:
                continue
            line = resolved
        lines.append(line)
    return "\n".join(lines).rstrip("\n") + "\n"


def thumbnail_sheet_keys(text: str, directory: str) -> frozenset[str]:
    """The keys of the bare sheet names (`<n>.jpg`) an image playlist lists."""
    names = (line.strip() for line in text.split("\n"))
    return frozenset(f"{directory}/{name}" for name in names if _SHEET_NAME.fullmatch(name))


def rewrite_thumbnail_track(text: str, key: str, presign: PresignFn) -> str:
    """Each cue's sheet (`0.jpg#xywh=...`, beside the track) becomes its presigned URL,
    the `#xywh=` kept. Only a bare sheet name is presigned (a sheet of this item's
    thumbnails, nothing else); any other reference is left out. Pure but for `presign`."""
    directory = posixpath.dirname(key)
    lines = []
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if "#xywh=" in line:
            match = _SHEET_REFERENCE.fullmatch(line)
            if match is None:
                continue
            line = presign(f"{directory}/{match[1]}") + match[2]
        lines.append(line)
    return "\n".join(lines)


def _replace_each(uris: list[str | None]) -> Callable[[re.Match[str]], str]:
    replacements = iter(uris)
    return lambda match: f'URI="{next(replacements)}"'


def _origin(url: str) -> str:
    """`https://bucket.s3.example:9000` of a presigned URL: what the page may fetch from."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _text(status: int, message: str) -> PlayerAnswer:
    return PlayerAnswer(status, (message + "\n").encode(), "text/plain; charset=utf-8")
