"""`mirror enqueue --library/--parent-id`: a sweep over Jellyfin's paged listing."""

from __future__ import annotations

import json

from mirror.demo.media import SampleMedia
from mirror.domain.jobs import Fence, Mirrored
from tests.fixtures.stack import Stack


def test_library_sweep_enqueues_every_item_not_mirrored_or_queued(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    movies = stack.jellyfin.add_library("Movies")
    shows = stack.jellyfin.add_library("Shows", "tvshows")
    movie_ids = [
        stack.jellyfin.add_item(
            sample_h264_aac.path,
            name=f"Movie {n:03d}",
            streams=sample_h264_aac.streams,
            duration_s=4.0,
            library_id=movies,
        )
        for n in range(450)  # three pages of 200
    ]
    episode = stack.jellyfin.add_item(
        sample_h264_aac.path,
        name="Episode 1",
        streams=sample_h264_aac.streams,
        duration_s=4.0,
        item_type="Episode",
        library_id=shows,
    )
    # One movie already mirrored, one already queued.
    stack.repo.enqueue([movie_ids[0]])
    lease = stack.repo.claim_next("earlier")
    assert lease is not None
    done = stack.repo.mark_done(lease.job_id, lease.token, Mirrored(video_key="v", audio_keys=[]))
    assert done is Fence.OK
    stack.repo.enqueue([movie_ids[1]])

    result = stack.mirror_here("enqueue", "--library", "Movies")
    assert result.returncode == 0, result.stderr
    assert "450 item(s): 448 queued, 1 already queued, 1 already mirrored" in result.stdout

    listing = json.loads(stack.mirror_here("jobs", "--json", "--limit", "1000").stdout)
    queued = {row["item_id"] for row in listing if row["status"] == "new"}
    assert queued == set(movie_ids[1:])
    assert episode not in queued
    pages = [r for r in stack.jellyfin.requests if r.path == "/Items" and "parentId" in r.query]
    assert len(pages) == 3

    again = stack.mirror_here("enqueue", "--parent-id", shows, "--type", "Episode")
    assert "1 item(s): 1 queued" in again.stdout
    assert stack.job(episode).status == "new"


def test_unknown_library_names_the_available_ones(stack: Stack) -> None:
    stack.jellyfin.add_library("Movies")
    result = stack.mirror_here("enqueue", "--library", "Films")
    assert result.returncode == 1
    assert "no Jellyfin library named 'Films'" in result.stderr
    assert "Movies" in result.stderr


def test_enqueue_needs_exactly_one_source(stack: Stack) -> None:
    result = stack.mirror_here("enqueue", "--library", "Movies", "--parent-id", "0" * 32)
    assert result.returncode == 2
    assert "exactly one" in result.stderr
