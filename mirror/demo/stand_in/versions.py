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
