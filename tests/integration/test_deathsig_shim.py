"""The exec shim in front of ffmpeg: death signal set, parent checked, no interpreter."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mirror.transcode.process import deathsig_prefix

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

_READ_PDEATHSIG = (
    "import ctypes; sig = ctypes.c_int(); "
    "ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0); print(sig.value)"
)


def test_the_command_runs_with_sigkill_as_its_parent_death_signal() -> None:
    result = subprocess.run(
        [*deathsig_prefix(), sys.executable, "-c", _READ_PDEATHSIG],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "9"


def test_a_child_whose_parent_is_not_the_worker_never_runs_the_command() -> None:
    prefix = deathsig_prefix()
    assert prefix[-1].isdigit()  # the worker's pid is the shim's last argument
    stray = [*prefix[:-1], "1"]  # as if the worker had died and init adopted the child
    result = subprocess.run([*stray, "echo", "ran"], capture_output=True, text=True, check=False)
    assert result.returncode == 137 and result.stdout == ""


def test_setpriv_is_preferred_to_starting_an_interpreter() -> None:
    # A Python shim costs 25-70 ms per ffmpeg run, a third of a short remux.
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv here: the Python shim is the fallback")
    assert Path(deathsig_prefix()[0]).name == "setpriv"
