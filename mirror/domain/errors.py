"""The error kinds the worker tells apart when an attempt ends.

Adapters translate what they meet into one of these, with a message a person can act on
and no secrets in it. The worker decides the job's fate from the kind alone.
"""

from __future__ import annotations


class MirrorError(Exception):
    """Base of every error mirror raises on purpose."""


class ConfigError(MirrorError):
    """Bad or missing settings: exit code 2, one line naming the variable."""


class PermanentError(MirrorError):
    """Retrying cannot help (unknown item, rejected key, undecodable media): fail now."""


class TransientError(MirrorError):
    """Might work later (network, 5xx, S3 throttling): back to the queue with backoff."""


class RetriesExhausted(TransientError):
    """A request failed every retry; `status` is the HTTP status of the last answer
    (None: no answer at all). Lets a caller for whom one part is optional (a sidecar
    subtitle) tell a server that keeps answering 500 for it from a network that is down.
    """

    def __init__(self, message: str, *, status: int | None) -> None:
        super().__init__(message)
        self.status = status


class AttemptStopped(MirrorError):
    """The attempt was stopped from outside its own work (see subclasses)."""


class JobCancelled(AttemptStopped):
    """Someone cancelled the job: stop, the row stays `cancelled`."""


class LeaseLost(AttemptStopped):
    """Another attempt owns the job now: stop and touch nothing."""


class Stalled(AttemptStopped):
    """No progress for stall_timeout: abort and retry like a transient error."""


class ShutdownRequested(AttemptStopped):
    """The worker is shutting down: release the job without using an attempt."""


class NotReady(MirrorError):
    """The job cannot run yet through nobody's fault: release without using an attempt.

    Jellyfin has not probed the item, or the disk is short: retrying at once would only
    spin, so each wait in a row doubles the delay (capped), and the job shows `phase`
    while it waits. With `give_up_after` (seconds since the job was queued) it fails
    with `gave_up` once it has waited that long, so a wait can never last for ever.
    """

    phase = "waiting"

    def __init__(
        self,
        reason: str,
        *,
        phase: str | None = None,
        give_up_after: float | None = None,
        gave_up: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.phase = phase or type(self).phase
        self.give_up_after = give_up_after
        self.gave_up = gave_up or reason


class InsufficientSpace(NotReady):
    """Not enough free disk for the item right now: wait for space, no attempt used."""

    phase = "waiting for disk"


class SourceChanged(NotReady):
    """The file changed on Jellyfin while it was being mirrored, after part of the old
    version was already read: nothing made from it may be kept, and the next attempt
    starts from byte 0 of the new one. Nobody's fault, so no attempt is used."""

    phase = "source changed"
