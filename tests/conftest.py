"""Shared fixtures live in tests/fixtures/, one module per real service."""

pytest_plugins = [
    "tests.fixtures.postgres",
    "tests.fixtures.media",
    "tests.fixtures.jellyfin",
    "tests.fixtures.s3",
    "tests.fixtures.s3_checksums",
    "tests.fixtures.stack",
    "tests.fixtures.tcp_proxy",
    "tests.fixtures.inprocess",
]


# Tests that time many processes against deadlines (stale timeouts, a 35 s table lock,
# eight claimers): with `make test` (xdist, --dist loadgroup) they share one worker, so
# two of them never compete for the two cores at once.
HEAVY = {
    "test_three_workers_of_four_slots_ride_out_a_table_lock_within_their_pools",
    "test_canary_secrets_appear_nowhere_after_the_fault_scenarios",
    "test_heartbeats_keep_up_during_a_throttled_download",
    "test_live_job_three_times_longer_than_stale_timeout_is_claimed_once",
    "test_paused_worker_cannot_finish_the_job_it_lost",
    "test_eight_processes_claim_each_of_2000_jobs_exactly_once",
    "test_four_workers_with_two_slots_mirror_30_items_exactly_once",
    "test_live_job_longer_than_stale_timeout_is_never_reclaimed",
}


def pytest_collection_modifyitems(config: object, items: list[object]) -> None:
    """Every test under tests/e2e carries the `e2e` marker (`make test-fast` skips them)."""
    import pytest

    for item in items:
        if "/tests/e2e/" in str(getattr(item, "path", "")):
            item.add_marker(pytest.mark.e2e)  # type: ignore[attr-defined]
        if getattr(item, "originalname", None) in HEAVY:
            item.add_marker(pytest.mark.xdist_group("heavy"))  # type: ignore[attr-defined]
