"""MIRROR_DOWNLOAD_RATE_LIMIT and MIRROR_JELLYFIN_MAX_DOWNLOADS: the grammar, the checks
(one line naming the variable, exit 2), and the token bucket's pacing."""

from __future__ import annotations

import os
import time

import pytest

from mirror.domain.durations import format_rate_limit, parse_rate
from mirror.domain.errors import ConfigError
from mirror.jellyfin.throttle import TokenBucket
from mirror.settings import load_settings
from tests.fixtures.stack import mirror_in_process


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MIRROR_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [
        ("40MB/s", 40_000_000),
        ("500KB/s", 500_000),
        ("500kb/s", 500_000),
        ("1.5GiB/s", 1.5 * 1024**3),
        ("10MiB/s", 10 * 1024**2),
        ("40MB", 40_000_000),  # `/s` may be left out
        (" 2 MB / s ", 2_000_000),
        ("2M/sec", 2_000_000),
        ("250000", 250_000),  # plain bytes per second
        (1_000_000, 1_000_000),
    ],
)
def test_rates_accept_decimal_and_binary_units_per_second(text: object, bytes_per_s: float) -> None:
    assert parse_rate(text) == pytest.approx(bytes_per_s)


@pytest.mark.parametrize("text", ["", "  ", "0", "0MB/s", "off", "unlimited", None])
def test_empty_zero_and_off_mean_no_limit(text: object) -> None:
    assert parse_rate(text) is None


@pytest.mark.parametrize(
    "text",
    ["fast", "-1MB/s", "40Mbit/s", "40Mbps", "10MB/m", "MB/s", "1e6", "10", "999B/s", True],
)
def test_bad_rates_are_rejected_with_an_example(text: object) -> None:
    with pytest.raises(ValueError, match=r"40MB/s"):
        parse_rate(text)


def test_rates_print_in_decimal_units() -> None:
    assert format_rate_limit(40_000_000) == "40 MB/s"
    assert format_rate_limit(1500) == "1.5 KB/s"


def test_both_settings_default_to_no_limit() -> None:
    settings = load_settings()
    assert settings.download_rate_limit is None
    assert settings.jellyfin_max_downloads == 0


def test_both_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRROR_DOWNLOAD_RATE_LIMIT", "40MB/s")
    monkeypatch.setenv("MIRROR_JELLYFIN_MAX_DOWNLOADS", "2")
    settings = load_settings()
    assert settings.download_rate_limit == 40_000_000
    assert settings.jellyfin_max_downloads == 2
    monkeypatch.setenv("MIRROR_JELLYFIN_MAX_DOWNLOADS", "")
    assert load_settings().jellyfin_max_downloads == 0


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MIRROR_DOWNLOAD_RATE_LIMIT", "fast"),
        ("MIRROR_DOWNLOAD_RATE_LIMIT", "40Mbps"),
        ("MIRROR_JELLYFIN_MAX_DOWNLOADS", "two"),
        ("MIRROR_JELLYFIN_MAX_DOWNLOADS", "-1"),
        ("MIRROR_JELLYFIN_MAX_DOWNLOADS", "1.5"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith(f"{variable}: ")
    assert "\n" not in str(caught.value)


def test_mirror_worker_exits_2_with_one_line_on_a_bad_rate() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRROR_")}
    env["MIRROR_DOWNLOAD_RATE_LIMIT"] = "lots"
    result = mirror_in_process(["worker", "--burst"], env)  # refused before any service
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "MIRROR_DOWNLOAD_RATE_LIMIT" in lines[0], result.stderr


class FakeTime:
    """A clock that only moves when the bucket sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_bucket_lets_a_burst_through_then_paces_to_the_rate() -> None:
    fake = FakeTime()
    bucket = TokenBucket(1000.0, burst=500.0, clock=fake.clock, sleep=fake.sleep)
    bucket.take(500)  # the full bucket: no wait
    assert fake.slept == []
    for _ in range(10):
        bucket.take(100)
    # 1,000 bytes beyond the burst at 1,000 B/s: one second of sleeping in all.
    assert sum(fake.slept) == pytest.approx(1.0)


def test_a_chunk_bigger_than_the_bucket_is_slept_off_at_once() -> None:
    fake = FakeTime()
    bucket = TokenBucket(1000.0, burst=100.0, clock=fake.clock, sleep=fake.sleep)
    bucket.take(2100)
    assert fake.slept == [pytest.approx(2.0)]


def test_time_spent_elsewhere_refills_the_bucket_up_to_the_burst_only() -> None:
    fake = FakeTime()
    bucket = TokenBucket(1000.0, burst=200.0, clock=fake.clock, sleep=fake.sleep)
    bucket.take(200)
    fake.now += 60.0  # a long pause earns no more than the burst
    bucket.take(200)
    assert fake.slept == []
    bucket.take(200)
    assert fake.slept == [pytest.approx(0.2)]


def test_n_bytes_at_a_real_rate_take_about_n_over_rate_seconds() -> None:
    rate = 4_000_000.0  # 4 MB/s; 2 MB in 64 KiB chunks: about 0.5 s minus the burst
    bucket = TokenBucket(rate)
    total, chunk = 2_000_000, 64 * 1024
    began = time.monotonic()
    sent = 0
    while sent < total:
        step = min(chunk, total - sent)
        bucket.take(step)
        sent += step
    elapsed = time.monotonic() - began
    expected = (total - bucket.burst) / rate  # 0.4 s
    assert expected * 0.9 <= elapsed <= expected + 1.0, elapsed


def test_the_job_table_shows_why_a_job_waits() -> None:
    from mirror.pipeline.download_gate import waiting_for_slot
    from mirror.views import progress_summary

    data = waiting_for_slot(2, 2).to_json()
    assert data == {"phase": "waiting", "note": "waiting for a download slot (2 of 2 in use)"}
    assert progress_summary(data) == ("waiting", "", "waiting for a download slot (2 of 2 in use)")
