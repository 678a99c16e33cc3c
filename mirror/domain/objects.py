"""What the mirror writes to the bucket, in the core's words: the key layout (README:
What a job does), one upload, and an uploaded file's digest. The S3 adapter (`mirror.s3`) moves the
bytes; the pipeline only names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirror.domain.naming import AUDIO_DIR, VIDEO_FILE_NAME, audio_file_name

# --- key layout --------------------------------------------------------------------


def _join_key(prefix: str, *parts: str) -> str:
    clean_prefix = "/".join(segment for segment in prefix.split("/") if segment)
    return "/".join((clean_prefix, *parts)) if clean_prefix else "/".join(parts)


def video_key(prefix: str, item_id: str) -> str:
    """`<prefix>/<item_id>/video.mp4` (no leading slash when the prefix is empty)."""
    return _join_key(prefix, item_id, VIDEO_FILE_NAME)


def audio_key(prefix: str, item_id: str, stream_index: int, language: str | None) -> str:
    """`<prefix>/<item_id>/audio/<index>-<lang>.m4a`."""
    return _join_key(prefix, item_id, AUDIO_DIR, audio_file_name(stream_index, language))


def output_key(prefix: str, item_id: str, relative_path: str) -> str:
    """`<prefix>/<item_id>/<relative path>`: playlists and subtitles, named like their files."""
    return _join_key(prefix, item_id, *relative_path.split("/"))


def manifest_key(prefix: str, item_id: str) -> str:
    """`<prefix>/<item_id>/manifest.json`: written last, so its presence marks a whole mirror."""
    return _join_key(prefix, item_id, "manifest.json")


def prefix_root(prefix: str) -> str:
    """`<prefix>/`: every item's objects live under it (empty for no prefix)."""
    return _join_key(prefix, "")


def item_prefix(prefix: str, item_id: str) -> str:
    """`<prefix>/<item_id>/`: every object of one item lives under it."""
    return _join_key(prefix, item_id, "")


@dataclass(frozen=True, slots=True)
class Upload:
    """One local file and the key it goes to."""

    path: Path
    key: str
    content_type: str


@dataclass(frozen=True, slots=True)
class FileDigest:
    """Size and lowercase-hex SHA-256 of one uploaded file, as recorded on the job row."""

    size: int
    sha256: str

    def facts(self) -> dict[str, Any]:
        """The `size` and `sha256` members of a `video` or `audio_keys` entry."""
        return {"size": self.size, "sha256": self.sha256}
