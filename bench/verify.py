"""Verify benchmark: `mirror verify --all` over 10,000 done items against SeaweedFS's S3 server.

Inputs: a SeaweedFS server process (`weed mini`), one bucket holding, per item,
the four objects a mirror leaves (video.mp4 of 2 KiB, two audio tracks of 1 KiB,
manifest.json), written with 16 threads; a scratch Postgres database (`mirror_bench_*`,
migrated, dropped after) with one done row per item recording those keys, sizes and
SHA-256s. Quick mode: 1,000 items.
Then `mirror verify --all --json` runs as a user would run it (a subprocess configured
by MIRROR_* variables), without --deep, and must find every item ok.
Prints the seeding time, then as the LAST line the verify wall time (target: < 120 s
for 10,000 items).
Usage: python bench/verify.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import harness
from harness import DUMMY_KEY, say
from sqlalchemy import create_engine, text

from mirror.domain.manifest import build_manifest, encode_manifest

PREFIX = "bench"


def _objects(item_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    video_body = item_id.encode() * 64  # 2 KiB
    video = {"key": f"{PREFIX}/{item_id}/video.mp4", "size": len(video_body),
             "sha256": hashlib.sha256(video_body).hexdigest(), "codec": "h264"}  # fmt: skip
    audio = []
    for index, language in ((1, "eng"), (2, "fra")):
        body = (language + item_id).encode()[:32] * 32
        audio.append({"key": f"{PREFIX}/{item_id}/audio/{index}-{language}.m4a",
                      "stream_index": index, "language": language, "title": None,
                      "codec": "aac", "size": len(body),
                      "sha256": hashlib.sha256(body).hexdigest()})  # fmt: skip
    return video, audio


def _bodies(item_id: str) -> dict[str, bytes]:
    return {
        f"{PREFIX}/{item_id}/video.mp4": item_id.encode() * 64,
        **{
            f"{PREFIX}/{item_id}/audio/{i}-{lang}.m4a": (lang + item_id).encode()[:32] * 32
            for i, lang in ((1, "eng"), (2, "fra"))
        },
    }


def main() -> None:
    # Both import `queue`: only after harness has kept bench/queue.py from shadowing it.
    from concurrent.futures import ThreadPoolExecutor

    import boto3

    items = 1_000 if harness.quick_mode() else 10_000
    work = harness.data_dir("verify")
    with harness.s3_server(work / "seaweedfs") as endpoint, harness.scratch_database() as url:
        bucket = harness.create_bucket(endpoint)
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id=DUMMY_KEY,
            aws_secret_access_key=DUMMY_KEY,
        )
        ids = [uuid.uuid4().hex for _ in range(items)]
        started = time.monotonic()

        def seed(item_id: str) -> dict[str, Any]:
            video, audio = _objects(item_id)
            job_id = uuid.uuid4()
            for key, body in _bodies(item_id).items():
                client.put_object(Bucket=bucket, Key=key, Body=body)
            manifest = build_manifest(
                item_id=item_id, name=item_id, source={"size": 1}, video=video, audio=audio,
                job_id=job_id, attempt=1, mirrored_at=datetime.now(UTC),
                mirror_version="bench", ffmpeg_version=None,
            )  # fmt: skip
            manifest_key = f"{PREFIX}/{item_id}/manifest.json"
            client.put_object(Bucket=bucket, Key=manifest_key, Body=encode_manifest(manifest))
            return {"id": job_id, "item_id": item_id, "video_key": video["key"],
                    "video": json.dumps(video), "audio_keys": json.dumps(audio),
                    "manifest_key": manifest_key}  # fmt: skip

        with ThreadPoolExecutor(16) as pool:
            rows = list(pool.map(seed, ids))
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO media_mirror.jobs (id, item_id, status, attempts, video_key, "
                    "video, audio_keys, manifest_key, finished_at) VALUES (:id, :item_id, "
                    "'done', 1, :video_key, CAST(:video AS jsonb), CAST(:audio_keys AS jsonb), "
                    ":manifest_key, now())"
                ),
                rows,
            )
        engine.dispose()
        say(f"seeded {items} items ({items * 4} objects, {items} rows) in "
            f"{time.monotonic() - started:.1f}s")  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("MIRROR_")}
        env.update({
            "MIRROR_DATABASE_URL": url, "MIRROR_S3_BUCKET": bucket, "MIRROR_S3_PREFIX": PREFIX,
            "MIRROR_S3_ENDPOINT_URL": endpoint, "MIRROR_S3_ACCESS_KEY_ID": DUMMY_KEY,
            "MIRROR_S3_SECRET_ACCESS_KEY": DUMMY_KEY,
        })  # fmt: skip
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "mirror.cli", "verify", "--all", "--json"],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        elapsed = time.monotonic() - started
        if result.returncode != 0:
            raise SystemExit(f"verify failed ({result.returncode}): {result.stderr[-2000:]}")
        report = json.loads(result.stdout)
        assert report["ok"] and report["items"] == items, report["counts"]
        say(f"machine load: {harness.machine_load()}")
        print(f"verify --all of {items} items ({report['objects']} objects): {elapsed:.1f}s "
              f"(target < 120 s for 10,000)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
