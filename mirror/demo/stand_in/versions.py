"""Behaviours of the stand-in that depend on the Jellyfin version it plays.

Each is named after the first Jellyfin version that has it, so a test that sets
`JellyfinStandIn.version` shows what a server of that version answers.
"""

from __future__ import annotations

import re

# 10.11.7: a `.strm` whose text names a local path is listed with Protocol File and no
# longer IsRemote (before: IsRemote true for every shortcut, BaseItem.GetVersionInfo);
# its media source keeps Container "strm" (the extension of the item's own Path) and
# /Items/{id}/Download still serves the .strm file's text.
STRM_LOCAL_TARGET_NOT_REMOTE = "10.11.7"

# 10.11.3 (jellyfin PR #15263, "Resolve symlinks for static media source infos"): a
# media source's Path is a symlink's final target; the item's own Path stays the link.
# The stand-in's per-item knob is `resolved_source_path`.
SYMLINK_SOURCE_PATH_RESOLVED = "10.11.3"


def version_tuple(version: str) -> tuple[int, ...]:
    """(10, 11, 7) from "10.11.7" (a suffix such as "-rc5" is ignored)."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("-")[0])[:3])


def at_least(version: str, since: str) -> bool:
    """Whether a server of `version` has the behaviour that came with `since`."""
    return version_tuple(version) >= version_tuple(since)


def strm_is_remote(version: str, target: str) -> bool:
    """Whether a .strm naming `target` is listed IsRemote by a server of `version`."""
    local = "://" not in target
    return not (local and at_least(version, STRM_LOCAL_TARGET_NOT_REMOTE))


def strm_protocol(target: str) -> str:
    """MediaSourceManager.GetPathProtocol of the .strm's target: Http for a URL, else File."""
    return "Http" if target.lower().startswith(("http://", "https://")) else "File"


def source_path_resolved(version: str) -> bool:
    """Whether a server of `version` lists a symlinked file's target as its source Path."""
    return at_least(version, SYMLINK_SOURCE_PATH_RESOLVED)
