"""MIRROR_JELLYFIN_MAX_DOWNLOADS: the pipeline downloads only while it holds a slot.

The pipeline wraps its download in `gate.download_slot(...)`; the database adapter
(mirror.db.download_slots, or mirror.db.slot_leases behind PgBouncer) keeps the slots
in Postgres so the cap holds across every worker on every host. While a job waits for a
slot it reports `Progress("waiting")` with a note, which keeps its heartbeat fresh, shows
people why it is not moving, and keeps the stall watchdog quiet (waiting is not a hang).
Without a cap the gate is `NO_DOWNLOAD_CAP`: no connection, no statement.
"""

from __future__ import annotations

import contextlib
import uuid
from contextlib import AbstractContextManager
from typing import Protocol

from mirror.domain.progress import AbortSignal, Progress, ProgressCallback


class DownloadGate(Protocol):
    """Hands out download slots; a slot is held for the `with` block."""

    def download_slot(
        self, job_id: uuid.UUID, *, on_progress: ProgressCallback, abort: AbortSignal
    ) -> AbstractContextManager[None]:
        """Wait (reporting progress, stopping when `abort` fires) until a slot is ours."""
        ...


class NoDownloadCap:
    """No MIRROR_JELLYFIN_MAX_DOWNLOADS: every download may start at once."""

    def download_slot(
        self, job_id: uuid.UUID, *, on_progress: ProgressCallback, abort: AbortSignal
    ) -> AbstractContextManager[None]:
        return contextlib.nullcontext()


NO_DOWNLOAD_CAP = NoDownloadCap()


def waiting_for_slot(in_use: int, limit: int) -> Progress:
    """What a job waiting for a download slot reports (its heartbeat_data)."""
    return Progress(
        "waiting", note=f"waiting for a download slot ({min(in_use, limit)} of {limit} in use)"
    )
