"""Read-only figures about the queue for `/healthz` and `/metrics`, straight from Postgres.

Metrics come from Postgres, not from counters in one process, so a scrape of any
`mirror serve` covers every worker on every host. Counts per status and sums over the
attempt history come from the running totals that triggers keep (`mirror/db/counters`),
so a scrape costs the same at a million finished jobs as at ten; everything about
active jobs reads only the partial indexes of new and processing rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, text

from mirror.db.counters import PHASES, Totals, count_due, fold, read_totals
from mirror.db.engine import find_schema_problem, raises_unavailable
from mirror.db.schema import FLEET as _FLEET
from mirror.db.schema import JOBS as _JOBS


@dataclass(frozen=True, slots=True)
class AttemptTotals:
    """Sums over the attempt history; `by_outcome` counts ended attempts only."""

    claims: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)
    heartbeat_writes: int = 0
    bytes_downloaded: int = 0
    bytes_uploaded: int = 0


@dataclass(frozen=True, slots=True)
class PhaseDurations:
    """A Prometheus-style histogram of one phase: cumulative counts per upper bound."""

    phase: str
    buckets: tuple[tuple[float, int], ...]  # (bound, how many took <= bound seconds)
    count: int
    sum_s: float


@dataclass(frozen=True, slots=True)
class RunningJob:
    job_id: str
    item_id: str
    worker_id: str
    heartbeat_age_s: float


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    jobs_by_status: dict[str, int]
    due: int  # `new` jobs whose run_after has passed: what workers could claim now
    oldest_due_age_s: float  # how long the oldest due job has waited (0 when none)
    attempts: AttemptTotals
    phases: tuple[PhaseDurations, ...]
    running: tuple[RunningJob, ...]
    # `new` jobs released because they are not ready, by what they wait for (the phase
    # their heartbeat_data shows: "waiting for disk", "waiting for Jellyfin to probe").
    waiting: dict[str, int] = field(default_factory=dict)
    # The fleet's mode (`mirror pause`): running, paused or draining.
    fleet_mode: str = "running"


@raises_unavailable
class QueueStats:
    """The statements behind health and metrics; each call is one short read."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def database_problem(self) -> str | None:
        """None when Postgres answers and the job table exists, else what is wrong (one
        line for /healthz: no host, no URL)."""
        problem = find_schema_problem(self.engine)
        if problem is None:
            return None
        return problem.detail if problem.reachable else f"cannot query Postgres: {problem.detail}"

    def jobs_by_status(self) -> dict[str, int]:
        """Jobs per status, from the running totals (no scan of the job table)."""
        with self.engine.connect() as conn:
            return read_totals(conn).jobs_by_status

    def snapshot(self, bucket_bounds: Sequence[float], running_limit: int = 500) -> QueueSnapshot:
        """Every figure of a scrape, read in one transaction so they agree with each other."""
        fold(self.engine)
        with self.engine.connect() as conn:
            # One snapshot for all statements: the totals and counts describe one instant.
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            running_totals = read_totals(conn)
            due = count_due(conn)
            totals, phases = self._from_totals(running_totals, bucket_bounds)
            return QueueSnapshot(
                jobs_by_status=running_totals.jobs_by_status,
                due=due.count,
                oldest_due_age_s=due.oldest_age_s,
                attempts=totals,
                phases=phases,
                running=self._running(conn, running_limit),
                waiting=self._count_waiting(conn),
                fleet_mode=self._fleet_mode(conn),
            )

    @staticmethod
    def _fleet_mode(conn: Connection) -> str:
        mode = conn.execute(text(f"SELECT mode FROM {_FLEET} WHERE id = 1")).scalar()
        return str(mode or "running")

    @staticmethod
    def _count_waiting(conn: Connection) -> dict[str, int]:
        """Reads the claim index (status = 'new' rows only)."""
        rows = conn.execute(
            text(
                f"""
                SELECT heartbeat_data ->> 'phase' AS phase, count(*) AS n FROM {_JOBS}
                WHERE status = 'new' AND heartbeat_data ->> 'phase' LIKE 'waiting%'
                GROUP BY 1
                """
            )
        )
        return {str(row.phase): int(row.n) for row in rows}

    @staticmethod
    def _from_totals(
        totals: Totals, bounds: Sequence[float]
    ) -> tuple[AttemptTotals, tuple[PhaseDurations, ...]]:
        """The attempt figures of a scrape, from the running totals (no scan)."""
        attempts = AttemptTotals(
            claims=totals.claims,
            by_outcome=dict(totals.by_outcome),
            heartbeat_writes=totals.heartbeat_writes,
            bytes_downloaded=totals.bytes_downloaded,
            bytes_uploaded=totals.bytes_uploaded,
        )
        phases = []
        for phase in PHASES:
            buckets, count = totals.phase_histogram(phase, bounds)
            phases.append(
                PhaseDurations(
                    phase=phase,
                    buckets=buckets,
                    count=count,
                    sum_s=totals.phase_sums.get(phase, 0.0),
                )
            )
        return attempts, tuple(phases)

    @staticmethod
    def _running(conn: Connection, limit: int) -> tuple[RunningJob, ...]:
        """Reads the stale-scan index (status = 'processing' rows only), oldest beat first."""
        rows = conn.execute(
            text(
                f"""
                SELECT id, item_id, COALESCE(worker_id, '') AS worker_id,
                       GREATEST(EXTRACT(EPOCH FROM now() - heartbeat_at), 0) AS age
                FROM {_JOBS} WHERE status = 'processing'
                ORDER BY heartbeat_at LIMIT :limit
                """
            ),
            {"limit": limit},
        ).all()
        return tuple(
            RunningJob(
                job_id=str(row.id),
                item_id=row.item_id,
                worker_id=row.worker_id,
                heartbeat_age_s=float(row.age),
            )
            for row in rows
        )
