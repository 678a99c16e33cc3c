"""The lines of `mirror pause` / `mirror resume` and the banner of `mirror jobs`: plain
text from plain data, shared with the dashboard so both say the same words."""

from __future__ import annotations

from datetime import UTC
from datetime import time as TimeOfDay

from mirror.domain.active_hours import ActiveHours, local_time_of_day
from mirror.domain.jobs import FleetChange, FleetMode, FleetState

MAX_REASON = 500  # characters of a pause's reason


def _jobs(n: int) -> str:
    return f"{n} job{'' if n == 1 else 's'}"


def change_line(change: FleetChange) -> str:
    """One line for `mirror pause` / `mirror resume`: what changed, what runs now."""
    state = change.state
    prefix = "" if change.changed else "already "
    if state.mode is FleetMode.PAUSED:
        running = (
            f"{_jobs(state.running)} running {'goes' if state.running == 1 else 'go'} back to "
            "the queue at the next heartbeat"
            if state.running
            else "nothing running"
        )
        return f"{prefix}paused: {running}, {state.queued} queued wait{_since(change)}"
    if state.mode is FleetMode.DRAINING:
        running = f"{_jobs(state.running)} running will finish" if state.running else "none running"
        return f"{prefix}paused (drain): {running}, {state.queued} queued wait{_since(change)}"
    if change.changed:
        return f"resumed: workers claim again; {state.queued} queued, {state.running} running"
    return f"not paused: {state.queued} queued, {state.running} running"


def _since(change: FleetChange) -> str:
    """For a repeated pause: since when, by whom (the record of the first)."""
    if change.changed:
        return ""
    return f" ({provenance(change.state)})"


def provenance(state: FleetState) -> str:
    """`since 18:40 UTC by alice@host: reason`."""
    parts = []
    if state.changed_at is not None:
        parts.append(f"since {state.changed_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC")
    if state.changed_by:
        parts.append(f"by {state.changed_by}")
    text = " ".join(parts)
    if state.reason:
        text += f": {state.reason}" if text else state.reason
    return text


def banner(state: FleetState, hours: ActiveHours, now: TimeOfDay | None = None) -> str | None:
    """The one line `mirror jobs` prints above its table when workers hold back; else None."""
    lines = []
    if state.mode is not FleetMode.RUNNING:
        what = (
            "no claims; running jobs go back to the queue"
            if state.mode is FleetMode.PAUSED
            else f"no new claims; {_jobs(state.running)} running finish"
            if state.running
            else "no new claims, none running"
        )
        lines.append(f"fleet {state.mode.value} ({provenance(state)}): {what} (mirror resume)")
    now = now if now is not None else local_time_of_day()
    if not hours.is_open(now):
        lines.append(
            f"outside MIRROR_ACTIVE_HOURS={hours} (now {now:%H:%M} here): workers with this "
            f"setting claim nothing until {hours.next_opening(now)}"
        )
    return "; ".join(lines) or None
