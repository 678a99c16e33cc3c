"""`JobRepository`: every statement on the job table, one facade over its concerns.

The statements live by concern, each named after what it does: the lease's life
(`leases`: claim, heartbeat, reaper), how an attempt ends (`end_states`), what people
do to the queue (`intake`: enqueue, cancel, retry), reads (`job_reads`), the items'
titles (`titles`) and the fleet's pause (`fleet`). Every
statement that changes a claimed job is fenced by its `lease_token` (`fencing`).
"""

from __future__ import annotations

from sqlalchemy import Engine

from mirror.db.end_states import JobEndStates
from mirror.db.fleet import JobFleet
from mirror.db.intake import JobIntake
from mirror.db.job_reads import JobReads
from mirror.db.leases import JobLeases
from mirror.db.titles import JobTitles

__all__ = ["JobRepository"]


class JobRepository(JobIntake, JobLeases, JobEndStates, JobReads, JobTitles, JobFleet):
    """The queue's statements; each method is one short transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
