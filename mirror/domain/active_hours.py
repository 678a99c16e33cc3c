"""MIRROR_ACTIVE_HOURS: the times of day a worker may claim jobs (`01:00-07:00`).

Pure functions over plain data: the worker passes its local time of day, so tests
inject any clock. A window is [start, end): `22:00-06:00` runs over midnight, `24:00`
may end a window, and a comma list joins several. No windows: always open. Outside
them a worker claims nothing and lets its running jobs finish (a drain).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time

_WINDOW = re.compile(r"^(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})$")
_MINUTES_PER_DAY = 24 * 60

# The local time of day (tests pass their own clock).
TimeOfDayClock = Callable[[], time]


def local_time_of_day() -> time:
    """Now in the process's local time zone: the TZ environment variable, else the
    system's (a container's is UTC unless TZ is set)."""
    return datetime.now().astimezone().time()


@dataclass(frozen=True, slots=True)
class Window:
    """One daily window in minutes since midnight: start inclusive, end exclusive."""

    start: int
    end: int  # may be smaller than start: the window runs over midnight

    def holds(self, minute: float) -> bool:
        if self.start < self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end

    def __str__(self) -> str:
        return f"{_clock(self.start)}-{_clock(self.end)}"


@dataclass(frozen=True, slots=True)
class ActiveHours:
    """Every window of the setting; empty: always open."""

    windows: tuple[Window, ...] = ()

    @property
    def always(self) -> bool:
        return not self.windows

    def is_open(self, at: time) -> bool:
        """Whether a worker may claim at this local time of day."""
        return self.always or any(window.holds(_minute_of(at)) for window in self.windows)

    def next_opening(self, at: time) -> str | None:
        """When the next window opens (HH:MM), for people; None while open."""
        if self.is_open(at):
            return None
        now = _minute_of(at)
        return _clock(min(self.windows, key=lambda w: (w.start - now) % _MINUTES_PER_DAY).start)

    def __str__(self) -> str:
        return ",".join(str(window) for window in self.windows)


def parse_active_hours(text: str | None) -> ActiveHours:
    """`01:00-07:00`, `22:00-06:00` or `01:00-07:00,13:00-14:00`; empty: always.

    Raises ValueError with a message a person can act on.
    """
    if text is None or not text.strip():
        return ActiveHours()
    windows = []
    for part in text.split(","):
        match = _WINDOW.match(part.strip())
        if match is None:
            raise ValueError(
                f"{part.strip()!r} is not a window like 01:00-07:00 (HH:MM-HH:MM, comma separated)"
            )
        start = _minutes(int(match[1]), int(match[2]), part, may_be_midnight=False)
        end = _minutes(int(match[3]), int(match[4]), part, may_be_midnight=True)
        if start == end:
            raise ValueError(
                f"{part.strip()!r} starts where it ends; leave MIRROR_ACTIVE_HOURS empty "
                "to work at any hour"
            )
        windows.append(Window(start, end))
    return ActiveHours(tuple(windows))


def _minutes(hour: int, minute: int, part: str, *, may_be_midnight: bool) -> int:
    if may_be_midnight and (hour, minute) == (24, 0):
        return _MINUTES_PER_DAY
    if hour > 23 or minute > 59:
        raise ValueError(f"{part.strip()!r}: {hour:02d}:{minute:02d} is not a time of day")
    return hour * 60 + minute


def _minute_of(at: time) -> float:
    return at.hour * 60 + at.minute + at.second / 60


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"
