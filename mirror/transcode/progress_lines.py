"""ffmpeg's `-progress` output turned into `Progress`: pure parsing, fed line by line.

ffmpeg writes a block of `key=value` lines about twice a second and ends each block
with `progress=continue` (or `progress=end` for the last one). Values can be `N/A`, and
with several outputs `out_time` follows the furthest output (audio runs ahead of the
video), so the video's share of the work is measured with `frame=`.
"""

from __future__ import annotations

import math

from mirror.domain.progress import Progress


class FfmpegProgressParser:
    """Incremental parser: `feed` each line; a `Progress` comes back at each block end.

    A value that turns `N/A` keeps the last known one, so the reported progress never
    falls back to "unknown" in the middle of a run.
    """

    def __init__(self, *, frames_total: int | None, duration_s: float | None) -> None:
        self._frames_total = frames_total
        self._duration_s = duration_s
        self._frames_done: int | None = None
        self._out_time_s: float | None = None
        self._speed_factor: float | None = None
        self._block: dict[str, str] = {}
        self.finished = False

    def feed(self, line: str) -> Progress | None:
        """Take one line of ffmpeg's progress output; return a Progress at a block end."""
        key, sep, value = line.strip().partition("=")
        if not sep:
            return None
        key, value = key.strip(), value.strip()
        if key != "progress":
            self._block[key] = value
            return None
        self._absorb(self._block)
        self._block = {}
        if value == "end":
            self.finished = True
            # The count is exact now; an estimate from duration x frame rate is not.
            if self._frames_done is not None:
                self._frames_total = self._frames_done
        return Progress(
            phase="transcode",
            frames_done=self._frames_done,
            frames_total=self._frames_total,
            out_time_s=self._out_time_s,
            duration_s=self._duration_s,
            speed_factor=self._speed_factor,
        )

    def _absorb(self, block: dict[str, str]) -> None:
        frames = parse_int(block.get("frame"))
        if frames is not None:
            self._frames_done = frames
        out_time = parse_out_time(block)
        if out_time is not None:
            self._out_time_s = out_time
        factor = parse_speed_factor(block.get("speed"))
        if factor is not None:
            self._speed_factor = factor


def parse_out_time(block: dict[str, str]) -> float | None:
    """Seconds of output written: `out_time_us`, else `out_time_ms` (also in µs), else
    `out_time` (HH:MM:SS.ffffff). Negative values (before the first packet) are unknown."""
    for key in ("out_time_us", "out_time_ms"):
        micros = parse_int(block.get(key))
        if micros is not None:
            return micros / 1_000_000 if micros >= 0 else None
    return parse_clock(block.get("out_time"))


def parse_clock(value: str | None) -> float | None:
    """`HH:MM:SS.ffffff` in seconds; None for N/A, negative or malformed values."""
    if not value or value.startswith("-"):
        return None
    parts = value.split(":")
    if len(parts) != 3:
        return None
    try:
        hours, minutes, seconds = int(parts[0]), int(parts[1]), float(parts[2])
    except ValueError:
        return None
    return hours * 3600 + minutes * 60 + seconds


def parse_speed_factor(value: str | None) -> float | None:
    """ffmpeg's `speed=27.9x` (or `1.02e+03x`) as 27.9; None for `N/A` or anything else."""
    if not value or not value.endswith("x"):
        return None
    try:
        factor = float(value[:-1])
    except ValueError:
        return None
    return factor if math.isfinite(factor) and factor >= 0 else None


def parse_int(value: str | None) -> int | None:
    """An integer value, None for `N/A` or anything unparsable."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None
