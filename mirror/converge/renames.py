"""A renamed file keeps its mirror: copy the objects, not the transcode.

Jellyfin derives an item's id from its path, so renaming or moving a file makes a new
item with a new id, and the old one leaves the library in the same scan. When `mirror
sync` finds a new item whose size and content probe (mirror.files.content_probe) equal those
of a mirrored item that is gone, the new id's mirror is a server-side copy of the old
one's objects (S3 CopyObject: no download, no ffmpeg). HLS playlists name their files
relatively, so they stay valid under the new prefix byte for byte; only the manifest
names keys and the item, so it is rewritten, and the new done row is built from it the
way `mirror db import-manifests` builds rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from mirror.converge.fingerprints import ProbeContent
from mirror.domain.listing import ItemSummary
from mirror.domain.manifest import (
    MANIFEST_CONTENT_TYPE,
    ManifestError,
    RestoredJob,
    decode_manifest,
    encode_manifest,
    restored_job,
)
from mirror.domain.objects import item_prefix, manifest_key

# Copies a removed item's mirror to a new item id (MirrorCopier.copy):
# (old id, new id, new name, new source) -> whether the new id is mirrored now.
CopyMirror = Callable[[str, str, str, Mapping[str, Any]], bool]


def copy_renamed(
    held: Sequence[ItemSummary],
    renamable: Mapping[int, Sequence[tuple[str, str]]],
    removed: set[str],
    probe: ProbeContent,
    copy_mirror: CopyMirror,
) -> dict[str, str]:
    """Copy the mirror of a removed item to each held new item with its size and content
    probe (`renamable`: size -> mirrored (item id, probe)); returns new id -> old id."""
    renamed: dict[str, str] = {}
    for item in held:
        size = item.size
        gone = [(old, probed) for old, probed in renamable.get(size or -1, ()) if old in removed]
        if size is None or not gone:
            continue
        content = probe(item.id, size)
        old_id = next((old for old, probed in gone if probed == content), None)
        if content is None or old_id is None:
            continue
        source = {**item.fingerprint(), "path": item.path, "content_probe": content}
        facts = {key: value for key, value in source.items() if value is not None}
        if copy_mirror(old_id, item.id, item.name, facts):
            renamed[item.id] = old_id
    return renamed


class MirrorObjects(Protocol):
    """The bucket operations a copy needs (mirror.s3.bucket.Bucket)."""

    def get_bytes(self, key: str) -> bytes | None: ...

    def copy_prefix(self, source: str, target: str, *, leave_out: Collection[str] = ()) -> int: ...

    def put_bytes(self, key: str, body: bytes, content_type: str) -> None: ...


class DoneRows(Protocol):
    """Inserts the new item's done row, unless it has a job (mirror.db.mirrored.MirroredItems)."""

    def restore(self, job: RestoredJob) -> bool: ...

    def histories(self, item_ids: Sequence[str]) -> Mapping[str, object]: ...


def renamed_manifest(
    manifest: Mapping[str, Any],
    *,
    old_prefix: str,
    new_prefix: str,
    item_id: str,
    name: str,
    source: Mapping[str, Any],
) -> dict[str, Any]:
    """The manifest of the copy: every key under `old_prefix` moved to `new_prefix`,
    the new item's id, name and source, a new job id; sizes and SHA-256s stay (the
    objects are byte copies)."""

    def moved(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(old_prefix):
            return new_prefix + value[len(old_prefix) :]
        if isinstance(value, dict):
            return {key: moved(inner) for key, inner in value.items()}
        if isinstance(value, list):
            return [moved(inner) for inner in value]
        return value

    copy: dict[str, Any] = moved(dict(manifest))
    copy["item"] = {"id": item_id, "name": name}
    copy["source"] = dict(source)
    copy["job"] = {"id": str(uuid.uuid4()), "attempt": 1}
    copy["mirrored_at"] = datetime.now(UTC).isoformat()
    return copy


@dataclass(frozen=True)
class MirrorCopier:
    """Copies one item's mirror to a new item id (see the module docstring)."""

    objects: MirrorObjects
    rows: DoneRows
    s3_prefix: str

    def copy(self, old_id: str, new_id: str, name: str, source: Mapping[str, Any]) -> bool:
        """True when the new id is mirrored now; False when the old mirror has no usable
        manifest or the new id got a job meanwhile (then it is queued as usual)."""
        if self.rows.histories([new_id]):  # queued meanwhile (a webhook): its job mirrors it
            return False
        old_manifest_key = manifest_key(self.s3_prefix, old_id)
        body = self.objects.get_bytes(old_manifest_key)
        if body is None:
            return False
        try:
            manifest = decode_manifest(body)
        except ManifestError:
            return False
        old_prefix = item_prefix(self.s3_prefix, old_id)
        new_prefix = item_prefix(self.s3_prefix, new_id)
        self.objects.copy_prefix(old_prefix, new_prefix, leave_out={old_manifest_key})
        copy = renamed_manifest(
            manifest,
            old_prefix=old_prefix,
            new_prefix=new_prefix,
            item_id=new_id,
            name=name,
            source=source,
        )
        new_manifest_key = manifest_key(self.s3_prefix, new_id)
        # Last, as a worker writes it: its presence marks a complete mirror.
        self.objects.put_bytes(new_manifest_key, encode_manifest(copy), MANIFEST_CONTENT_TYPE)
        return self.rows.restore(restored_job(copy, new_manifest_key))
