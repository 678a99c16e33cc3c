"""Plain data the job statements take and return: rows, leases, outcomes, errors."""

from __future__ import annotations

from dataclasses import dataclass

from mirror.domain.jobs import (
    Fence,
    JobNotFound,
    JobRecord,
    JobStateError,
    Lease,
    Rescued,
    row_json,
)

__all__ = [
    "Enqueued",
    "Fence",
    "JobNotFound",
    "JobRecord",
    "JobStateError",
    "Lease",
    "Rescued",
    "row_json",
]


@dataclass(frozen=True, slots=True)
class Enqueued:
    job: JobRecord
    created: bool  # False: the item already had an active job, returned as is
