"""MIRROR_PGBOUNCER: how it is read, and what the composition root builds from it."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine

from mirror import wiring
from mirror.db.download_slots import DownloadSlots
from mirror.db.slot_leases import LeasedDownloadSlots
from mirror.domain.errors import ConfigError
from mirror.settings import load_settings

URL = "postgresql://mirror@db.example:5432/mirror"


@pytest.mark.parametrize(
    ("value", "mode"),
    [("", "off"), ("off", "off"), ("session", "session"), (" Transaction ", "transaction")],
)
def test_the_mode_is_read_case_blind_and_empty_means_off(
    monkeypatch: pytest.MonkeyPatch, value: str, mode: str
) -> None:
    monkeypatch.setenv("MIRROR_PGBOUNCER", value)
    settings = load_settings()
    assert settings.pgbouncer == mode
    assert settings.transaction_pooling is (mode == "transaction")


def test_an_unknown_mode_stops_start_up_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MIRROR_PGBOUNCER", "statement")
    with pytest.raises(ConfigError, match=r"^MIRROR_PGBOUNCER: .*'transaction'"):
        load_settings()


def test_connections_per_worker_follow_the_documented_formulas() -> None:
    # README "Connections at fleet size": 2c+2 direct, 3c+2 with the cap; 2c+1 and 3c+1
    # in transaction mode (no LISTEN, slot leases through the pool).
    for c in (1, 4):
        assert wiring.connections_per_worker(c) == 2 * c + 2
        assert wiring.connections_per_worker(c, download_cap=True) == 3 * c + 2
        assert wiring.connections_per_worker(c, transaction_pooling=True) == 2 * c + 1
        assert (
            wiring.connections_per_worker(c, transaction_pooling=True, download_cap=True)
            == 3 * c + 1
        )


def test_the_download_cap_is_leased_rows_only_in_transaction_mode() -> None:
    engine = create_engine("postgresql+psycopg://mirror@db.example/mirror")  # never connects
    for mode, kind in (
        ("off", DownloadSlots),
        ("session", DownloadSlots),
        ("transaction", LeasedDownloadSlots),
    ):
        settings = load_settings(database_url=URL, jellyfin_max_downloads=2, pgbouncer=mode)
        gate = wiring.download_gate(settings, engine)
        assert isinstance(gate, kind), mode
    leased = wiring.download_gate(
        load_settings(database_url=URL, jellyfin_max_downloads=2, pgbouncer="transaction"),
        engine,
    )
    assert isinstance(leased, LeasedDownloadSlots)
    assert (leased.limit, leased.lease_s, leased.renew_interval_s) == (2, 1800.0, 10.0)
    engine.dispose()
