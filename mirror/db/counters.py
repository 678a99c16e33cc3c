"""The running totals in `media_mirror.counters`: read them, fold their deltas together.

Triggers (migration 0005) append one delta row per statement that changes a job's status
or the attempt history, in that statement's transaction, so the totals are exactly as
committed as the rows. Summing a few hundred rows is cheap; `fold` keeps them few.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection, Engine, text

from mirror.db.schema import COUNTERS as _COUNTERS
from mirror.db.schema import JOBS as _JOBS
from mirror.domain.jobs import STATUSES

PHASES = ("download", "transcode", "upload")
# Past this many delta rows a reader folds them (one DELETE ... INSERT), under a lock
# that only one folder takes at a time; below it reading is faster than folding.
FOLD_ABOVE_ROWS = 500
_FOLD_LOCK = 7_245_001  # pg_try_advisory_xact_lock key: one folder at a time


@dataclass(frozen=True, slots=True)
class Totals:
    """Every running total: jobs per status, and sums over the attempt history."""

    jobs_by_status: dict[str, int]
    claims: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)
    heartbeat_writes: int = 0
    bytes_downloaded: int = 0
    bytes_uploaded: int = 0
    # phase -> {upper bound ("1", ..., "+Inf") -> attempts whose phase took <= it and more
    # than the bound below}; cumulated into a histogram by `phase_histogram`.
    phase_buckets: dict[str, dict[str, int]] = field(default_factory=dict)
    phase_sums: dict[str, float] = field(default_factory=dict)

    def phase_histogram(
        self, phase: str, bounds: Sequence[float]
    ) -> tuple[tuple[tuple[float, int], ...], int]:
        """Cumulative (bound, count) pairs for `bounds`, and the count of all."""
        per_bound = {
            float(key): n for key, n in self.phase_buckets.get(phase, {}).items() if key != "+Inf"
        }
        total = sum(self.phase_buckets.get(phase, {}).values())
        cumulative = tuple(
            (bound, sum(n for b, n in per_bound.items() if b <= bound)) for bound in sorted(bounds)
        )
        return cumulative, total


def read_totals(conn: Connection) -> Totals:
    """Sum the delta rows (a small table once folded)."""
    rows = conn.execute(
        text(f"SELECT name, label, sum(value) AS value FROM {_COUNTERS} GROUP BY name, label")
    ).all()
    jobs = dict.fromkeys(STATUSES, 0)
    outcomes: dict[str, int] = {}
    buckets: dict[str, dict[str, int]] = {}
    sums: dict[str, float] = {}
    plain: dict[str, int] = {}
    for row in rows:
        name, label, value = str(row.name), str(row.label), row.value
        if name == "jobs":
            jobs[label] = int(value)
        elif name == "outcome":
            outcomes[label] = int(value)
        elif name == "phase_bucket":
            phase, _, bound = label.partition(":")
            buckets.setdefault(phase, {})[bound] = int(value)
        elif name == "phase_sum":
            sums[label] = float(value)
        else:
            plain[name] = int(value)
    return Totals(
        jobs_by_status=jobs,
        claims=plain.get("claims", 0),
        by_outcome={k: v for k, v in outcomes.items() if v},
        heartbeat_writes=plain.get("heartbeat_writes", 0),
        bytes_downloaded=plain.get("bytes_downloaded", 0),
        bytes_uploaded=plain.get("bytes_uploaded", 0),
        phase_buckets=buckets,
        phase_sums=sums,
    )


@dataclass(frozen=True, slots=True)
class Due:
    """`new` jobs whose run_after has passed: what workers could claim now."""

    count: int
    oldest_age_s: float  # how long the oldest of them has waited (0 when none)
    now: datetime  # the database's clock, for ages computed elsewhere


def count_due(conn: Connection) -> Due:
    """Reads the claim index (status = 'new' rows only)."""
    row = conn.execute(
        text(
            f"""
            SELECT count(*) AS n, now() AS now,
                   COALESCE(EXTRACT(EPOCH FROM now() - min(run_after)), 0) AS oldest
            FROM {_JOBS} WHERE status = 'new' AND run_after <= now()
            """
        )
    ).one()
    return Due(count=int(row.n), oldest_age_s=max(0.0, float(row.oldest)), now=row.now)


def fold(engine: Engine, *, above_rows: int = FOLD_ABOVE_ROWS) -> bool:
    """Replace the delta rows by one row per (name, label) when there are many.

    Safe beside writers: the DELETE sees only rows committed before it started, and
    what it removes is inserted back summed in the same transaction. Returns whether it
    folded (False: few rows, or another reader is folding right now).
    """
    with engine.begin() as conn:
        many = conn.execute(
            text(f"SELECT count(*) > :n FROM (SELECT 1 FROM {_COUNTERS} LIMIT :n + 1) AS r"),
            {"n": above_rows},
        ).scalar()
        if not many:
            return False
        if not conn.execute(
            text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": _FOLD_LOCK}
        ).scalar():
            return False
        conn.execute(
            text(
                f"""
                WITH gone AS (DELETE FROM {_COUNTERS} RETURNING name, label, value)
                INSERT INTO {_COUNTERS} (name, label, value)
                SELECT name, label, sum(value) FROM gone GROUP BY name, label
                HAVING sum(value) <> 0 OR name = 'jobs'
                """
            )
        )
    return True
