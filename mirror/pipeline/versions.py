"""The versions a manifest records: mirror's own and the ffmpeg binary's.

Recorded so a reader of the bucket can tell which outputs came from which build (a
re-encode with another x264 differs byte for byte from the first). Both are looked up
once per process: a worker writes one manifest per job.
"""

from __future__ import annotations

import functools
import subprocess
from importlib import metadata


@functools.cache
def mirror_version() -> str:
    """The installed package's version, or "unknown" when run from a bare source tree."""
    try:
        return metadata.version("mirror")
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def ffmpeg_version(ffmpeg_path: str) -> str | None:
    """`7.0.2-static` from `ffmpeg -version`'s first line; None when it cannot be run."""
    try:
        result = subprocess.run(
            [ffmpeg_path, "-hide_banner", "-version"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    words = result.stdout.split()
    # "ffmpeg version 7.0.2-static https://johnvansickle.com/ffmpeg/ ..."
    if len(words) >= 3 and words[:2] == ["ffmpeg", "version"]:
        return words[2]
    return None
