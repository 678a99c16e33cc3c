"""What `mirror sync` compares to tell a changed file from an unchanged one: pure.

The row's `source` (what the newest done job mirrored) against the listing's
`ItemSummary.fingerprint()`: only facts that identify the bytes. When only the time
changed, a content probe (mirror.files.content_probe) decides instead of the ETag.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# Facts compared between the row's `source` and the listing, when both sides have them:
# only what identifies the bytes (see ItemSummary.fingerprint). Size catches a replaced
# file; the ETag (Jellyfin's MD5 of the stored DateModified) one replaced in place with
# the same size. No path: on 10.11.3+ the listing's and the download's paths are two
# spellings of one symlinked file (jellyfin PR #15263).
FINGERPRINT_FACTS = ("media_source_id", "size", "etag")

# Answers the content probe (mirror.files.content_probe) of an item's file of this size, or None.
ProbeContent = Callable[[str, int], "str | None"]


def _changed_facts(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    return [
        fact
        for fact in FINGERPRINT_FACTS
        if recorded.get(fact) is not None
        and current.get(fact) is not None
        and recorded[fact] != current[fact]
    ]


def fingerprint_changes(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """`size 100 -> 200` for each fact both sides know and that differs."""
    return [
        f"{fact} {recorded[fact]} -> {current[fact]}" for fact in _changed_facts(recorded, current)
    ]


def only_time_changed(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether a content probe can settle it: same size, only the ETag (a time) differs,
    and the row holds the probe of the file it mirrored."""
    return (
        recorded.get("content_probe") is not None
        and current.get("size") is not None
        and recorded.get("size") == current.get("size")
        and _changed_facts(recorded, current) == ["etag"]
    )


def only_touched(
    recorded: Mapping[str, Any], current: Mapping[str, Any], item_id: str, probe: ProbeContent
) -> bool:
    """Only the time changed and the file's first and last MiB are the mirrored ones."""
    if not only_time_changed(recorded, current):
        return False
    size = current["size"]
    return isinstance(size, int) and probe(item_id, size) == recorded["content_probe"]
