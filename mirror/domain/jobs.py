"""The job vocabulary every layer shares: statuses, the lease, the fence, an attempt's figures.

The core (heartbeat, attempt, pipeline, worker) speaks only these words; the database
adapter (`mirror.db`) maps them onto rows and raises `DatabaseUnavailable` for an outage,
so nothing outside `mirror.db` needs to know about SQLAlchemy or psycopg.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from mirror.domain.errors import MirrorError
from mirror.domain.item import title_label


class Status(enum.StrEnum):
    """A job's `status` column (README: Inspecting jobs)."""

    NEW = "new"
    PROCESSING = "processing"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REMOVED = "removed"


STATUSES: tuple[str, ...] = tuple(status.value for status in Status)
ACTIVE_STATUSES: tuple[str, ...] = (Status.NEW.value, Status.PROCESSING.value)


def row_json(record: Any) -> dict[str, Any]:
    """A slotted record as JSON-friendly data: uuids and times as strings.

    The lease token is left out: it is the running attempt's capability, not for display.
    """
    data: dict[str, Any] = {}
    for name in record.__slots__:
        if name == "lease_token":
            continue
        value = getattr(record, name)
        if isinstance(value, uuid.UUID):
            value = str(value)
        elif isinstance(value, datetime):
            value = value.isoformat()
        data[name] = value
    return data


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One row of media_mirror.jobs as plain data."""

    id: uuid.UUID
    item_id: str
    status: str
    priority: int
    attempts: int
    max_attempts: int
    run_after: datetime
    worker_id: str | None
    lease_token: uuid.UUID | None
    taken_at: datetime | None
    heartbeat_at: datetime | None
    heartbeat_data: dict[str, Any] | None
    video_key: str | None
    audio_keys: list[dict[str, Any]] | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    video: dict[str, Any] | None = None  # {key, size, sha256, codec, width, height, duration_s}
    skipped_streams: list[dict[str, Any]] | None = None  # {index, kind, codec, language, reason}
    source: dict[str, Any] | None = None  # the media source mirrored: Id, Path, Size, ...
    manifest_key: str | None = None  # <prefix>/<item_id>/manifest.json, written last
    hls_key: str | None = None  # <prefix>/<item_id>/master.m3u8 (output format hls)
    # WebVTT subtitles: {key, stream_index, language, title, codec, forced, external}
    subtitle_keys: list[dict[str, Any]] | None = None
    # Found gone from Jellyfin, and its objects deleted after MIRROR_DELETE_GRACE.
    removed_at: datetime | None = None
    objects_deleted_at: datetime | None = None
    # What people call the item (mirror.domain.item.ItemTitle): from the enqueue, the sweep,
    # sync or the webhook, refreshed by each attempt from the item it fetched.
    item_name: str | None = None
    item_type: str | None = None
    series_name: str | None = None
    season_number: int | None = None
    episode_number: int | None = None
    year: int | None = None
    library_name: str | None = None
    series_id: str | None = None
    season_id: str | None = None
    parent_id: str | None = None

    @property
    def title(self) -> str | None:
        """ "Series S01E02 Name" or "Name (Year)"; None until a title is known."""
        return title_label(
            self.item_name, self.series_name, self.season_number, self.episode_number, self.year
        )

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict for `--json` output, with the readable `title`."""
        return {**row_json(self), "title": self.title}


@dataclass(frozen=True, slots=True)
class Lease:
    """What a claimed attempt holds: the job and its fencing token."""

    job: JobRecord
    token: uuid.UUID

    @property
    def job_id(self) -> uuid.UUID:
        return self.job.id


class Fence(enum.Enum):
    """Outcome of a fenced statement (heartbeat, mark_done, ...)."""

    OK = "ok"
    CANCELLED = "cancelled"  # the job was cancelled: stop, leave it cancelled
    LEASE_LOST = "lease_lost"  # another attempt owns the job (or it was reset): touch nothing
    # Only from `heartbeat`: the beat was written, but the fleet is paused (`mirror pause`),
    # so the attempt releases its job to the queue without using an attempt.
    PAUSED = "paused"


class FleetMode(enum.StrEnum):
    """What every worker of the fleet may do now (`mirror pause`, `mirror resume`)."""

    RUNNING = "running"  # claims go on
    PAUSED = "paused"  # no claims; running jobs are released at their next heartbeat
    DRAINING = "draining"  # no claims; running jobs finish


@dataclass(frozen=True, slots=True)
class FleetState:
    """The fleet's mode, who set it when (and why), and the jobs it concerns right now."""

    mode: FleetMode
    changed_at: datetime | None
    changed_by: str | None
    reason: str | None
    running: int  # jobs `processing` now
    queued: int  # jobs `new` (due or waiting for their run_after)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "paused": self.mode is FleetMode.PAUSED,
            "draining": self.mode is FleetMode.DRAINING,
            "changed_at": self.changed_at.isoformat() if self.changed_at else None,
            "changed_by": self.changed_by,
            "reason": self.reason,
            "running": self.running,
            "queued": self.queued,
        }


@dataclass(frozen=True, slots=True)
class FleetChange:
    """What `pause`/`resume` did: the mode before, and the state after."""

    before: FleetMode
    state: FleetState

    @property
    def changed(self) -> bool:
        return self.before is not self.state.mode


class FleetControl(Protocol):
    """Read and set the fleet's mode (Postgres: JobRepository; the fakes: InMemoryJobQueue).

    The workers need no method of it: their claim refuses while the fleet is not
    running, and their heartbeat answers `Fence.PAUSED` while it is paused.
    """

    def fleet_state(self) -> FleetState: ...

    def set_fleet_mode(
        self, mode: FleetMode, *, changed_by: str, reason: str | None = None
    ) -> FleetChange: ...


@dataclass(frozen=True, slots=True)
class AttemptStats:
    """What an attempt measured about itself (None where a phase never ran)."""

    heartbeat_writes: int | None = None
    bytes_downloaded: int | None = None
    bytes_uploaded: int | None = None
    download_s: float | None = None
    transcode_s: float | None = None
    upload_s: float | None = None


@dataclass(frozen=True, slots=True)
class Mirrored:
    """What a pipeline run leaves in S3: the columns its `done` records. The pipeline
    returns it; `run_attempt` alone writes it, like every end state."""

    video_key: str
    audio_keys: list[dict[str, Any]]
    video: dict[str, Any] | None = None
    skipped_streams: list[dict[str, Any]] | None = None
    source: dict[str, Any] | None = None
    manifest_key: str | None = None
    hls_key: str | None = None
    subtitle_keys: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What an enqueue did for one item: its job, and whether the job is new."""

    job: JobRecord
    created: bool  # False: the item already had an active job, returned as is


@dataclass(frozen=True, slots=True)
class ItemHistory:
    """What sync needs of one item: its newest job's status and the newest done job."""

    item_id: str
    latest_status: str
    done_source: dict[str, Any] | None  # `source` of the newest done job
    has_done: bool
    # The newest job is `removed` and its objects are still there (within the grace).
    pending_removal: bool = False


class DatabaseUnavailable(MirrorError):
    """Postgres cannot be reached, dropped us, or every pooled connection stayed busy.

    The database adapter raises it in place of the driver's error; `detail` is the
    driver's first line (psycopg never echoes the password).
    """

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail if detail is not None else message


class ValuesRefused(DatabaseUnavailable):
    """Postgres refused a value (e.g. a \\u0000 in a string, which jsonb refuses).

    A kind of `DatabaseUnavailable`, so callers that know only outages treat it as they
    always did; `mirror db import-manifests` tells it apart to name the manifest at fault.
    """


class JobNotFound(LookupError):
    pass


class JobStateError(RuntimeError):
    """The job is in a status that does not allow the request (e.g. cancel a done job)."""


@dataclass(frozen=True, slots=True)
class Rescued:
    """A stale job the reaper handled: back to `new`, or `failed` when attempts ran out."""

    job_id: uuid.UUID
    item_id: str
    status: str
    attempts: int
    previous_worker: str | None
