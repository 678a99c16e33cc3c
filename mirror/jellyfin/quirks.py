"""Known bugs of particular Jellyfin releases, told apart from ordinary failures.

A server bug looks like something else from outside: Jellyfin 10.11.1-10.11.4 serve a
symlinked media file with the link's own size and answer range requests on it with 500
(jellyfin #15279, #15295; fixed in 10.11.5). Read plainly that is a size mismatch that
a metadata refresh would mend and a 5xx worth retrying, yet no retry or refresh helps: only an
upgrade can. So when the server's version is one of those, the symptom becomes a
permanent error that names the bug and the fixing release.
"""

from __future__ import annotations

import re

from mirror.domain.errors import PermanentError

SYMLINK_BUG_FIRST = (10, 11, 1)
SYMLINK_BUG_FIXED = (10, 11, 5)
_VERSION = re.compile(r"\s*(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """`10.11.3` (or `10.11.3.0`, `10.11.3-rc1`) -> (10, 11, 3); None when unreadable."""
    match = _VERSION.match(text or "")
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def has_symlink_bug(version: str | None) -> bool:
    """Whether this Jellyfin release serves symlinked files wrongly (#15279)."""
    parsed = parse_version(version)
    return parsed is not None and SYMLINK_BUG_FIRST <= parsed < SYMLINK_BUG_FIXED


def symlink_bug_error(item_id: str, version: str, symptom: str) -> PermanentError:
    """The error for a download that ran into #15279: names the bug and the fix."""
    fixed = ".".join(str(part) for part in SYMLINK_BUG_FIXED)
    return PermanentError(
        f"Jellyfin {version} cannot serve item {item_id} correctly ({symptom}): its file "
        "is most likely a symlink, which Jellyfin 10.11.1-10.11.4 serve with the link's own "
        f"size and answer range requests on with 500 (Jellyfin bug #15279, fixed in {fixed}); "
        f"upgrade Jellyfin to {fixed} or later (or replace the symlink with the file), then "
        "`mirror retry` the job"
    )
