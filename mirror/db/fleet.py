"""The fleet's one row: pause, drain and resume every worker at once (`mirror pause`).

The claim (`leases.claim_next`) refuses while the row is not `running`, and the heartbeat
returns `PAUSED` while it is `paused`, so a change here reaches every worker on every host
at its next claim or heartbeat. A resume NOTIFYs like an enqueue, waking idle workers.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.fencing import notify_workers
from mirror.db.schema import FLEET as _FLEET
from mirror.db.schema import JOBS as _JOBS
from mirror.domain.jobs import FleetChange, FleetMode, FleetState


@raises_unavailable
class JobFleet:
    """Read and set the fleet's mode: each method is one short transaction."""

    engine: Engine

    def fleet_state(self) -> FleetState:
        """The mode, who set it when and why, and the running and queued jobs now."""
        with self.engine.connect() as conn:
            return _read(conn)

    def set_fleet_mode(
        self, mode: FleetMode, *, changed_by: str, reason: str | None = None
    ) -> FleetChange:
        """Set the mode for every worker. Setting the mode it already has changes nothing
        (the first pause's time, author and reason stay); a resume wakes idle workers."""
        with self.engine.begin() as conn:
            before = conn.execute(
                text(f"SELECT mode FROM {_FLEET} WHERE id = 1 FOR UPDATE")
            ).scalar()
            previous = FleetMode(before) if before is not None else FleetMode.RUNNING
            if previous is not mode:
                conn.execute(
                    text(
                        f"""
                        INSERT INTO {_FLEET} (id, mode, changed_at, changed_by, reason)
                        VALUES (1, :mode, now(), :by, :reason)
                        ON CONFLICT (id) DO UPDATE
                        SET mode = :mode, changed_at = now(), changed_by = :by, reason = :reason
                        """
                    ),
                    {"mode": mode.value, "by": changed_by, "reason": reason},
                )
                if mode is FleetMode.RUNNING:
                    notify_workers(conn)
            return FleetChange(before=previous, state=_read(conn))


def _read(conn: Connection) -> FleetState:
    row = conn.execute(
        text(
            f"""
            SELECT f.mode, f.changed_at, f.changed_by, f.reason,
                   (SELECT count(*) FROM {_JOBS} WHERE status = 'processing') AS running,
                   (SELECT count(*) FROM {_JOBS} WHERE status = 'new') AS queued
            FROM (SELECT 1) AS one
            LEFT JOIN {_FLEET} AS f ON f.id = 1
            """
        )
    ).one()
    return FleetState(
        mode=FleetMode(row.mode or FleetMode.RUNNING),
        changed_at=row.changed_at,
        changed_by=row.changed_by,
        reason=row.reason,
        running=int(row.running),
        queued=int(row.queued),
    )
