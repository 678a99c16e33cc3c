"""Failed logins per client, counted in memory: past a few, `429` until the window passes.

Replaces a 1 s sleep after each wrong password, which held one of waitress's few
threads per guess: five guesses a second stalled /healthz and the webhook (whose plugin
never retries) for seconds. A refusal here costs a dictionary look-up and holds nothing.
Counts are per process (several `mirror serve` each allow their own few), bounded in
memory (the oldest clients are forgotten first), and keyed by the client's address as
the trusted proxies report it (mirror.web.proxies).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_FAILURES = 5
WINDOW_S = 60.0
MAX_CLIENTS = 10_000


class LoginThrottle:
    """At most `max_failures` wrong passwords per client in any `window_s` seconds."""

    def __init__(
        self,
        max_failures: int = MAX_FAILURES,
        window_s: float = WINDOW_S,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self.max_clients = max_clients
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, client: str) -> int | None:
        """Whole seconds until `client` may try again, or None when it may try now."""
        with self._lock:
            times = self._recent(client)
            if times is None or len(times) < self.max_failures:
                return None
            return max(1, int(times[0] + self.window_s - self.clock() + 0.999))

    def failed(self, client: str) -> None:
        with self._lock:
            times = self._recent(client) or deque(maxlen=self.max_failures)
            times.append(self.clock())
            self._failures[client] = times
            self._failures.move_to_end(client)
            while len(self._failures) > self.max_clients:
                self._failures.popitem(last=False)

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)

    def _recent(self, client: str) -> deque[float] | None:
        """The client's failures inside the window (older ones dropped)."""
        times = self._failures.get(client)
        if times is None:
            return None
        horizon = self.clock() - self.window_s
        while times and times[0] <= horizon:
            times.popleft()
        return times
