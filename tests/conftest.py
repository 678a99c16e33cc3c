"""Shared fixtures live in tests/fixtures/, one module per real service."""

import os
import sys

import pytest

# Bytecode is written and read during the tests even where PYTHONDONTWRITEBYTECODE is set
# (CI machines and the Dockerfile set it): without it each xdist worker compiles mirror/
# and pytest rewrites every test module from source (~4 CPU-s a worker), and each of the
# hundreds of `mirror` processes the tests start compiles the modules it imports again.
# Popped before xdist starts its workers, so they and every subprocess inherit it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

pytest_plugins = [
    "tests.fixtures.postgres",
    "tests.fixtures.media",
    "tests.fixtures.jellyfin",
    "tests.fixtures.s3",
    "tests.fixtures.s3_checksums",
    "tests.fixtures.stack",
    "tests.fixtures.tcp_proxy",
    "tests.fixtures.pgbouncer",
    "tests.fixtures.inprocess",
    "tests.fixtures.shape_corpus",
    # The worker's one Chromium (`chromium`), for tests/e2e and tests/fidelity alike.
    "tests.e2e.browser_support",
]


# Tests that time processes against deadlines (stale timeouts, a table lock, heartbeat
# lag): with `make test` (xdist, --dist loadgroup) they share one worker, so two of them
# never compete for the two cores at once.
TIMING = {
    "test_three_workers_of_four_slots_ride_out_a_table_lock_within_their_pools",
    "test_heartbeats_keep_up_during_a_throttled_download",
    "test_live_job_three_times_longer_than_stale_timeout_is_claimed_once",
    "test_paused_worker_cannot_finish_the_job_it_lost",
    "test_live_job_longer_than_stale_timeout_is_never_reclaimed",
    # A 3 s stale timeout for the rescuer too: beside busy tests its beats can lag past it
    # (seen once in CI: a third attempt).
    "test_kill_9_mid_overlap_is_finished_once_by_another_worker",
    "test_a_flood_of_wrong_passwords_leaves_healthz_and_the_webhook_fast",
    # Behind PgBouncer: stale 3 s, and the paused holder's slot lease is as long.
    "test_a_paused_slot_holder_behind_transaction_pooling_loses_its_job_and_its_slot",
    # A part in S3 within 0.8 of a throttled 10 s download (seen 8.002 s once in CI).
    "test_first_part_reaches_s3_while_the_download_is_still_under_way",
}
# Tests that run many processes at once but time nothing tightly: one after another on a
# second worker, beside the timing chain rather than at its end.
BUSY = {
    "test_canary_secrets_appear_nowhere_after_the_fault_scenarios",
    "test_eight_processes_claim_each_of_600_jobs_exactly_once",
    "test_four_workers_with_two_slots_mirror_16_items_exactly_once",
    "test_four_workers_with_max_downloads_2_never_download_more_than_two_at_once",
    "test_two_workers_behind_transaction_pooling_mirror_everything_one_download_at_once",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config: object, items: list[object]) -> None:
    """Every test under tests/e2e carries the `e2e` marker (`make test-fast` skips them).

    The two groups go first: --dist loadgroup hands out work in collection order, so
    each long chain starts at once on a worker of its own while the rest spreads out.
    Run first (tryfirst): xdist's worker turns the `xdist_group` marks into node ids in
    the same hook, and without it ran before the marks were there (no group existed).
    """

    def group_of(item: object) -> str | None:
        name = getattr(item, "originalname", None)
        return "timing" if name in TIMING else "busy" if name in BUSY else None

    for item in items:
        if "/tests/e2e/" in str(getattr(item, "path", "")):
            item.add_marker(pytest.mark.e2e)  # type: ignore[attr-defined]
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))  # type: ignore[attr-defined]
    items.sort(key=lambda item: group_of(item) is None)


def pytest_configure(config: object) -> None:
    """mirror/ compiled once, before the workers start: not by each worker and process."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        import compileall
        from pathlib import Path

        compileall.compile_dir(Path(__file__).parent.parent / "mirror", quiet=1)
