"""Title facts on job rows: what people call an item, searched by `mirror jobs --search`,
the dashboard and `/api/jobs?q=`.

The enqueue, the sweep, sync and the webhook record what they know of an item; each
attempt refreshes them from the item it fetched (fenced, like every write of a claimed
job). A fact given as None keeps what the row had: a webhook body without SeriesName,
or `/Items/{id}` (which does not name the library), never erases a known fact. Every
job of the item takes the facts, so its history reads and searches the same.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import asdict, fields

from sqlalchemy import Connection, Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.fencing import why_fenced
from mirror.db.schema import JOBS as _JOBS
from mirror.db.schema import TITLE_SEARCH_TEXT
from mirror.domain.item import ItemTitle
from mirror.domain.jobs import Fence

TITLE_INTEGERS = frozenset({"season_number", "episode_number", "year"})
TITLE_COLUMNS: tuple[str, ...] = tuple(field.name for field in fields(ItemTitle))


def _new_value(column: str) -> str:
    kind = "integer" if column in TITLE_INTEGERS else "text"
    return f"COALESCE(CAST(:{column} AS {kind}), {column})"


# Rows that already say the same are left alone: a sweep of a known library rewrites none.
_RECORD = f"""
    UPDATE {_JOBS} SET {", ".join(f"{c} = {_new_value(c)}" for c in TITLE_COLUMNS)}
    WHERE item_id = :item_id
      AND ({", ".join(TITLE_COLUMNS)}) IS DISTINCT FROM
          ({", ".join(_new_value(c) for c in TITLE_COLUMNS)})
"""


def record_titles(conn: Connection, titles: Mapping[str, ItemTitle]) -> None:
    """Every job row of each item (keyed by normalized item id) takes the facts given.

    In item id order, so two listings updating the same items lock them in one order.
    """
    if titles:
        rows = [{"item_id": item_id, **asdict(titles[item_id])} for item_id in sorted(titles)]
        conn.execute(text(_RECORD), rows)


def like_pattern(search: str) -> str:
    """`search` as an ILIKE pattern matching it anywhere, its own `%`, `_`, `\\` literal."""
    escaped = search.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# The search's condition, served by ix_jobs_title_search (a GIN trigram index).
TITLE_MATCHES = f"{TITLE_SEARCH_TEXT} ILIKE :pattern"


@raises_unavailable
class JobTitles:
    """Recording title facts: a listing's (sync), and the attempt's fenced refresh."""

    engine: Engine

    def record_titles(self, titles: Mapping[str, ItemTitle]) -> None:
        """Every job of each listed item takes its facts (one short transaction)."""
        with self.engine.begin() as conn:
            record_titles(conn, titles)

    def refresh_title(self, job_id: uuid.UUID, token: uuid.UUID, title: ItemTitle) -> Fence:
        """Record the facts of the item the attempt fetched, while it holds the job."""
        with self.engine.begin() as conn:
            held = conn.execute(
                text(
                    f"SELECT item_id FROM {_JOBS} "
                    "WHERE id = :id AND status = 'processing' AND lease_token = :token"
                ),
                {"id": job_id, "token": token},
            ).first()
            if held is None:
                return why_fenced(conn, job_id, token)
            record_titles(conn, {held.item_id: title})
            return Fence.OK
