"""Human durations, sizes and rates (`500ms`, `10s`, `30m`, `1h`, `64MiB`, `40MB/s`).

Pure parsing for settings (so the settings module only declares fields and the rules
between them) and the formatting every view shares; numbers are stored as numbers.
"""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "b": 1,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "t": 1000**4,
    "ki": 1024,
    "mi": 1024**2,
    "gi": 1024**3,
    "ti": 1024**4,
}


def parse_duration(value: object) -> float:
    """Seconds from `500ms`, `10s`, `30m`, `1h`, `2d` or a plain number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"not a duration: {value!r} (use e.g. 500ms, 10s, 30m, 1h)")
        seconds = float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "s").lower()]
    else:
        raise ValueError(f"not a duration: {value!r}")
    if seconds <= 0:
        raise ValueError(f"duration must be positive, got {value!r}")
    return seconds


def parse_duration_or_zero(value: object) -> float:
    """`parse_duration`, and `0` (or `0s`, `0d`) for none at all (MIRROR_DELETE_GRACE)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return 0.0
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match and float(match.group(1)) == 0:
            return 0.0
    return parse_duration(value)


def parse_size(value: object) -> int:
    """Bytes from `64MiB`, `5MB`, `1GiB`, `1024` (plain bytes)."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str):
        match = _SIZE.match(value)
        if not match:
            raise ValueError(f"not a size: {value!r} (use e.g. 64MiB, 5MB, 1GiB)")
        unit = (match.group(2) or "b").lower().rstrip("b") or "b"
        size = int(float(match.group(1)) * _SIZE_UNITS[unit])
    else:
        raise ValueError(f"not a size: {value!r}")
    if size < 0:
        raise ValueError(f"size must not be negative, got {value!r}")
    return size


# A byte rate: a size (same units as above), then an optional `/s`. Bits are refused
# (`Mbit/s`, `Mbps`): a limit off by a factor of eight is worse than an error.
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*(?:/\s*s(?:ec)?)?\s*$", re.IGNORECASE)
_RATE_HELP = "use bytes per second, e.g. 40MB/s, 500KB/s, 1.5GiB/s; 0 or empty: no limit"
# Below this a limit is surely a typo (e.g. `40` meant as 40 MB/s): downloads would take days.
MIN_RATE = 1000.0


def parse_rate(value: object) -> float | None:
    """Bytes per second from `40MB/s`, `500KB/s`, `1.5GiB/s`, `40MB` or plain bytes/s.

    KB, MB, GB are powers of 1000, KiB, MiB, GiB powers of 1024 (as in `parse_size`);
    empty, `0`, `off` and `unlimited` mean no limit (None).
    """
    if value is None or isinstance(value, bool):
        if value is None:
            return None
        raise ValueError(f"not a rate: {value!r} ({_RATE_HELP})")
    if isinstance(value, int | float):
        rate = float(value)
    elif isinstance(value, str):
        if value.strip().lower() in ("", "0", "off", "unlimited", "none"):
            return None
        match = _RATE.match(value)
        if not match:
            raise ValueError(f"not a rate: {value!r} ({_RATE_HELP})")
        unit = (match.group(2) or "b").lower().rstrip("b") or "b"
        rate = float(match.group(1)) * _SIZE_UNITS[unit]
    else:
        raise ValueError(f"not a rate: {value!r} ({_RATE_HELP})")
    if rate == 0:
        return None
    if rate < MIN_RATE:
        raise ValueError(f"{value!r} is below {format_rate_limit(MIN_RATE)}; {_RATE_HELP}")
    return rate


def format_rate_limit(bytes_per_s: float) -> str:
    """Short human form for messages: `40 MB/s` (decimal, as network rates are quoted)."""
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if bytes_per_s >= scale:
            return f"{bytes_per_s / scale:.3g} {unit}"
    return f"{bytes_per_s:.0f} B/s"


def format_duration(seconds: float) -> str:
    """Short human form for messages: `500ms`, `10s`, `30m`, `1h30m`, `7d`."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{round(seconds, 1):g}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    return "".join(f"{value}{unit}" for value, unit in parts if value)


def format_bytes(size: float) -> str:
    """Short human form for messages and tables: `4.5 GiB`."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def format_rate(bytes_per_s: float) -> str:
    """`45.1 MB/s` (decimal megabytes, as network speeds are usually quoted)."""
    return f"{bytes_per_s / 1e6:.1f} MB/s"
