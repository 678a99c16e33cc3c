"""The upload figures of a mirrored item add up to what its objects hold in S3.

Every object goes up through one path (`StreamingUpload`): the outputs while ffmpeg
writes them, then the subtitles and playlists in the same run. So the attempt's
`bytes_uploaded` (which `mirror show`, /metrics and the dashboard sum) and the job's last
heartbeat figures are the sum of every object's size. The manifest is not counted: it is
the record of the mirror, written after the upload, not one of the mirrored files.
"""

from __future__ import annotations

from mirror.db.attempt_log import AttemptLog
from mirror.demo.media import SampleMedia
from tests.fixtures.stack import Stack


def test_uploaded_bytes_are_the_sum_of_every_object_the_item_put(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item_id = stack.add_sample(sample_h264_aac, "Figures Sample")
    stack.enqueue(item_id)

    assert stack.burst_in_process(MIRROR_OUTPUT_FORMAT="hls") == ["done"]

    listed = stack.s3.client.list_objects_v2(Bucket=stack.s3.bucket, Prefix=f"mirror/{item_id}/")
    sizes = {obj["Key"].rsplit("/", 1)[-1]: obj["Size"] for obj in listed.get("Contents", [])}
    assert "master.m3u8" in sizes and "manifest.json" in sizes  # playlists were put too
    assert any(name.endswith(".m3u8") and name != "master.m3u8" for name in sizes)
    put = sum(size for name, size in sizes.items() if name != "manifest.json")
    job = stack.job(item_id)
    [attempt] = AttemptLog(stack.repo.engine).attempts_of(job.id)
    assert attempt.bytes_uploaded == put
    assert job.heartbeat_data is not None
    assert (job.heartbeat_data["bytes_done"], job.heartbeat_data["bytes_total"]) == (put, put)
