"""Each attempt refreshes its job's title from the item it fetched, before anything can
fail: a job queued by id alone still tells people which item it was."""

from __future__ import annotations

from sqlalchemy import Engine

from mirror.db.attempt_log import AttemptLog
from mirror.db.repository import JobRepository
from mirror.demo.media import SampleMedia
from mirror.domain.item import ItemTitle
from tests.fixtures.inprocess import InProcess


def test_attempt_records_the_fetched_title_even_when_the_item_fails(
    inproc: InProcess, engine: Engine, sample_h264_aac: SampleMedia
) -> None:
    repo = JobRepository(engine)
    inproc.queue, inproc.history = repo, AttemptLog(engine)
    missing = inproc.fake_media.add_episode(
        sample_h264_aac.path, series="Lost", season=1, episode=2, name="Pilot",
        streams=sample_h264_aac.streams, duration_s=4.0, location_type="Virtual", year=2004,
    )  # fmt: skip
    # Queued by id with what a sweep had said; the attempt's facts win, the library stays.
    repo.enqueue([missing], titles={missing: ItemTitle(item_name="Old", library_name="Shows")})

    inproc.run_burst()

    job = inproc.job(missing)
    assert job.status == "failed"  # a missing episode: nothing to download
    assert job.title == "Lost S01E02 Pilot"
    assert (job.item_type, job.year, job.library_name) == ("Episode", 2004, "Shows")
    served = inproc.fake_media.catalog.item(missing)
    assert served is not None
    assert job.series_id == served.extra["SeriesId"]
    assert job.season_id == job.parent_id == served.extra["SeasonId"]


def test_in_memory_queue_refreshes_titles_like_postgres(
    inproc: InProcess, sample_h264_aac: SampleMedia
) -> None:
    missing = inproc.fake_media.add_episode(
        sample_h264_aac.path, series="Lost", season=1, episode=2, name="Pilot",
        streams=sample_h264_aac.streams, duration_s=4.0, location_type="Virtual",
    )  # fmt: skip
    inproc.enqueue(missing)
    inproc.run_burst()
    assert inproc.job(missing).title == "Lost S01E02 Pilot"
