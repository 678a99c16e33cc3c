"""A job with MIRROR_RENDITIONS: every rendition uploaded, on the row, in the manifest
and checked by `mirror verify` (in this process, on the fakes, real ffmpeg)."""

from __future__ import annotations

import hashlib
import json

from mirror.converge.verify import check_manifest, check_object, expected_objects
from mirror.demo.media import SampleMedia
from mirror.pipeline.steps import TranscodeOptions
from mirror.runner.attempt import Outcome
from tests.fixtures.inprocess import InProcess
from tests.fixtures.stack import mirrored_keys


def test_every_rendition_is_uploaded_recorded_and_verified(
    inproc: InProcess, sample_mpeg4_mp3: SampleMedia
) -> None:
    inproc.transcode = TranscodeOptions(
        ffmpeg_path=inproc.ffmpeg_path, renditions=("source", "720p", "180p")
    )
    item = inproc.add(sample_mpeg4_mp3)
    inproc.enqueue(item)

    assert inproc.run_burst() == [Outcome.DONE]

    job = inproc.job(item)
    store = inproc.fake_store
    assert job.video_key == f"mirror/{item}/video/source.mp4"
    assert job.video is not None
    assert [(r["rendition"], r["height"]) for r in job.video["renditions"]] == [("180p", 180)]
    assert store.object_keys() == mirrored_keys(job)
    assert f"mirror/{item}/video/180p.m3u8" in store.object_keys()  # 720p: above the source
    master = store.body(f"mirror/{item}/master.m3u8").decode()
    assert master.count("#EXT-X-STREAM-INF") == 2 and "RESOLUTION=240x180" in master
    for expected in expected_objects(job):
        body = store.body(expected["key"])
        digest = hashlib.sha256(body).hexdigest()
        assert check_object(item, expected, len(body), digest).verdict == "ok", expected["key"]
    manifest = store.body(f"mirror/{item}/manifest.json")
    renditions = [o.get("rendition") for o in json.loads(manifest)["outputs"]]
    assert renditions[:2] == ["source", "180p"]
    check = check_manifest(job, manifest)
    assert check is not None and check.verdict == "ok", check
