"""Which Jellyfin items are one media file that mirror can copy, and what the others are.

Jellyfin lists more than files: `.strm` links to remote streams, disc images and folder
rips, missing episodes it only knows from metadata, and folders. Downloading those is at
best wasted (a whole ISO that ffmpeg then cannot read) and at worst useless (a `.strm`
is a few bytes of URL), so both the pipeline and the library sweep ask here first.
Pure functions over the facts Jellyfin's JSON gives; no I/O.
"""

from __future__ import annotations

from typing import Protocol

from mirror.domain.durations import format_duration
from mirror.domain.errors import NotReady, PermanentError
from mirror.domain.item import MediaItem

WAITING_FOR_PROBE = "waiting for Jellyfin to probe"

# Jellyfin's VideoType values that are not one plain video file.
DISC_KINDS = {
    "Iso": "ISO image",
    "Dvd": "DVD folder",
    "BluRay": "Blu-ray folder",
}

# Why each kind cannot be mirrored, for the job's error (keys: the start of the kind).
_WHY = {
    "folder": "it holds other items, not media of its own (mirror its episodes or movies)",
    "virtual item": "Jellyfin knows it only from metadata; there is no file to download",
    ".strm link": (
        "Jellyfin plays it from the URL or path written in it; /Download would only serve "
        "the link text"
    ),
    "ISO image": "a disc image, not one video file ffmpeg can read",
    "DVD folder": "a folder rip Jellyfin cannot serve as one file",
    "Blu-ray folder": "a folder rip Jellyfin cannot serve as one file",
}


STRM_CONTAINER = "strm"


class SourceFacts(Protocol):
    """What Jellyfin says about an item's kind (MediaItem and ItemSummary both have it)."""

    @property
    def path(self) -> str | None: ...
    @property
    def container(self) -> str | None: ...

    @property
    def type(self) -> str: ...
    @property
    def is_folder(self) -> bool: ...
    @property
    def location_type(self) -> str | None: ...
    @property
    def protocol(self) -> str | None: ...
    @property
    def is_remote(self) -> bool: ...
    @property
    def video_type(self) -> str | None: ...


def non_file_kind(item: SourceFacts) -> str | None:
    """What the item is when it is not one media file (".strm link", "ISO image", ...).

    None for a plain file. Checked in order of certainty: a folder or a virtual item has
    no file at all, whatever else its fields say.
    """
    if item.is_folder:
        return f"folder ({item.type})"
    if item.location_type == "Virtual":
        return "virtual item (missing episode)" if item.type == "Episode" else "virtual item"
    if item.is_remote or (item.protocol not in (None, "File")) or is_strm(item):
        return ".strm link"
    if item.video_type in DISC_KINDS:
        return DISC_KINDS[item.video_type]
    return None


def is_strm(item: SourceFacts) -> bool:
    """A `.strm` by its path's extension or its container, whatever its Protocol says.

    Jellyfin's BaseItem.GetVersionInfo lists a shortcut's media source with Path = the
    .strm's target, Protocol = that target's protocol, and Container = the extension of
    the item's own Path ("strm"); from 10.11.7 a .strm naming a local file is no longer
    marked IsRemote either, so Protocol File and IsRemote false alone would have
    /Download serve the few bytes of link text to ffmpeg.
    """
    container = (item.container or "").strip().lower()
    path = (item.path or "").strip().lower()
    return container == STRM_CONTAINER or path.endswith("." + STRM_CONTAINER)


def require_media_file(item_id: str, name: str, item: SourceFacts) -> None:
    """Raise PermanentError naming what the item is, unless it is one media file."""
    kind = non_file_kind(item)
    if kind is None:
        return
    why = next((text for start, text in _WHY.items() if kind.startswith(start)), "")
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    raise PermanentError(
        f"item {item_id} ({name!r}) is {article} {kind}, not a media file: {why}; "
        "nothing was downloaded"
    )


def require_probed(item: MediaItem, *, give_up_after: float) -> None:
    """Raise NotReady while Jellyfin has not probed the file (it lists no streams of it).

    The webhook fires as soon as an item has provider ids, which can be before ffprobe
    ran: such a job waits (no attempt used) until the streams appear, and fails once it
    has been queued for longer than `give_up_after` seconds.
    """
    if item.file_streams:
        return
    what = f"item {item.id} ({item.name!r})"
    raise NotReady(
        f"Jellyfin has not probed {what} yet (no media streams): waiting for its library scan",
        phase=WAITING_FOR_PROBE,
        give_up_after=give_up_after,
        gave_up=(
            f"Jellyfin has not probed {what} (no media streams) within "
            f"{format_duration(give_up_after)} of it being queued (MIRROR_UNPROBED_TIMEOUT): "
            "check that Jellyfin can read the file and scan the library, then `mirror retry`"
        ),
    )
