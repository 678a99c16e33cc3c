"""The worker caps glibc's malloc arenas unless MALLOC_ARENA_MAX already says how many."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mirror.cli.malloc import limit_malloc_arenas

PROBE = "from mirror.cli.malloc import limit_malloc_arenas as f; print(f())"


def test_the_cap_applies_on_glibc() -> None:
    # A process of its own: the cap stays for the life of the process that sets it.
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_malloc_arena_max_in_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False
