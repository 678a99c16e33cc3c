"""`mirror worker --burst` against the whole real stack: the mission, end to end."""

from __future__ import annotations

import json
import time
from pathlib import Path

from mirror.db.attempt_log import AttemptLog
from mirror.demo.media import SampleMedia, describe_streams
from mirror.domain.jobs import JobRecord
from tests.fixtures.stack import Stack


def test_both_samples_are_mirrored_with_one_file_per_stream(
    stack: Stack,
    sample_h264_aac: SampleMedia,
    sample_mpeg4_mp3: SampleMedia,
    ffmpeg_path: str,
    tmp_path: Path,
) -> None:
    remux = stack.add_sample(sample_h264_aac, "Remux Sample")
    reencode = stack.add_sample(sample_mpeg4_mp3, "Re-encode Sample")
    enqueued = stack.mirror_here("enqueue", remux, reencode)
    assert enqueued.returncode == 0, enqueued.stderr

    started = time.monotonic()
    result = stack.mirror("worker", "--burst")
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-3000:]
    print(f"end-to-end burst run: {elapsed:.1f}s")

    for item_id, sample in ((remux, sample_h264_aac), (reencode, sample_mpeg4_mp3)):
        job = stack.job(item_id)
        assert job.status == "done", job.error
        assert job.attempts == 1
        [attempt] = AttemptLog(stack.repo.engine).attempts_of(job.id)
        assert (attempt.outcome, attempt.bytes_downloaded) == ("done", sample.size)
        assert attempt.transcode_s is not None and attempt.transcode_s > 0
        assert attempt.bytes_uploaded is not None and attempt.bytes_uploaded > 0
        assert attempt.heartbeat_writes is not None and attempt.heartbeat_writes >= 1
        assert job.video_key == f"mirror/{item_id}/video.mp4"
        assert job.heartbeat_data is not None and job.heartbeat_data["phase"] == "upload"
        assert job.heartbeat_data["percent"] == 100.0

        video = stack.download_object(job.video_key, tmp_path / item_id / "video.mp4")
        video_streams = describe_streams(video, ffmpeg_path)
        assert [s.type for s in video_streams] == ["Video"]
        assert video_streams[0].codec == "h264"

        source_audio = [s for s in sample.streams if s.type == "Audio"]
        assert job.audio_keys is not None
        assert [entry["stream_index"] for entry in job.audio_keys] == [
            s.index for s in source_audio
        ]
        for entry, source in zip(job.audio_keys, source_audio, strict=True):
            assert entry["key"] == f"mirror/{item_id}/audio/{source.index}-{source.language}.m4a"
            assert entry["language"] == source.language
            assert entry["title"] == source.title
            assert entry["codec"] == "aac"
            local = stack.download_object(
                entry["key"], tmp_path / item_id / Path(entry["key"]).name
            )
            streams = describe_streams(local, ffmpeg_path)
            assert [s.type for s in streams] == ["Audio"]
            assert streams[0].codec == "aac"
            assert streams[0].language == source.language

        # The sample's SubRip subtitle (file index 3) is mirrored as WebVTT.
        assert job.subtitle_keys is not None
        assert [(e["key"], e["codec"], e["external"]) for e in job.subtitle_keys] == [
            (f"mirror/{item_id}/subtitles/3-eng.vtt", "subrip", False)
        ]
        vtt = stack.s3.client.get_object(Bucket=stack.s3.bucket, Key=job.subtitle_keys[0]["key"])
        assert vtt["Body"].read().startswith(b"WEBVTT")
        assert not [s for s in job.skipped_streams or [] if s["kind"] == "Subtitle"]
        assert job.manifest_key == f"mirror/{item_id}/manifest.json"
        manifest = json.loads(
            stack.s3.client.get_object(Bucket=stack.s3.bucket, Key=job.manifest_key)["Body"].read()
        )
        assert manifest["item"]["id"] == item_id
        assert manifest["job"] == {"id": str(job.id), "attempt": 1}
        assert manifest["source"] == job.source
        assert [o["key"] for o in manifest["outputs"]] == [
            job.video_key,
            *(e["key"] for e in job.audio_keys),
        ]
        assert manifest["ffmpeg_version"]

        head = stack.s3.client.head_object(Bucket=stack.s3.bucket, Key=job.video_key)
        assert head["ContentType"] == "video/mp4"

    expected_keys = sorted(
        [stack.job(i).video_key or "" for i in (remux, reencode)]
        + [e["key"] for i in (remux, reencode) for e in stack.job(i).audio_keys or []]
        + [stack.job(i).manifest_key or "" for i in (remux, reencode)]
        + [e["key"] for i in (remux, reencode) for e in stack.job(i).subtitle_keys or []]
        + [k for i in (remux, reencode) for k in _playlists(stack.job(i))]
    )
    assert stack.object_keys() == expected_keys
    assert list(stack.work_dir.iterdir()) == []


def _playlists(job: JobRecord) -> list[str]:
    """MIRROR_OUTPUT_FORMAT=hls (the default): a playlist beside each output, the master."""
    outputs = [job.video_key or ""] + [e["key"] for e in job.audio_keys or []]
    outputs += [e["key"] for e in job.subtitle_keys or []]
    assert job.hls_key == job.video_key.replace("video.mp4", "master.m3u8")  # type: ignore[union-attr]
    return [key.rsplit(".", 1)[0] + ".m3u8" for key in outputs] + [job.hls_key]


def test_wrong_api_key_fails_and_the_key_appears_nowhere(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item = stack.add_sample(sample_h264_aac)
    stack.enqueue(item)
    wrong_key = "f00dfeedf00dfeedf00dfeedf00dfeed"
    result = stack.mirror("worker", "--burst", MIRROR_JELLYFIN_API_KEY=wrong_key)
    assert result.returncode == 0
    job = stack.job(item)
    assert job.status == "failed"
    assert job.error is not None and "rejected the API key" in job.error
    row_text = str(job.to_json())
    for secret in (wrong_key, stack.jellyfin.api_key):
        assert secret not in row_text
        assert secret not in result.stdout + result.stderr
    assert stack.object_keys() == []


def test_heartbeats_keep_up_during_a_throttled_download(
    stack: Stack, tmp_path: Path, ffmpeg_path: str
) -> None:
    from mirror.demo.media import generate_sample

    sample = generate_sample(
        tmp_path / "long.mkv", "h264_aac", duration_s=8, ffmpeg_path=ffmpeg_path
    )
    item = stack.add_sample(sample)
    rate = max(sample.size // 8, 1)  # about 8 s for the whole file: 8 heartbeat intervals
    stack.jellyfin.throttle(rate)
    stack.enqueue(item)
    worker = stack.start_worker("--burst", MIRROR_HEARTBEAT_INTERVAL="1s")
    from datetime import UTC, datetime

    max_lag = 0.0
    bytes_seen: list[int] = []
    deadline = time.monotonic() + 120
    while worker.poll() is None and time.monotonic() < deadline:
        job = stack.job(item)
        if job.status == "processing" and job.heartbeat_at is not None:
            data = job.heartbeat_data or {}
            if data.get("phase") == "download":
                lag = (datetime.now(UTC) - job.heartbeat_at).total_seconds()
                max_lag = max(max_lag, lag)
                bytes_seen.append(int(data.get("bytes_done", 0)))
        time.sleep(0.2)
    assert worker.wait(timeout=60) == 0, stack.log_of()[-2000:]
    assert stack.job(item).status == "done"
    assert len(bytes_seen) > 20
    assert max_lag <= 2.0
    assert bytes_seen == sorted(bytes_seen) and bytes_seen[-1] > bytes_seen[0]
