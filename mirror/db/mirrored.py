"""Statements about what is mirrored, for `mirror sync`, `verify` and `import-manifests`.

Kept beside the queue's JobRepository rather than in it: these read whole item
histories (the newest job, the newest done job) instead of moving one job through its
lease, and none of them is fenced, since none touches a running attempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.schema import JOBS as _JOBS
from mirror.domain.jobs import ItemHistory, JobRecord
from mirror.domain.manifest import RestoredJob

_JOB_COLUMNS = ", ".join(JobRecord.__slots__)


@raises_unavailable
class MirroredItems:
    """Read and change whole item histories; each method is one short transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def histories(self, item_ids: Sequence[str]) -> dict[str, ItemHistory]:
        """Newest job and newest done job of each item that has any job (one query)."""
        if not item_ids:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"""
                    SELECT latest.item_id, latest.status, done.id AS done_id, done.source,
                        latest.status = 'removed' AND latest.removed_at IS NOT NULL
                            AND latest.objects_deleted_at IS NULL AS pending_removal
                    FROM (
                        SELECT DISTINCT ON (item_id) item_id, status, removed_at,
                            objects_deleted_at
                        FROM {_JOBS}
                        WHERE item_id = ANY(:ids)
                        ORDER BY item_id, created_at DESC
                    ) AS latest
                    LEFT JOIN LATERAL (
                        SELECT id, source FROM {_JOBS}
                        WHERE item_id = latest.item_id AND status = 'done'
                        ORDER BY created_at DESC LIMIT 1
                    ) AS done ON TRUE
                    """
                ),
                {"ids": list(item_ids)},
            ).all()
        return {
            row.item_id: ItemHistory(
                item_id=row.item_id,
                latest_status=row.status,
                done_source=row.source,
                has_done=row.done_id is not None,
                pending_removal=bool(row.pending_removal),
            )
            for row in rows
        }

    def mirrored_item_ids(self) -> set[str]:
        """Items with a done job and no active one: whose objects should be in the bucket."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"""
                    SELECT DISTINCT item_id FROM {_JOBS} AS j
                    WHERE status = 'done' AND NOT EXISTS (
                        SELECT 1 FROM {_JOBS} WHERE item_id = j.item_id
                          AND status IN ('new', 'processing'))
                    """
                )
            ).scalars()
            return set(rows)

    def mark_removed(self, item_id: str) -> int:
        """The item left Jellyfin and its objects are deleted already: its done jobs say so
        (no grace: mirror.db.removals marks first and deletes later)."""
        with self.engine.begin() as conn:
            return conn.execute(
                text(
                    f"UPDATE {_JOBS} SET status = 'removed', updated_at = now(), "
                    "removed_at = now(), objects_deleted_at = now() "
                    "WHERE item_id = :item_id AND status = 'done'"
                ),
                {"item_id": item_id},
            ).rowcount

    def probed_sizes(self) -> dict[int, list[tuple[str, str]]]:
        """Size -> (item id, content probe) of each mirrored item whose newest done job
        recorded a content probe: what a renamed file can be recognised by."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"""
                    SELECT DISTINCT ON (item_id) item_id, source->>'size' AS size,
                        source->>'content_probe' AS probe
                    FROM {_JOBS}
                    WHERE status = 'done' AND source ? 'content_probe'
                    ORDER BY item_id, created_at DESC
                    """
                )
            ).all()
        sizes: dict[int, list[tuple[str, str]]] = {}
        for row in rows:
            if row.size is not None and str(row.size).isdigit():
                sizes.setdefault(int(row.size), []).append((row.item_id, row.probe))
        return sizes

    def refresh_source(self, item_id: str, facts: dict[str, object]) -> int:
        """Merge `facts` into the `source` of the item's newest done job: sync found its
        file only touched (same content probe), so the new ETag is the mirrored file's."""
        with self.engine.begin() as conn:
            return conn.execute(
                text(
                    f"UPDATE {_JOBS} SET source = COALESCE(source, '{{}}'::jsonb) "
                    "|| CAST(:facts AS jsonb), updated_at = now() "
                    f"WHERE id = (SELECT id FROM {_JOBS} WHERE item_id = :item_id "
                    "AND status = 'done' ORDER BY created_at DESC LIMIT 1)"
                ),
                {"item_id": item_id, "facts": json.dumps(facts)},
            ).rowcount

    def done_jobs(self, item_ids: Sequence[str] | None, batch: int = 1000) -> Iterator[JobRecord]:
        """The newest done job of each item (all items when None), in batches by item id."""
        after = ""
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    text(
                        f"""
                        SELECT DISTINCT ON (item_id) {_JOB_COLUMNS} FROM {_JOBS}
                        WHERE status = 'done' AND item_id > :after
                          AND (CAST(:ids AS text[]) IS NULL OR item_id = ANY(:ids))
                        ORDER BY item_id, created_at DESC
                        LIMIT :batch
                        """
                    ),
                    {
                        "after": after,
                        "ids": list(item_ids) if item_ids is not None else None,
                        "batch": batch,
                    },
                ).all()
            for row in rows:
                yield JobRecord(**dict(row._mapping))
            if len(rows) < batch:
                return
            after = rows[-1].item_id

    def restore(self, job: RestoredJob) -> bool:
        """Insert a done row rebuilt from a manifest, unless the item has any job already."""
        with self.engine.begin() as conn:
            row = conn.execute(
                text(
                    f"""
                    INSERT INTO {_JOBS} (id, item_id, status, attempts, max_attempts,
                        video_key, video, audio_keys, source, manifest_key,
                        hls_key, subtitle_keys, finished_at, created_at, updated_at)
                    SELECT :id, :item_id, 'done', :attempts, GREATEST(:attempts, 3),
                        :video_key, CAST(:video AS jsonb), CAST(:audio_keys AS jsonb),
                        CAST(:source AS jsonb), :manifest_key,
                        :hls_key, CAST(:subtitle_keys AS jsonb),
                        COALESCE(:finished_at, now()), COALESCE(:finished_at, now()), now()
                    WHERE NOT EXISTS (SELECT 1 FROM {_JOBS} WHERE item_id = :item_id)
                    ON CONFLICT (id) DO NOTHING
                    RETURNING id
                    """
                ),
                {
                    "id": job.job_id,
                    "item_id": job.item_id,
                    "attempts": job.attempts,
                    "video_key": job.video_key,
                    "video": _json(job.video),
                    "audio_keys": json.dumps(job.audio_keys),
                    "source": _json(job.source),
                    "manifest_key": job.manifest_key,
                    "hls_key": job.hls_key,
                    "subtitle_keys": json.dumps(job.subtitle_keys or []),
                    "finished_at": job.finished_at,
                },
            ).first()
        return row is not None


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value)
