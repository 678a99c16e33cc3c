"""Prometheus metrics for `mirror serve`: read from Postgres at every scrape.

A custom collector instead of counters kept in memory: workers are separate processes
(often on other hosts), and the job and attempt tables already hold every figure, so any
one `mirror serve` reports the whole fleet and nothing is lost when a process restarts.
Counters are sums over the attempt history; deleting old jobs (their attempts cascade)
looks like a counter reset to Prometheus, which `rate()` handles.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from mirror.db.stats import QueueSnapshot, QueueStats
from mirror.domain.active_hours import ActiveHours, TimeOfDayClock, local_time_of_day
from mirror.domain.errors import InsufficientSpace
from mirror.domain.jobs import DatabaseUnavailable, FleetMode
from mirror.domain.logs import get_logger
from mirror.domain.sources import WAITING_FOR_PROBE

# Phases run from seconds (a remux, a small upload) to hours (a 7 GB download, a re-encode).
PHASE_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)
# Always reported (0 when none), so an alert on them needs no absent() guard.
WAITING_PHASES = (InsufficientSpace.phase, WAITING_FOR_PROBE)
# Only processing jobs get a per-job series; this caps them should thousands run at once.
MAX_RUNNING_SERIES = 500

log = get_logger("mirror.metrics")


class QueueCollector(Collector):
    """Turns one `QueueSnapshot` per scrape into metric families."""

    def __init__(
        self,
        stats: QueueStats,
        active_hours: ActiveHours | None = None,
        time_of_day: TimeOfDayClock = local_time_of_day,
    ) -> None:
        self.stats = stats
        self.active_hours = active_hours
        self.time_of_day = time_of_day

    def describe(self) -> Iterable[Metric]:
        # Nothing to describe up front: registering must not query the database.
        return []

    def collect(self) -> Iterator[Metric]:
        began = time.monotonic()
        try:
            snapshot = self.stats.snapshot(PHASE_BUCKETS, running_limit=MAX_RUNNING_SERIES)
        except DatabaseUnavailable as error:
            log.warning("metrics: database unavailable: %s", error.detail)
            yield _gauge("mirror_database_up", "1 when the last scrape could read Postgres.", 0)
            yield from self._active_hours()
            return
        yield _gauge("mirror_database_up", "1 when the last scrape could read Postgres.", 1)
        yield _gauge(
            "mirror_metrics_query_seconds",
            "Time the scrape's queries took (running totals and the active jobs).",
            time.monotonic() - began,
        )
        yield from snapshot_metrics(snapshot)
        yield from self._active_hours()

    def _active_hours(self) -> Iterator[Metric]:
        """Only when this process has MIRROR_ACTIVE_HOURS (workers may differ)."""
        if self.active_hours is None or self.active_hours.always:
            return
        yield _gauge(
            "mirror_active_hours_open",
            "1 while MIRROR_ACTIVE_HOURS of this serve process allow claims (its local time).",
            int(self.active_hours.is_open(self.time_of_day())),
        )


def snapshot_metrics(snapshot: QueueSnapshot) -> Iterator[Metric]:
    """Every family of one snapshot (pure: no I/O)."""
    jobs = GaugeMetricFamily("mirror_jobs", "Jobs by status.", labels=["status"])
    for status, count in snapshot.jobs_by_status.items():
        jobs.add_metric([status], count)
    yield jobs
    yield _gauge("mirror_jobs_due", "New jobs whose run_after has passed.", snapshot.due)
    yield _gauge(
        "mirror_paused",
        "1 while the fleet is paused (mirror pause): no claims, running jobs released.",
        int(snapshot.fleet_mode == FleetMode.PAUSED),
    )
    yield _gauge(
        "mirror_draining",
        "1 while the fleet drains (mirror pause --drain): no claims, running jobs finish.",
        int(snapshot.fleet_mode == FleetMode.DRAINING),
    )
    yield _gauge(
        "mirror_oldest_due_job_age_seconds",
        "How long the oldest claimable job has waited (0 when none).",
        snapshot.oldest_due_age_s,
    )
    waiting = GaugeMetricFamily(
        "mirror_jobs_waiting",
        "Queued jobs that are not ready, by what they wait for (no attempt used).",
        labels=["phase"],
    )
    for waits_for in sorted({*WAITING_PHASES, *snapshot.waiting}):
        waiting.add_metric([waits_for], snapshot.waiting.get(waits_for, 0))
    yield waiting

    totals = snapshot.attempts
    yield CounterMetricFamily("mirror_claims", "Attempts claimed.", value=totals.claims)
    yield CounterMetricFamily(
        "mirror_stale_rescues",
        "Attempts returned to the queue by the stale reaper (their worker stopped beating).",
        value=totals.by_outcome.get("stale", 0),
    )
    outcomes = CounterMetricFamily(
        "mirror_attempts_by_outcome", "Ended attempts by outcome.", labels=["outcome"]
    )
    for outcome, count in sorted(totals.by_outcome.items()):
        outcomes.add_metric([outcome], count)
    yield outcomes
    yield CounterMetricFamily(
        "mirror_heartbeat_writes",
        "Heartbeat UPDATEs written by ended attempts.",
        value=totals.heartbeat_writes,
    )
    yield CounterMetricFamily(
        "mirror_bytes_downloaded", "Bytes downloaded from Jellyfin.", value=totals.bytes_downloaded
    )
    yield CounterMetricFamily(
        "mirror_bytes_uploaded", "Bytes uploaded to S3.", value=totals.bytes_uploaded
    )

    phases = HistogramMetricFamily(
        "mirror_phase_seconds", "Duration of each phase of ended attempts.", labels=["phase"]
    )
    for phase in snapshot.phases:
        buckets = [(str(float(bound)), count) for bound, count in phase.buckets]
        phases.add_metric([phase.phase], [*buckets, ("+Inf", phase.count)], phase.sum_s)
    yield phases

    ages = GaugeMetricFamily(
        "mirror_job_heartbeat_age_seconds",
        "Seconds since the last heartbeat of each processing job.",
        labels=["job", "item", "worker"],
    )
    for job in snapshot.running:
        ages.add_metric([job.job_id, job.item_id, job.worker_id], job.heartbeat_age_s)
    yield ages
    yield _gauge(
        "mirror_job_heartbeat_age_max_seconds",
        "The oldest heartbeat among processing jobs (0 when none run).",
        max((job.heartbeat_age_s for job in snapshot.running), default=0.0),
    )


def build_registry(
    stats: QueueStats,
    active_hours: ActiveHours | None = None,
    time_of_day: TimeOfDayClock = local_time_of_day,
) -> CollectorRegistry:
    """A registry of our own (not the global one), so several apps can live in one process."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(stats, active_hours, time_of_day))
    return registry


def render(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The exposition body and its content type (OpenMetrics when the scraper asks)."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
