"""How many removals one run may make before it stops and asks (`--max-delete N|P%`).

Jellyfin empties a library whose network mount is offline during a scan, a wrong
MIRROR_JELLYFIN_URL lists another server's items, an API key of a user who sees nothing
lists none: each looks like "every item was deleted". Like rclone's `--max-delete` and
rclone bisync's refusal past 50 %, a run that would remove more than the limit removes
nothing and says why. Pure: the callers count, this decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MAX_DELETE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")


@dataclass(frozen=True, slots=True)
class DeleteLimit:
    """At most `items` removals and at most `percent` % of the mirrored items (None: no
    bound of that kind). The default has both bounds; `--max-delete` gives one."""

    items: int | None = None
    percent: float | None = None

    def problem(self, removing: int, mirrored: int) -> str | None:
        """Why removing `removing` of `mirrored` items is too many, or None."""
        over_items = self.items is not None and removing > self.items
        over_share = self.percent is not None and removing * 100 > self.percent * mirrored
        if not (over_items or over_share):
            return None
        share = f"{removing * 100 / mirrored:.0f}%" if mirrored else "all"
        return f"{removing} of {mirrored} mirrored items ({share}) is over {self.describe()}"

    def describe(self) -> str:
        bounds = [f"{self.items} items"] if self.items is not None else []
        if self.percent is not None:
            bounds.append(f"{self.percent:g}% of the mirrored items")
        return "the limit of " + " or ".join(bounds) if bounds else "no limit"


DEFAULT_LIMIT = DeleteLimit(items=50, percent=10.0)
NO_LIMIT = DeleteLimit()  # --force


def parse_max_delete(value: str) -> DeleteLimit:
    """`20` (items) or `20%` (of the mirrored items); raises ValueError with the reason."""
    match = _MAX_DELETE.match(value)
    if not match:
        raise ValueError(f"not a count or a percentage: {value!r} (use e.g. 20 or 20%)")
    number = float(match.group(1))
    if match.group(2):
        if number > 100:
            raise ValueError(f"a percentage is at most 100%, got {value!r}")
        return DeleteLimit(percent=number)
    if not number.is_integer():
        raise ValueError(f"a count of items is a whole number, got {value!r}")
    return DeleteLimit(items=int(number))


EMPTY_LISTING = (
    "the library listing is empty: nothing is deleted on its word (a wrong "
    "MIRROR_JELLYFIN_URL, an API key of a user who sees nothing, or a library emptied "
    "while its network mount was offline during a scan)"
)


def held_back(removing: int, mirrored: int, *, listed: int, limit: DeleteLimit) -> str | None:
    """Why a sync that lists `listed` items must not remove `removing` of `mirrored`.

    An empty listing is refused whatever the limit, even with --force: it is the symptom
    itself, and a library that really emptied is rare enough to clear by hand.
    """
    if removing == 0:
        return None
    if listed == 0:
        return EMPTY_LISTING
    return limit.problem(removing, mirrored)
