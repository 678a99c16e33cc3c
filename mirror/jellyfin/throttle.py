"""MIRROR_DOWNLOAD_RATE_LIMIT: a token bucket that paces one download's bytes.

The download loop takes tokens for every chunk it has written; when the bucket runs
dry it sleeps until the rate has paid the debt back. Reading slower makes the kernel's
receive window shrink, so Jellyfin itself sends no faster than the limit (TCP flow
control) and no memory piles up on our side. Time and sleep are arguments, so the
arithmetic is tested without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Bytes that may pass at once after a pause: a tenth of a second at the rate (at least
# 64 KiB). A read larger than that is still allowed and its debt slept off at once.
BURST_SECONDS = 0.1
MIN_BURST_BYTES = 64 * 1024


class TokenBucket:
    """Lets `rate` bytes per second through on average, bursts of at most `burst` bytes."""

    def __init__(
        self,
        rate: float,
        *,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate!r}")
        self.rate = rate
        self.burst = burst if burst is not None else max(rate * BURST_SECONDS, MIN_BURST_BYTES)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.burst
        self._last = clock()

    def take(self, n_bytes: int) -> None:
        """Account for `n_bytes` just moved; sleep as long as they put the bucket in debt.

        A chunk larger than the bucket is allowed (it cannot be split after the fact):
        the debt it leaves is slept off now, so the average holds.
        """
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= n_bytes
        if self._tokens < 0:
            self._sleep(-self._tokens / self.rate)
