"""Plain data the job statements take and return: rows, leases, outcomes, errors."""

from __future__ import annotations

from mirror.domain.jobs import (
    Enqueued,
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
