"""A cheap fingerprint of a file's content: SHA-256 of its size, first MiB and last MiB.

`mirror sync` asks for it when only the time changed (same media source, same size, new
ETag): a `touch`, or a copy that does not keep modification times, changes Jellyfin's
ETag (an MD5 of the stored DateModified, BaseItem.GetVersionInfo in
MediaBrowser.Controller/Entities/BaseItem.cs) but not one byte. The worker records the
probe of the file it mirrored (from its downloaded copy); sync computes the listing's
side with two Range requests instead of downloading the file again. A container's
header and index sit at its ends, so a re-encode or another release differs there.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

from mirror.domain.errors import MirrorError

PROBE_BYTES = 1024 * 1024  # from each end


def probe_digest(size: int, head: bytes, tail: bytes) -> str:
    """The probe of a file of `size` bytes whose first and last bytes are these."""
    digest = hashlib.sha256(f"{size}\n".encode())
    digest.update(head)
    digest.update(tail)
    return f"sha256:{digest.hexdigest()}"


def _span(size: int) -> int:
    return min(size, PROBE_BYTES)


def content_probe_of_file(path: Path, size: int) -> str | None:
    """The probe of a local file (the worker's downloaded copy); None when it cannot be
    read whole (the row then has no probe, and a later touch re-mirrors as before)."""
    span = _span(size)
    try:
        with path.open("rb") as file:
            head = file.read(span)
            file.seek(size - span)
            tail = file.read(span)
    except OSError:
        return None
    if len(head) != span or len(tail) != span:
        return None
    return probe_digest(size, head, tail)


class RangeReader(Protocol):
    """Range requests for an item's file (JellyfinClient.fetch_range)."""

    def fetch_range(self, item_id: str, start: int, length: int) -> bytes | None: ...


def content_probe_of_item(reader: RangeReader, item_id: str, size: int) -> str | None:
    """The probe of an item's file on the server, or None when Jellyfin did not answer
    both ranges exactly or failed (then the item counts as changed: a doubt re-mirrors,
    and one item's error does not stop the sync)."""
    span = _span(size)
    if span == 0:
        return None
    try:
        head = reader.fetch_range(item_id, 0, span)
        tail = reader.fetch_range(item_id, size - span, span) if head is not None else None
    except MirrorError:  # e.g. 10.11.1-10.11.4 answer ranges on a symlink with 500
        return None
    if head is None or tail is None:
        return None
    return probe_digest(size, head, tail)
