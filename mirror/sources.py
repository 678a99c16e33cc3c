"""Which Jellyfin items are one media file that mirror can copy, and what the others are.

Jellyfin lists more than files: `.strm` links to remote streams, disc images and folder
rips, missing episodes it only knows from metadata, and folders. Downloading those is at
best wasted (a whole ISO that ffmpeg then cannot read) and at worst useless (a `.strm`
is a few bytes of URL), so both the pipeline and the library sweep ask here first.
Pure functions over the facts Jellyfin's JSON gives; no I/O.
"""

from __future__ import annotations

from typing import Protocol

from mirror.errors import PermanentError

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
    ".strm link": "Jellyfin streams it from a URL; /Download would only serve the link text",
    "ISO image": "a disc image, not one video file ffmpeg can read",
    "DVD folder": "a folder rip Jellyfin cannot serve as one file",
    "Blu-ray folder": "a folder rip Jellyfin cannot serve as one file",
}


class SourceFacts(Protocol):
    """What Jellyfin says about an item's kind (MediaItem and ItemSummary both have it)."""

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
    if item.is_remote or (item.protocol not in (None, "File")):
        return ".strm link"
    if item.video_type in DISC_KINDS:
        return DISC_KINDS[item.video_type]
    return None


def require_media_file(item_id: str, name: str, item: SourceFacts) -> None:
    """Raise PermanentError naming what the item is, unless it is one media file."""
    kind = non_file_kind(item)
    if kind is None:
        return
    why = next((text for start, text in _WHY.items() if kind.startswith(start)), "")
    raise PermanentError(
        f"item {item_id} ({name!r}) is a {kind}, not a media file: {why}; nothing was downloaded"
    )
