"""`mirror verify`: does the bucket still hold what the job rows say was mirrored?

For each item's newest done job: every recorded object exists with its recorded size,
the manifest exists and agrees with the row (keys, sizes, SHA-256s), and with `deep`
every object is read back and its SHA-256 recomputed. S3's own per-part checksums
(CRC32) cannot be compared with a whole-file SHA-256, so without `deep` a same-size
corruption is out of reach; that is what `deep` is for.

Sizes come from listings (one request per 1000 keys), manifests from one GET each, in
a thread pool: a library of 10,000 items is a few hundred listing pages and 10,000
small GETs, not 50,000 HEADs.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from mirror.domain.jobs import JobRecord
from mirror.domain.manifest import ManifestError, decode_manifest, manifest_differences
from mirror.domain.thumbnails import thumbnail_objects


class Verdict(enum.StrEnum):
    """What is wrong with one object (or nothing), worst last."""

    OK = "ok"
    CHECKSUM_MISMATCH = "checksum mismatch"
    SIZE_MISMATCH = "size mismatch"
    MANIFEST_MISMATCH = "manifest mismatch"
    MISSING = "missing"


_SEVERITY = list(Verdict)


@dataclass(frozen=True, slots=True)
class ObjectCheck:
    item_id: str
    key: str
    verdict: Verdict
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"item_id": self.item_id, "key": self.key, "problem": self.verdict.value,
                "detail": self.detail}  # fmt: skip


def expected_objects(job: JobRecord) -> list[dict[str, Any]]:
    """The outputs a done row records: key, and size/sha256 where recorded."""
    video = job.video or ({"key": job.video_key} if job.video_key else None)
    entries = [video] if video and video.get("key") else []
    entries += [entry for entry in job.audio_keys or [] if entry.get("key")]
    entries += [entry for entry in job.subtitle_keys or [] if entry.get("key")]
    if job.hls_key:  # its size and SHA-256 are in the manifest, not on the row
        entries.append({"key": job.hls_key})
    return [{"key": e["key"], "size": e.get("size"), "sha256": e.get("sha256")} for e in entries]


def manifest_thumbnails(body: bytes | None) -> list[dict[str, Any]]:
    """The thumbnail objects (sheets and track) a manifest lists, with size and SHA-256;
    none when it is missing or unreadable (check_manifest reports that)."""
    if body is None:
        return []
    try:
        return thumbnail_objects(decode_manifest(body))
    except ManifestError:
        return []


def check_object(
    item_id: str,
    expected: dict[str, Any],
    stored_size: int | None,
    stored_sha256: str | None = None,
) -> ObjectCheck:
    """One object against the row: missing, wrong size, wrong SHA-256 (when read), or ok."""
    key = expected["key"]
    if stored_size is None:
        return ObjectCheck(item_id, key, Verdict.MISSING)
    size = expected.get("size")
    if size is not None and stored_size != size:
        return ObjectCheck(item_id, key, Verdict.SIZE_MISMATCH, f"{stored_size} bytes, not {size}")
    sha256 = expected.get("sha256")
    if stored_sha256 is not None and sha256 is not None and stored_sha256 != sha256:
        detail = f"SHA-256 {stored_sha256[:12]}..., not {sha256[:12]}..."
        return ObjectCheck(item_id, key, Verdict.CHECKSUM_MISMATCH, detail)
    return ObjectCheck(item_id, key, Verdict.OK)


def check_manifest(job: JobRecord, body: bytes | None) -> ObjectCheck | None:
    """The manifest against the row; None for rows that predate manifests."""
    if job.manifest_key is None:
        return None
    if body is None:
        return ObjectCheck(job.item_id, job.manifest_key, Verdict.MISSING)
    try:
        manifest = decode_manifest(body)
    except ManifestError as error:
        return ObjectCheck(job.item_id, job.manifest_key, Verdict.MANIFEST_MISMATCH, str(error))
    video = job.video or ({"key": job.video_key} if job.video_key else None)
    problems = manifest_differences(
        manifest, item_id=job.item_id, video=video, audio=job.audio_keys
    )
    if problems:
        detail = "; ".join(problems[:3]) + (f" (+{len(problems) - 3})" if len(problems) > 3 else "")
        return ObjectCheck(job.item_id, job.manifest_key, Verdict.MANIFEST_MISMATCH, detail)
    return ObjectCheck(job.item_id, job.manifest_key, Verdict.OK)


def item_verdict(checks: Sequence[ObjectCheck]) -> Verdict:
    """The worst verdict among an item's objects."""
    return max((check.verdict for check in checks), key=_SEVERITY.index, default=Verdict.OK)


@dataclass
class VerifyReport:
    checks: list[ObjectCheck] = field(default_factory=list)
    items: dict[str, Verdict] = field(default_factory=dict)
    requeued: list[str] = field(default_factory=list)
    deep: bool = False

    @property
    def ok(self) -> bool:
        return all(verdict is Verdict.OK for verdict in self.items.values())

    def bad_items(self) -> list[str]:
        return sorted(item for item, verdict in self.items.items() if verdict is not Verdict.OK)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per verdict: how many items (by their worst object) and how many objects."""
        return {
            verdict.value: {
                "items": sum(1 for v in self.items.values() if v is verdict),
                "objects": sum(1 for c in self.checks if c.verdict is verdict),
            }
            for verdict in Verdict
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "deep": self.deep,
            "items": len(self.items),
            "objects": len(self.checks),
            "counts": self.counts(),
            "problems": [c.to_json() for c in self.checks if c.verdict is not Verdict.OK],
            "requeued": self.requeued,
        }


class BucketReader(Protocol):
    """What verify reads from S3 (mirror.s3.bucket.Bucket)."""

    def iter_objects(self, prefix: str) -> Iterator[tuple[str, int]]: ...

    def get_bytes(self, key: str) -> bytes | None: ...

    def sha256_of(self, key: str, on_bytes: Callable[[int], None] | None = None) -> str | None: ...


def verify_jobs(
    jobs: Iterable[JobRecord],
    bucket: BucketReader,
    *,
    sizes: dict[str, int] | None,
    item_prefix: Callable[[str], str],
    deep: bool = False,
    threads: int = 16,
    on_item: Callable[[], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> VerifyReport:
    """Check each job's objects in a thread pool; `sizes` is a listing of the whole
    prefix when verifying everything (else each item's folder is listed on its own)."""
    report = VerifyReport(deep=deep)
    lock = threading.Lock()

    def one(job: JobRecord) -> None:
        known = sizes if sizes is not None else dict(bucket.iter_objects(item_prefix(job.item_id)))
        checks = []
        present = job.manifest_key is not None and job.manifest_key in known
        body = bucket.get_bytes(job.manifest_key) if job.manifest_key and present else None
        # The thumbnails are on no row: the manifest lists them (older ones: none).
        for expected in [*expected_objects(job), *manifest_thumbnails(body)]:
            stored = known.get(expected["key"])
            digest = None
            if deep and stored is not None:
                digest = bucket.sha256_of(expected["key"], on_bytes)
                stored = stored if digest is not None else None  # deleted meanwhile
            checks.append(check_object(job.item_id, expected, stored, digest))
        if job.manifest_key is not None:
            manifest = check_manifest(job, body)
            if manifest is not None:
                checks.append(manifest)
        with lock:
            report.checks.extend(checks)
            report.items[job.item_id] = item_verdict(checks)
        if on_item is not None:
            on_item()

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="verify") as pool:
        # Bounded in flight: a million rows are read in batches, never all at once.
        pending: list[Any] = []
        for job in jobs:
            pending.append(pool.submit(one, job))
            if len(pending) >= threads * 8:
                for future in pending:
                    future.result()
                pending.clear()
        for future in pending:
            future.result()
    report.checks.sort(key=lambda check: (check.item_id, check.key))
    return report
