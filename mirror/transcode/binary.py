"""Which ffmpeg binary to run: the configured one, else ffmpeg on PATH, else the bundled one."""

from __future__ import annotations

import os
import shutil

import imageio_ffmpeg

from mirror.domain.errors import ConfigError


def find_ffmpeg(configured: str | None) -> str:
    """The path of the ffmpeg to run; a configured path that is not executable is fatal.

    Without configuration a system ffmpeg wins (distributions build it with their own
    codecs and hardware support); imageio-ffmpeg's static build is the fallback that
    makes a plain `pip install` work.
    """
    if configured:
        found = _executable(configured)
        if found is None:
            raise ConfigError(f"MIRROR_FFMPEG_PATH: {configured!r} is not an executable file")
        return found
    on_path = shutil.which("ffmpeg")
    if on_path:
        return on_path
    try:
        bundled: str = imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError as exc:
        raise ConfigError(
            "MIRROR_FFMPEG_PATH: no ffmpeg on PATH and imageio-ffmpeg has no binary for "
            "this platform; install ffmpeg or set MIRROR_FFMPEG_PATH"
        ) from exc
    return bundled


def _executable(candidate: str) -> str | None:
    """An absolute path for a file path or a bare command name, if it can be executed."""
    if os.sep not in candidate:
        return shutil.which(candidate)
    if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return os.path.abspath(candidate)
    return None
