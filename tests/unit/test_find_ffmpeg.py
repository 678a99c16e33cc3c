from __future__ import annotations

import os
from pathlib import Path

import pytest

from mirror.domain.errors import ConfigError
from mirror.transcode import find_ffmpeg


def make_executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_configured_executable_wins(tmp_path: Path) -> None:
    binary = make_executable(tmp_path / "my-ffmpeg")

    assert find_ffmpeg(str(binary)) == str(binary)


@pytest.mark.parametrize("name", ["missing-ffmpeg", "not-executable"])
def test_configured_path_that_cannot_run_names_the_variable(tmp_path: Path, name: str) -> None:
    (tmp_path / "not-executable").write_text("data")

    with pytest.raises(ConfigError, match="MIRROR_FFMPEG_PATH"):
        find_ffmpeg(str(tmp_path / name))


def test_ffmpeg_on_path_comes_before_the_bundled_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = make_executable(tmp_path / "ffmpeg")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")

    assert find_ffmpeg(None) == str(binary)


def test_bundled_ffmpeg_without_configuration_or_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))

    found = find_ffmpeg(None)

    assert Path(found).is_file()
    assert os.access(found, os.X_OK)
