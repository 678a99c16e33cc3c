"""Dashboard sessions ended by a logout: `media_mirror.ended_sessions` (mirror.web.auth).

In Postgres, like all of `mirror serve`'s state, so a logout on one instance holds on
every other and across restarts. One indexed look-up per logged-in request.
"""

from __future__ import annotations

from sqlalchemy import Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.schema import SCHEMA

_TABLE = f"{SCHEMA}.ended_sessions"


@raises_unavailable
class EndedSessionStore:
    """Records and answers which session ids were logged out."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def end(self, session_id: str, ttl_s: float) -> None:
        """Refuse `session_id` until its cookie would have expired anyway; prune the rest."""
        with self.engine.begin() as conn:
            conn.execute(text(f"DELETE FROM {_TABLE} WHERE expires_at < now()"))
            conn.execute(
                text(
                    f"INSERT INTO {_TABLE} (session_id, expires_at) "
                    "VALUES (:id, now() + make_interval(secs => :ttl)) "
                    "ON CONFLICT (session_id) DO NOTHING"
                ),
                {"id": session_id, "ttl": ttl_s},
            )

    def has_ended(self, session_id: str) -> bool:
        with self.engine.connect() as conn:
            row = conn.execute(
                text(f"SELECT 1 FROM {_TABLE} WHERE session_id = :id"), {"id": session_id}
            ).first()
        return row is not None
