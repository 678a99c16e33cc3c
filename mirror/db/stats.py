"""Read-only figures about the queue for `/healthz` and `/metrics`, straight from Postgres.

Metrics come from the tables, not from counters in one process, so a scrape of any
`mirror serve` covers every worker on every host. Cost with millions of finished rows:
two full scans per scrape, one of jobs (counts per status: no index covers finished
rows) and one of job_attempts (totals and phase histograms together); on a small 2-core
machine about 0.2 s and 0.6 s per million rows. Everything about active jobs reads only
the partial indexes of new and processing rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from mirror.db.engine import describe_database_error
from mirror.db.models import STATUSES

_JOBS = "media_mirror.jobs"
_ATTEMPTS = "media_mirror.job_attempts"
PHASES = ("download", "transcode", "upload")


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


class QueueStats:
    """The statements behind health and metrics; each call is one short read."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def database_problem(self) -> str | None:
        """None when Postgres answers and the job table exists, else what is wrong."""
        try:
            with self.engine.connect() as conn:
                table = conn.execute(text(f"SELECT to_regclass('{_JOBS}')")).scalar()
        except DBAPIError as error:
            return f"cannot query Postgres: {describe_database_error(error)}"
        except SQLAlchemyError as error:  # e.g. every pooled connection busy
            return f"cannot query Postgres: {type(error).__name__}"
        if table is None:
            return "the job table does not exist: run `mirror db upgrade`"
        return None

    def snapshot(self, bucket_bounds: Sequence[float], running_limit: int = 500) -> QueueSnapshot:
        """Every figure of a scrape, read in one transaction so they agree with each other."""
        with self.engine.connect() as conn:
            # One snapshot for all statements: the totals and counts describe one instant.
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            counts = self._jobs_by_status(conn)
            due, oldest = self._due(conn)
            totals, phases = self._attempt_history(conn, bucket_bounds)
            return QueueSnapshot(
                jobs_by_status=counts,
                due=due,
                oldest_due_age_s=oldest,
                attempts=totals,
                phases=phases,
                running=self._running(conn, running_limit),
                waiting=self._waiting(conn),
            )

    @staticmethod
    def _jobs_by_status(conn: Connection) -> dict[str, int]:
        """Full scan of jobs (no index on status covers finished rows)."""
        rows = conn.execute(text(f"SELECT status, count(*) AS n FROM {_JOBS} GROUP BY status"))
        counts = dict.fromkeys(STATUSES, 0)
        counts.update({row.status: row.n for row in rows})
        return counts

    @staticmethod
    def _waiting(conn: Connection) -> dict[str, int]:
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
    def _due(conn: Connection) -> tuple[int, float]:
        """Reads the claim index (status = 'new' rows only)."""
        row = conn.execute(
            text(
                f"""
                SELECT count(*) AS n,
                       COALESCE(EXTRACT(EPOCH FROM now() - min(run_after)), 0) AS oldest
                FROM {_JOBS} WHERE status = 'new' AND run_after <= now()
                """
            )
        ).one()
        return int(row.n), max(0.0, float(row.oldest))

    @staticmethod
    def _attempt_history(
        conn: Connection, bounds: Sequence[float]
    ) -> tuple[AttemptTotals, tuple[PhaseDurations, ...]]:
        """Full scan of job_attempts, once: totals and every phase's `le` counts together.

        Grouped by outcome (NULL: still running) and summed here, so outcomes come free.
        """
        ordered = sorted(float(bound) for bound in bounds)
        columns = []
        for phase in PHASES:
            columns += [
                f"count({phase}_s) AS {phase}_n",
                f"COALESCE(sum({phase}_s), 0) AS {phase}_sum",
                *(
                    f"count(*) FILTER (WHERE {phase}_s <= :b{i}) AS {phase}_le{i}"
                    for i in range(len(ordered))
                ),
            ]
        rows = conn.execute(
            text(
                f"""
                SELECT outcome, count(*) AS n,
                       COALESCE(sum(heartbeat_writes), 0) AS beats,
                       COALESCE(sum(bytes_downloaded), 0) AS down,
                       COALESCE(sum(bytes_uploaded), 0) AS up,
                       {", ".join(columns)}
                FROM {_ATTEMPTS} GROUP BY outcome
                """
            ),
            {f"b{i}": bound for i, bound in enumerate(ordered)},
        ).all()

        def total(column: str) -> int:
            return sum(int(getattr(row, column)) for row in rows)

        totals = AttemptTotals(
            claims=total("n"),
            by_outcome={row.outcome: int(row.n) for row in rows if row.outcome is not None},
            heartbeat_writes=total("beats"),
            bytes_downloaded=total("down"),
            bytes_uploaded=total("up"),
        )
        phases = tuple(
            PhaseDurations(
                phase=phase,
                buckets=tuple((bound, total(f"{phase}_le{i}")) for i, bound in enumerate(ordered)),
                count=total(f"{phase}_n"),
                sum_s=sum(float(getattr(row, f"{phase}_sum")) for row in rows),
            )
            for phase in PHASES
        )
        return totals, phases

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
