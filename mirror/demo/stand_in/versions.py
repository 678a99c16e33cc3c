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


_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?(?:-rc(\d+))?")
# A release sorts after each of its release candidates.
_RELEASE = 1_000

# 12.0-rc5: deleting a folder raises ItemRemoved for each descendant first, then the
# folder ("Announce the descendants before the item itself", LibraryManager.DeleteItem);
# up to 12.0-rc4 only the folder is reported.
DESCENDANTS_REPORTED = "12.0.0-rc5"


def version_tuple(version: str) -> tuple[int, int, int, int]:
    """(10, 11, 7, 1000) from "10.11.7", (12, 0, 0, 5) from "12.0-rc5"; a version this
    cannot read sorts first (it has no behaviour that came later)."""
    match = _VERSION.match(version)
    if match is None:
        return (0, 0, 0, 0)
    major, minor, patch, rc = match.groups()
    return (int(major), int(minor), int(patch or 0), int(rc) if rc else _RELEASE)


def at_least(version: str, since: str) -> bool:
    """Whether a server of `version` has the behaviour that came with `since`."""
    return version_tuple(version) >= version_tuple(since)


def reports_descendants(version: str) -> bool:
    """Whether deleting a folder in a server of `version` reports what was under it."""
    return at_least(version, DESCENDANTS_REPORTED)


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
