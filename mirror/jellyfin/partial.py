"""Which version of the file the bytes of a partial download belong to.

A resume is only safe when the bytes on disk and the bytes the server sends next come
from one version of the file. The record beside the partial (`<name>.version.json`)
says which version that is: the validators of the answer that brought its first byte
(Last-Modified; an ETag if a server sends one: Jellyfin does not), the whole file's
size, and the item as its metadata listed it then. Another process may resume it too.
Bytes without a record, or with one the item no longer fits, are never resumed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from mirror.domain.item import ServedFile


def record_path(dest: Path) -> Path:
    """Where the record of a partial download is kept (beside the partial)."""
    return dest.with_name(dest.name + ".version.json")


@dataclass(frozen=True, slots=True)
class PartialRecord:
    """The version the partial's bytes belong to."""

    size: int | None  # the whole file's, from the answer that brought byte 0
    last_modified: str | None
    etag: str | None
    listed: dict[str, object] = field(default_factory=dict)  # MediaItem.source_json() then

    @classmethod
    def of(
        cls, response: httpx.Response, size: int | None, listed: Mapping[str, object]
    ) -> PartialRecord:
        headers = response.headers
        return cls(size, _header(headers, "Last-Modified"), _header(headers, "ETag"), dict(listed))

    @property
    def if_range(self) -> str | None:
        """The validator a resume sends: a strong ETag, else the Last-Modified date (a
        weak ETag may not be used in If-Range). None: these bytes cannot be resumed."""
        if self.etag and not self.etag.startswith("W/"):
            return self.etag
        return self.last_modified

    def stale_for(self, listed: Mapping[str, object], expected_size: int | None) -> str | None:
        """Why the item as listed now is not the version of these bytes (None: it may be)."""
        if self.if_range is None:
            return "no validator was recorded for them"
        if expected_size is not None and self.size is not None and self.size != expected_size:
            return f"they are of a {self.size}-byte file, the item now has {expected_size}"
        changed = sorted(
            key for key in set(self.listed) | set(listed) if self.listed.get(key) != listed.get(key)
        )
        return f"the item's {', '.join(changed)} changed" if changed else None

    def mismatch(self, response: httpx.Response, total: int | None) -> str | None:
        """Why a 206 answer does not continue these bytes (None: it does)."""
        if self.size is not None and total is not None and total != self.size:
            return f"the file now has {total} bytes, not {self.size}"
        for name, recorded in (("Last-Modified", self.last_modified), ("ETag", self.etag)):
            sent = _header(response.headers, name)
            if recorded is not None and sent is not None and sent != recorded:
                return f"its {name} is {sent!r}, not {recorded!r}"
        return None

    def served(self, size: int) -> ServedFile:
        return ServedFile(size=size, last_modified=self.last_modified, etag=self.etag)


def read_record(dest: Path) -> PartialRecord | None:
    """The partial's record; None when there is none or it cannot be read."""
    try:
        data = json.loads(record_path(dest).read_text(encoding="utf-8"))
        return PartialRecord(
            size=_int_or_none(data.get("size")),
            last_modified=_str_or_none(data.get("last_modified")),
            etag=_str_or_none(data.get("etag")),
            listed=dict(data.get("listed") or {}),
        )
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def write_record(dest: Path, record: PartialRecord) -> None:
    """Kept before the first byte is written, so no byte on disk is ever unaccounted for."""
    record_path(dest).write_text(json.dumps(asdict(record)), encoding="utf-8")


def discard(dest: Path) -> None:
    """The partial and its record, gone."""
    dest.unlink(missing_ok=True)
    with contextlib.suppress(FileNotFoundError):
        record_path(dest).unlink()


def _header(headers: httpx.Headers, name: str) -> str | None:
    value = headers.get(name, "").strip()
    return value or None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
