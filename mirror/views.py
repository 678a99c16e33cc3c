"""How jobs look to people: the `mirror jobs` table and the `mirror show` details."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from mirror.db.attempt_log import AttemptRecord
from mirror.domain.durations import format_bytes, format_duration, format_rate
from mirror.domain.jobs import JobRecord, Status

STATUS_STYLES: dict[str, str] = {  # Status members: the rows' text finds them
    Status.NEW: "cyan",
    Status.PROCESSING: "yellow",
    Status.DONE: "green",
    Status.FAILED: "red",
    Status.CANCELLED: "magenta",
    Status.REMOVED: "dim",
}


def heartbeat_age(record: JobRecord, now: datetime | None = None) -> str:
    """Age of the last sign of life, only meaningful while processing."""
    if record.status != Status.PROCESSING or record.heartbeat_at is None:
        return ""
    now = now or datetime.now(UTC)
    return format_duration(max(0.0, (now - record.heartbeat_at).total_seconds()) or 0.001)


def progress_summary(data: dict[str, Any] | None) -> tuple[str, str, str]:
    """(phase, percent, counts) from heartbeat_data, blank where unknown; a waiting job's
    note stands in for its counts."""
    if not data:
        return "", "", ""
    percent = data.get("percent")
    counts = ""
    if data.get("frames_done") is not None:
        total = data.get("frames_total")
        counts = f"{data['frames_done']}/{total} frames" if total else f"{data['frames_done']} fr"
    elif data.get("bytes_done") is not None:
        total = data.get("bytes_total")
        done = format_bytes(data["bytes_done"])
        counts = f"{done}/{format_bytes(total)}" if total else done
    elif data.get("note"):  # why a claimed job is not moving, e.g. waiting for a slot
        counts = str(data["note"])
    return (
        str(data.get("phase", "")),
        f"{percent:.1f}%" if isinstance(percent, int | float) else "",
        counts,
    )


def speed_text(data: dict[str, Any] | None) -> str:
    """`45.1 MB/s` (download, upload) or `2.5x` (ffmpeg), blank where unknown.

    Rows written before speeds were stored as numbers hold the text under `speed`.
    """
    data = data or {}
    bytes_per_s = _number(data, "speed_bps")
    if bytes_per_s is not None:
        return format_rate(bytes_per_s)
    factor = _number(data, "speed_factor")
    if factor is not None:
        return f"{factor:g}x"
    legacy = data.get("speed")
    return legacy if isinstance(legacy, str) else ""


def phase_eta(data: dict[str, Any] | None, elapsed_s: float | None = None) -> float | None:
    """Seconds left in the current phase, None when it cannot be told.

    From the phase's own rate where the heartbeat has one: bytes left at `speed_bps`
    (download, upload), or media time left at ffmpeg's `speed_factor` (transcode). Else
    from `percent` and `elapsed_s`, the time the phase has run.
    """
    if not data:
        return None
    percent = _number(data, "percent")
    done, total = _number(data, "bytes_done"), _number(data, "bytes_total")
    bytes_per_s = _number(data, "speed_bps")
    if bytes_per_s and done is not None and total:
        return max(0.0, (total - done) / bytes_per_s)
    factor = _number(data, "speed_factor")
    duration = _number(data, "duration_s")
    if factor and duration:
        if percent is not None:
            media_left = duration * (100.0 - percent) / 100.0
        else:
            media_left = duration - (_number(data, "out_time_s") or 0.0)
        return max(0.0, media_left / factor)
    if percent is not None and 0 < percent <= 100 and elapsed_s is not None and elapsed_s > 0:
        return elapsed_s * (100.0 - percent) / percent
    return None


def job_eta(record: JobRecord, now: datetime | None = None) -> str:
    """Time left in a processing job's current phase, for the `--watch` table."""
    if record.status != Status.PROCESSING:
        return ""
    data = record.heartbeat_data or {}
    elapsed = None
    # Since the claim is the phase's own running time only for the first phase.
    if data.get("phase") == "download" and record.taken_at is not None:
        elapsed = ((now or datetime.now(UTC)) - record.taken_at).total_seconds()
    eta = phase_eta(data, elapsed)
    return "" if eta is None else format_duration(max(1.0, float(round(eta))))


def _number(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


TITLE_WIDTH = 40  # "Series S01E02 Episode name" mostly fits; longer ones end in "…"


def jobs_table(
    records: list[JobRecord], now: datetime | None = None, *, with_eta: bool = False
) -> Table:
    """The `mirror jobs` table; `with_eta` adds the live view's time-left column."""
    table = Table(show_lines=False, header_style="bold")
    columns = ["job", "item", "title", "status", "phase", "%", "progress", "speed", "beat"]
    columns.append("tries")
    if with_eta:
        columns.insert(columns.index("speed") + 1, "eta")
    for column in columns:
        if column == "title":  # one line, cut with an ellipsis: the row stays a row
            table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=TITLE_WIDTH)
        else:
            table.add_column(column, no_wrap=column in ("job", "item"))
    table.add_column("error", overflow="fold", max_width=60)
    for record in records:
        phase, percent, counts = progress_summary(record.heartbeat_data)
        speed = speed_text(record.heartbeat_data)
        cells: list[str | Text] = [
            str(record.id)[:8],
            record.item_id,
            record.title or "",
            Text(record.status, style=STATUS_STYLES.get(record.status, "")),
            phase,
            percent,
            counts,
            speed,
        ]
        if with_eta:
            cells.append(job_eta(record, now))
        cells += [
            heartbeat_age(record, now),
            f"{record.attempts}/{record.max_attempts}",
            record.error or "",
        ]
        table.add_row(*cells)
    if not records:
        table.caption = "no jobs"
    return table


def job_details(
    record: JobRecord, attempts: list[AttemptRecord] | None = None, now: datetime | None = None
) -> Group:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for name, value in detail_rows(record, now):
        table.add_row(name, Text(value, style=STATUS_STYLES.get(value, "")))
    if not attempts:
        return Group(table)
    return Group(table, Text(""), attempts_table(attempts))


def detail_rows(record: JobRecord, now: datetime | None = None) -> list[tuple[str, str]]:
    """(label, value) lines of `mirror show`, shared with the dashboard's job page."""
    phase, percent, counts = progress_summary(record.heartbeat_data)
    rows: list[tuple[str, str]] = [
        ("job", str(record.id)),
        ("item", record.item_id),
    ]
    rows += title_rows(record)
    rows += [
        ("status", record.status),
        ("priority", str(record.priority)),
        ("attempts", f"{record.attempts} of {record.max_attempts}"),
        ("created", record.created_at.isoformat()),
        ("run after", record.run_after.isoformat()),
    ]
    if record.worker_id:
        rows.append(("worker", record.worker_id))
    encoder = (record.heartbeat_data or {}).get("encoder")
    if encoder:  # the worker's video encoder (MIRROR_VIDEO_ENCODER), named in its beats
        rows.append(("encoder", str(encoder)))
    if record.taken_at:
        rows.append(("taken", record.taken_at.isoformat()))
    if record.heartbeat_at:
        age = heartbeat_age(record, now)
        rows.append(
            ("heartbeat", record.heartbeat_at.isoformat() + (f" ({age} ago)" if age else ""))
        )
    if phase:
        rows.append(("progress", " ".join(part for part in (phase, percent, counts) if part)))
    if record.finished_at:
        rows.append(("finished", record.finished_at.isoformat()))
    if record.removed_at:
        rows.append(("removed", f"{record.removed_at.isoformat()} (gone from Jellyfin)"))
    if record.objects_deleted_at:
        rows.append(("objects deleted", record.objects_deleted_at.isoformat()))
    elif record.removed_at:
        rows.append(("objects deleted", "not yet: after MIRROR_DELETE_GRACE, by sync --delete"))
    if record.source:
        rows.append(("source", _source_line(record.source)))
    if record.video_key:
        rows.append(("video", _output_line(record.video_key, record.video, _VIDEO_FACTS)))
    for rendition in (record.video or {}).get("renditions") or []:  # a ladder's lower rungs
        rows.append(("video", _output_line(str(rendition.get("key")), rendition, _VIDEO_FACTS)))
    for audio in record.audio_keys or []:
        rows.append(("audio", _output_line(str(audio.get("key")), audio, _AUDIO_FACTS)))
    for subtitle in record.subtitle_keys or []:
        rows.append(("subtitle", _output_line(str(subtitle.get("key")), subtitle, _SUB_FACTS)))
    if record.hls_key:
        rows.append(("hls", record.hls_key))
    for skipped in record.skipped_streams or []:
        rows.append(("skipped", _skipped_line(skipped)))
    if record.error:
        rows.append(("error", record.error))
    return rows


def title_rows(record: JobRecord) -> list[tuple[str, str]]:
    """What the item is called and where it sits, as far as the row knows it."""
    rows: list[tuple[str, str]] = []
    if record.title:
        rows.append(("title", record.title))
    kind = " in ".join(
        part
        for part in (record.item_type, record.library_name and f"library {record.library_name!r}")
        if part
    )
    if kind:
        rows.append(("type", kind))
    parents = [
        f"{label} {value}"
        for label, value in (
            ("series", record.series_id),
            ("season", record.season_id),
            ("parent", record.parent_id),
        )
        if value
    ]
    if parents:
        rows.append(("parents", ", ".join(parents)))
    return rows


_VIDEO_FACTS = ("codec", "width", "height")
_AUDIO_FACTS = ("language", "title", "codec")
_SUB_FACTS = ("language", "title", "codec")


def _output_line(key: str, facts: dict[str, Any] | None, labels: tuple[str, ...]) -> str:
    """`key (eng, English, aac) 1.2 MiB sha256 ab12...`: what was stored and its checksum."""
    facts = facts or {}
    label = ", ".join(str(facts[k]) for k in labels if facts.get(k) is not None)
    line = f"{key} ({label})" if label else key
    if isinstance(facts.get("size"), int):
        line += f" {format_bytes(facts['size'])}"
    if facts.get("sha256"):
        line += f" sha256 {facts['sha256']}"
    return line


def _source_line(source: dict[str, Any]) -> str:
    """The media source that was downloaded: its id, path and size."""
    parts = [str(source[k]) for k in ("media_source_id", "path") if source.get(k)]
    if isinstance(source.get("size"), int):
        parts.append(format_bytes(source["size"]))
    return " ".join(parts)


def _skipped_line(skipped: dict[str, Any]) -> str:
    """`#0 Subtitle subrip eng: external file /m/Movie.en.srt`."""
    facts = " ".join(
        str(skipped[k]) for k in ("kind", "codec", "language") if skipped.get(k) is not None
    )
    index = skipped.get("index")
    prefix = f"#{index} {facts}" if index is not None else facts
    return f"{prefix}: {skipped.get('reason', 'not mirrored')}"


def attempts_table(attempts: list[AttemptRecord]) -> Table:
    """The story of a job: one row per claim, how it ended, and what it took."""
    table = Table(title="attempts", header_style="bold", title_justify="left")
    for column in ("#", "worker", "claimed", "ended", "outcome", "download", "transcode"):
        table.add_column(column)
    table.add_column("upload")
    table.add_column("error", overflow="fold", max_width=60)
    for attempt in attempts:
        table.add_row(
            str(attempt.attempt),
            attempt.worker_id,
            attempt.claimed_at.strftime("%Y-%m-%d %H:%M:%S"),
            attempt.ended_at.strftime("%H:%M:%S") if attempt.ended_at else "",
            Text(attempt.outcome or "running", style=OUTCOME_STYLES.get(attempt.outcome or "", "")),
            _phase(attempt.download_s, attempt.bytes_downloaded),
            _phase(attempt.transcode_s, None),
            _phase(attempt.upload_s, attempt.bytes_uploaded),
            attempt.error or "",
        )
    return table


OUTCOME_STYLES = {"done": "green", "failed": "red", "stale": "red", "cancelled": "magenta"}


def _phase(seconds: float | None, size: int | None) -> str:
    if seconds is None:
        return ""
    text = format_duration(max(seconds, 0.001))
    return f"{text}, {format_bytes(size)}" if size is not None else text
