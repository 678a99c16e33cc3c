"""The renditions (ABR ladder) an item's video is mirrored in: MIRROR_RENDITIONS.

`source` is the video as today (copied when it plays everywhere, else re-encoded at its
own size); `<N>p` rungs are re-encodes N lines high, for screens and links that cannot
take the source. A rung is never larger than the source: rungs at or above its height
are left out, as upscaling only costs bytes. Pure words: names in, rungs out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SOURCE = "source"
DEFAULT_RENDITIONS: tuple[str, ...] = (SOURCE,)
# 144p is the smallest rung anyone ships; 4320p (8K) the largest picture H.264 takes.
_MIN_HEIGHT, _MAX_HEIGHT = 144, 4320
_RUNG = re.compile(r"^(\d{3,4})p$")
# Peak rate of a rung, scaled by its pixel count from 6 Mb/s at 1080p (near Apple's HLS
# authoring table: 720p ~3 Mb/s, 480p ~1.2 Mb/s). CRF decides the quality; the cap
# only keeps a busy scene within what a player picking this rung by BANDWIDTH expects.
_MAXRATE_1080P_KBPS = 6000


@dataclass(frozen=True, slots=True)
class Rung:
    """One lower rendition: `name` (`720p`) and the height it is scaled to."""

    name: str
    height: int

    @property
    def maxrate_kbps(self) -> int:
        """The peak rate this rung is capped at (see `_MAXRATE_1080P_KBPS`)."""
        return max(200, round(_MAXRATE_1080P_KBPS * (self.height / 1080) ** 2))


def parse_renditions(names: Iterable[str]) -> tuple[str, ...]:
    """MIRROR_RENDITIONS checked: `source` and `<N>p` rungs (N even, 144..4320), each
    once, `source` among them; ValueError with what is wrong and an example."""
    cleaned = tuple(name.strip().lower() for name in names if name.strip())
    for name in cleaned:
        if name != SOURCE and rung_height(name) is None:
            raise ValueError(
                f"{name!r} is not a rendition: use `source` or a height such as 720p "
                f"(even, {_MIN_HEIGHT}p to {_MAX_HEIGHT}p), e.g. source,720p,480p"
            )
    if SOURCE not in cleaned:
        raise ValueError("must include `source` (the ladder's top), e.g. source,720p,480p")
    repeated = sorted({name for name in cleaned if cleaned.count(name) > 1})
    if repeated:
        raise ValueError(f"names {', '.join(repeated)} more than once")
    return cleaned


def rung_height(name: str) -> int | None:
    """720 for `720p`; None for `source` or anything that is not a valid rung."""
    match = _RUNG.match(name)
    if match is None:
        return None
    height = int(match.group(1))
    return height if _MIN_HEIGHT <= height <= _MAX_HEIGHT and height % 2 == 0 else None


def is_ladder(names: Sequence[str]) -> bool:
    """More than `source`: the videos go under `video/<name>.mp4` (DESIGN: S3 layout)."""
    return tuple(names) != DEFAULT_RENDITIONS


def rungs_below(names: Sequence[str], source_height: int | None) -> tuple[Rung, ...]:
    """The configured rungs smaller than the source, tallest first. A source of unknown
    height gets none: a rung must never be larger than the source."""
    if source_height is None:
        return ()
    rungs = [Rung(name, h) for name in names if (h := rung_height(name)) is not None]
    return tuple(sorted((r for r in rungs if r.height < source_height), key=lambda r: -r.height))
