"""An MP4 whose moov comes after its media data (cameras, some encoders) is mirrored
while it downloads: the moov is fetched first with a range request from the end, so the
work dir peaks near the item's size instead of twice it (issue 21 point 7).

In process (`burst_in_process`) against the throttled stand-in, SeaweedFS and real ffmpeg; a
sampler thread polls the work dir's allocated bytes (holes given back count as freed)
and the source's size, every 20 ms.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia, run_ffmpeg
from mirror.domain.item import MediaStream
from tests.fixtures.media import shared
from tests.fixtures.stack import Stack

DOWNLOAD_S = 5
SMALL_PARTS = {"MIRROR_S3_PART_SIZE": "5MiB"}


def _top_level_boxes(path: Path) -> list[bytes]:
    data, offset, kinds = path.read_bytes(), 0, []
    while offset + 8 <= len(data):
        size, kind = struct.unpack_from(">I4s", data, offset)
        kinds.append(kind)
        offset += size
    return kinds


def _moov_at_end(folder: Path, ffmpeg_path: str) -> SampleMedia:
    """48 s of noisy 180p H.264 + AAC (about 65 MB) written without +faststart: small
    frames at a low quantizer give the bytes for a third of the CPU of 360p at the default."""
    path = folder / "camera.mp4"
    run_ffmpeg([
        ffmpeg_path, "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
        "-f", "lavfi", "-i", "testsrc=size=320x180:rate=25:duration=48,noise=alls=80:allf=t+u",
        "-f", "lavfi", "-i", "sine=frequency=440:duration=48",
        "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "ultrafast", "-qp", "8",
        "-pix_fmt", "yuv420p", "-g", "25", "-c:a", "aac", "-b:a", "96k", "-ac", "2",
        "-metadata:s:a:0", "language=eng", "-movflags", "-faststart", str(path),
    ])  # fmt: skip
    streams = (
        MediaStream(
            index=0, type="Video", codec="h264", width=320, height=180, frame_rate=25.0,
            is_default=True, pixel_format="yuv420p", profile="Constrained Baseline", bit_depth=8,
        ),
        MediaStream(
            index=1, type="Audio", codec="aac", language="eng", channels=2, is_default=True,
        ),
    )  # fmt: skip
    return SampleMedia(path, streams, 48.0, "mov,mp4,m4a,3gp,3g2,mj2", path.stat().st_size)


@pytest.fixture(scope="session")
def camera_mp4(tmp_path_factory: pytest.TempPathFactory, ffmpeg_path: str) -> SampleMedia:
    return shared(tmp_path_factory, "camera_mp4", lambda d: _moov_at_end(d, ffmpeg_path))


@dataclass
class WorkDirSampler:
    """Peak allocated bytes under the work dir, and whether ffmpeg's outputs grew while
    the source was still incomplete."""

    work_dir: Path
    item_size: int
    peak: int = 0
    outputs_while_downloading: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.wait(0.02):
            try:
                allocated, source, outputs = self._sample()
            except FileNotFoundError:  # a folder went while it was walked (the cleanup)
                continue
            self.peak = max(self.peak, allocated)
            if source is not None and source < self.item_size and outputs > 0:
                self.outputs_while_downloading = max(self.outputs_while_downloading, outputs)

    def _sample(self) -> tuple[int, int | None, int]:
        """Allocated bytes, the source's size (None: no source yet), the outputs' bytes."""
        allocated, source, outputs = 0, None, 0
        for path in self.work_dir.rglob("*"):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            if not path.is_file():
                continue
            allocated += stat.st_blocks * 512
            if path.name.startswith("source.") and not path.name.endswith(".json"):
                source = stat.st_size
            elif path.parent.name == "out":
                outputs += stat.st_size
        return allocated, source, outputs

    @contextmanager
    def running(self) -> Iterator[WorkDirSampler]:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(5)


def test_an_mp4_with_the_moov_at_the_end_is_transcoded_while_it_downloads(
    stack: Stack, camera_mp4: SampleMedia
) -> None:
    assert _top_level_boxes(camera_mp4.path)[-1] == b"moov"  # the layout under test
    item_id = stack.add_sample(camera_mp4, "Camera Clip")
    stack.enqueue(item_id)
    stack.jellyfin.throttle(camera_mp4.size // DOWNLOAD_S)
    stack.work_dir.mkdir(parents=True, exist_ok=True)

    with WorkDirSampler(stack.work_dir, camera_mp4.size).running() as sampler:
        assert stack.burst_in_process(**SMALL_PARTS) == ["done"]

    ratio = sampler.peak / camera_mp4.size
    print(f"moov at the end: peak work dir {ratio:.2f}x of {camera_mp4.size} bytes")
    assert sampler.outputs_while_downloading > 0  # ffmpeg wrote before the download ended
    assert ratio <= 1.3
    ranges = [r.range for r in stack.jellyfin.download_requests()]
    assert ranges[0] is None or ranges[1] is None  # one whole pass from the start ...
    assert any(r is not None and not r.startswith("bytes=0-") for r in ranges)  # ... + the tail
    job = stack.job(item_id)
    assert job.status == "done" and job.video is not None
