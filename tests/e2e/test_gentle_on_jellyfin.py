"""Gentle on Jellyfin, through real `mirror worker` processes: MIRROR_JELLYFIN_MAX_DOWNLOADS
holds across workers (counted from the stand-in's own timing of each download body), and
MIRROR_DOWNLOAD_RATE_LIMIT paces a download as Jellyfin sees it."""

from __future__ import annotations

import threading

from mirror.db.attempt_log import AttemptLog
from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.server import most_at_once
from tests.fixtures.stack import Stack, mirrored_keys


def test_four_workers_with_max_downloads_2_never_download_more_than_two_at_once(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    items = [stack.add_sample(sample_h264_aac, f"Item {n}") for n in range(8)]
    stack.jellyfin.throttle(sample_h264_aac.size)  # about 1 s per body: they would overlap
    stack.mirror_here("enqueue", *items)
    notes: set[str] = set()
    watching = threading.Event()

    def watch_waiting_jobs() -> None:
        while not watching.wait(0.1):
            for job in stack.repo.list(status="processing", limit=20):
                data = job.heartbeat_data or {}
                if data.get("phase") == "waiting":
                    notes.add(str(data.get("note")))

    watcher = threading.Thread(target=watch_waiting_jobs, daemon=True)
    watcher.start()
    workers = [
        stack.start_worker("--burst", name=f"w{n}", MIRROR_JELLYFIN_MAX_DOWNLOADS="2")
        for n in range(4)
    ]
    try:
        for worker in workers:
            assert worker.wait(timeout=240) == 0
    finally:
        watching.set()
        watcher.join()

    spans = stack.jellyfin.download_spans()
    assert most_at_once(spans) == 2, [(s.started, s.ended) for s in spans]
    assert sorted(span.item_id for span in spans) == sorted(items)  # each one downloaded once
    assert all(span.bytes_sent == sample_h264_aac.size for span in spans)
    history = AttemptLog(stack.repo.engine)
    for item in items:
        job = stack.job(item)
        assert (job.status, job.attempts) == ("done", 1), job.error
        assert len(history.attempts_of(job.id)) == 1
    assert "waiting for a download slot (2 of 2 in use)" in notes
    assert stack.object_keys() == sorted(k for i in items for k in mirrored_keys(stack.job(i)))


def test_a_download_rate_limit_paces_what_jellyfin_sends(
    stack: Stack, sample_large_h264: SampleMedia
) -> None:
    item = stack.add_sample(sample_large_h264)
    stack.jellyfin.limit_send_buffer(64 * 1024)  # so the server's clock follows our reads
    stack.mirror_here("enqueue", item)
    worker = stack.start_worker("--burst", MIRROR_DOWNLOAD_RATE_LIMIT="4MB/s")
    assert worker.wait(timeout=120) == 0
    assert stack.job(item).status == "done", stack.job(item).error
    (span,) = stack.jellyfin.download_spans()
    assert span.bytes_sent == sample_large_h264.size
    expected = sample_large_h264.size / 4e6  # 12.4 MB: 3.1 s
    took = span.ended - span.started
    # Less what our receive buffer (0.5 s at the rate) and the first burst (0.1 s) take in.
    assert expected - 0.9 <= took <= expected * 1.5 + 1, (took, expected)
