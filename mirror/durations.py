"""Human durations, sizes and rates (`500ms`, `10s`, `30m`, `1h`, `64MiB`, `45.1 MB/s`).

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


def format_duration(seconds: float) -> str:
    """Short human form for messages: `500ms`, `10s`, `30m`, `1h30m`."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{round(seconds, 1):g}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    parts = [(hours, "h"), (minutes, "m"), (secs, "s")]
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
