"""`manifest.json`: what one item's mirror holds, readable without Postgres.

The manifest is written after every other object of the item and before mark_done, so
its presence in the bucket marks a complete mirror. It repeats what the job row records
(outputs with size and SHA-256, the source fingerprint), which is what lets `mirror
verify` compare row and bucket and `mirror db import-manifests` rebuild lost rows.
Everything here is pure: building, reading and comparing manifests, no I/O.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mirror.domain.item import normalize_item_id

MANIFEST_VERSION = 1
MANIFEST_CONTENT_TYPE = "application/json"
# Per output, in this order; absent facts are written as null so readers see every key.
OUTPUT_FIELDS = (
    "key",
    "kind",
    "size",
    "sha256",
    "codec",
    "language",
    "title",
    "stream_index",
    "duration_s",
)
_VIDEO_EXTRA = ("width", "height")
# The job row's `video` column: what a restored row gets back.
_VIDEO_COLUMN = ("key", "size", "sha256", "codec", "width", "height", "duration_s")
_AUDIO_ALWAYS = ("key", "stream_index", "language", "title", "codec")  # null when unknown


class ManifestError(ValueError):
    """A manifest that cannot be read as one (bad JSON, wrong shape, unknown version)."""


def output_entries(
    video: Mapping[str, Any] | None, audio: Sequence[Mapping[str, Any]] | None
) -> list[dict[str, Any]]:
    """The outputs of a job in manifest form, from the row's `video` and `audio_keys`."""
    outputs: list[dict[str, Any]] = []
    if video is not None and video.get("key"):
        entry = _entry(video, "video")
        entry.update({name: video.get(name) for name in _VIDEO_EXTRA})
        outputs.append(entry)
    for track in audio or ():
        outputs.append(_entry(track, "audio"))
    return outputs


def _entry(data: Mapping[str, Any], kind: str) -> dict[str, Any]:
    entry = {name: data.get(name) for name in OUTPUT_FIELDS}
    entry["kind"] = kind
    return entry


def build_manifest(
    *,
    item_id: str,
    name: str | None,
    source: Mapping[str, Any] | None,
    video: Mapping[str, Any] | None,
    audio: Sequence[Mapping[str, Any]],
    job_id: uuid.UUID,
    attempt: int,
    mirrored_at: datetime,
    mirror_version: str,
    ffmpeg_version: str | None,
    hls: Mapping[str, Any] | None = None,
    subtitles: Sequence[Mapping[str, Any]] = (),
    thumbnails: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of one finished attempt (all times UTC, ISO 8601).

    `hls` (output format hls) is `{master, playlists: [{key, size, sha256}]}`;
    `subtitles` are the row's `subtitle_keys` entries (with size and sha256);
    `thumbnails` the scrubbing thumbnails (mirror.domain.thumbnails.thumbnails_json),
    null when none were made.
    """
    return {
        "thumbnails": dict(thumbnails) if thumbnails else None,
        "hls": dict(hls) if hls else None,
        "subtitles": [dict(entry) for entry in subtitles],
        "manifest_version": MANIFEST_VERSION,
        "item": {"id": item_id, "name": name},
        "source": dict(source or {}),
        "outputs": output_entries(video, audio),
        "job": {"id": str(job_id), "attempt": attempt},
        "mirrored_at": mirrored_at.isoformat(),
        "mirror_version": mirror_version,
        "ffmpeg_version": ffmpeg_version,
    }


def encode_manifest(manifest: Mapping[str, Any]) -> bytes:
    """Stable bytes (sorted keys, UTF-8) so two writes of one manifest are identical."""
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def decode_manifest(body: bytes) -> dict[str, Any]:
    """Parse and shape-check a manifest; raises ManifestError with the reason."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ManifestError(f"not JSON: {error}") from None
    except RecursionError:  # the parser's own depth limit: no manifest nests like that
        raise ManifestError("not a manifest: JSON nested too deeply") from None
    except ValueError as error:  # e.g. an integer past Python's 4,300-digit limit
        raise ManifestError(f"not a manifest: {str(error).split(':')[0][:100]}") from None
    if not isinstance(data, dict):
        raise ManifestError("not a JSON object")
    if data.get("manifest_version") != MANIFEST_VERSION:
        raise ManifestError(f"unknown manifest_version {data.get('manifest_version')!r}")
    item = data.get("item")
    outputs = data.get("outputs")
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        raise ManifestError("item.id is missing")
    if not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs):
        raise ManifestError("outputs is not a list of objects")
    try:
        normalize_item_id(item["id"])
    except ValueError as error:
        raise ManifestError(str(error)) from None
    return data


def manifest_differences(
    manifest: Mapping[str, Any],
    *,
    item_id: str,
    video: Mapping[str, Any] | None,
    audio: Sequence[Mapping[str, Any]] | None,
) -> list[str]:
    """How the manifest disagrees with the job row (empty when they agree).

    Only facts both sides record are compared: a row written before size and SHA-256
    were recorded still agrees with its manifest on keys.
    """
    problems: list[str] = []
    if manifest.get("item", {}).get("id") != item_id:
        problems.append(f"item id {manifest.get('item', {}).get('id')!r} is not {item_id}")
    recorded = {entry["key"]: entry for entry in output_entries(video, audio)}
    listed = {entry.get("key"): entry for entry in manifest.get("outputs", []) if entry.get("key")}
    for key in sorted(recorded.keys() - listed.keys()):
        problems.append(f"{key}: in the row, not in the manifest")
    for key in sorted(listed.keys() - recorded.keys()):
        problems.append(f"{key}: in the manifest, not in the row")
    for key in sorted(recorded.keys() & listed.keys()):
        for fact in ("size", "sha256"):
            ours, theirs = recorded[key].get(fact), listed[key].get(fact)
            if ours is not None and theirs is not None and ours != theirs:
                problems.append(f"{key}: {fact} {theirs} in the manifest, {ours} in the row")
    return problems


@dataclass(frozen=True, slots=True)
class RestoredJob:
    """A done job row rebuilt from a manifest (`mirror db import-manifests`)."""

    job_id: uuid.UUID
    item_id: str
    attempts: int
    video_key: str | None
    video: dict[str, Any] | None
    audio_keys: list[dict[str, Any]]
    source: dict[str, Any] | None
    manifest_key: str
    finished_at: datetime | None
    hls_key: str | None = None
    subtitle_keys: list[dict[str, Any]] | None = None


def restored_job(manifest: Mapping[str, Any], manifest_key: str) -> RestoredJob:
    """The row a decoded manifest stands for; the job keeps its original id."""
    job = manifest.get("job") if isinstance(manifest.get("job"), dict) else {}
    assert isinstance(job, dict)
    try:
        job_id = uuid.UUID(str(job.get("id")))
    except ValueError:
        job_id = uuid.uuid4()  # a hand-made manifest: any id will do
    attempt = job.get("attempt")
    video: dict[str, Any] | None = None
    audio: list[dict[str, Any]] = []
    for output in manifest["outputs"]:
        facts = {k: v for k, v in output.items() if k != "kind"}
        # Facts the manifest had no value for stay off the row, as they were on it.
        if output.get("kind") == "video" and video is None:
            video = {k: facts[k] for k in _VIDEO_COLUMN if facts.get(k) is not None}
        elif output.get("kind") == "audio":
            audio.append(
                {
                    k: v
                    for k, v in facts.items()
                    if k not in _VIDEO_EXTRA and (v is not None or k in _AUDIO_ALWAYS)
                }
            )
    mirrored_at = manifest.get("mirrored_at")
    try:
        finished = datetime.fromisoformat(mirrored_at) if isinstance(mirrored_at, str) else None
    except ValueError:
        finished = None
    source = manifest.get("source")
    return RestoredJob(
        job_id=job_id,
        item_id=normalize_item_id(manifest["item"]["id"]),
        attempts=attempt if isinstance(attempt, int) and attempt > 0 else 1,
        video_key=video.get("key") if video else None,
        video=video,
        audio_keys=audio,
        source=source if isinstance(source, dict) and source else None,
        manifest_key=manifest_key,
        finished_at=finished,
        hls_key=_hls_master(manifest.get("hls")),
        subtitle_keys=[dict(s) for s in manifest.get("subtitles") or [] if isinstance(s, dict)],
    )


def _hls_master(hls: Any) -> str | None:
    master = hls.get("master") if isinstance(hls, dict) else None
    return master if isinstance(master, str) else None
