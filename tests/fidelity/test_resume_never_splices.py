"""Issue 19, point 7: a resumed download never splices two versions of a file.

The worker in this process (real pipeline, real ffmpeg) downloads from the Jellyfin
stand-in through the real client. The download is cut a few MiB in, after ffmpeg was
fed the first bytes, and at that moment the file on the server is replaced by another
one: a longer recording of another colour (a new size and a newer mtime). Whether the
retry comes inside the attempt (the client's own retry) or in the next attempt (the
partial kept on disk), the job ends done with a video made only of the new file, and
the row's `source` describes the new file.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from email.utils import formatdate
from pathlib import Path

import pytest

from mirror.demo.stand_in.server import JellyfinStandIn
from mirror.domain.item import MediaStream
from mirror.jellyfin.client import JellyfinClient
from tests.fixtures.inprocess import InProcess

MB = 1024 * 1024
FPS = 25
OLD_S = 4
CUT_AT = 2 * MB + MB // 2  # past the 2 MiB a Matroska file needs before ffmpeg is fed
STREAMS = (
    MediaStream(index=0, type="Video", codec="h264", width=320, height=240, frame_rate=FPS),
    MediaStream(index=1, type="Audio", codec="aac", language="eng", channels=1),
)


def recording(ffmpeg: str, dest: Path, colour: str, duration_s: int) -> Path:
    """A solid-colour H.264 + AAC Matroska file; the noise makes it about 0.9 MB/s."""
    picture = f"color=c={colour}:size=320x240:rate={FPS}:duration={duration_s}"
    subprocess.run(
        [
            ffmpeg, "-nostdin", "-loglevel", "error", "-y",
            "-f", "lavfi", "-i", f"{picture},noise=alls=40:allf=t+u",
            "-f", "lavfi", "-i", f"sine=frequency=440:duration={duration_s}",
            "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-g", str(FPS),
            "-c:a", "aac", "-b:a", "64k", "-ac", "1", "-f", "matroska", str(dest),
        ],
        check=True,
    )  # fmt: skip
    return dest


def frame_colours(ffmpeg: str, video: Path) -> list[tuple[int, int, int]]:
    """Every decoded frame of `video`, averaged to one RGB pixel."""
    raw = subprocess.run(
        [
            ffmpeg, "-nostdin", "-loglevel", "error", "-i", str(video),
            "-vf", "scale=1:1:flags=area", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1",
        ],
        check=True,
        capture_output=True,
    ).stdout  # fmt: skip
    return [(raw[i], raw[i + 1], raw[i + 2]) for i in range(0, len(raw), 3)]


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class Library:
    """One item on the stand-in whose file is swapped for the new one at the first cut."""

    def __init__(
        self, jellyfin: JellyfinStandIn, ffmpeg: str, folder: Path, new_s: int = 6
    ) -> None:
        self.jellyfin = jellyfin
        self.new_s = new_s
        self.slow_answers = 0  # download requests answered 503 (Retry-After: 1) after the cut
        folder.mkdir()
        self.served = recording(ffmpeg, folder / "Film.mkv", "red", OLD_S)
        self.new = recording(ffmpeg, folder / "new.mkv", "blue", new_s)
        self.new_bytes = self.new.read_bytes()
        self.item_id = jellyfin.add_item(
            self.served, name="Film", streams=STREAMS, duration_s=float(OLD_S)
        )
        self.swapped = threading.Event()
        jellyfin.cut_after(CUT_AT, then=self._swap)

    def _swap(self) -> None:
        """What a library manager does: the new file renamed over the old, newer mtime."""
        later = self.served.stat().st_mtime + 60
        os.utime(self.new, (later, later))
        os.replace(self.new, self.served)
        if self.slow_answers:
            path = f"/Items/{self.item_id}/Download"
            self.jellyfin.fail_next(503, self.slow_answers, retry_after=1, path_prefix=path)
        self.swapped.set()


@pytest.fixture(params=[6, OLD_S], ids=["longer", "as long"])
def library(
    jellyfin: JellyfinStandIn, ffmpeg_path: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Library:
    """The new file lasts 6 s (a splice shows in the duration) or 4 s, like the old
    one (a splice passes the output checks: only the frames tell)."""
    return Library(jellyfin, ffmpeg_path, tmp_path / "library", new_s=request.param)


@pytest.fixture
def client_with(jellyfin: JellyfinStandIn) -> Iterator[Callable[[int], JellyfinClient]]:
    clients: list[JellyfinClient] = []

    def make(retry_attempts: int) -> JellyfinClient:
        clients.append(
            JellyfinClient(
                jellyfin.url,
                jellyfin.api_key,
                retry_attempts=retry_attempts,
                retry_initial_wait=0.01,
                retry_max_wait=1.0,  # Retry-After: 1 is waited out
            )
        )
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def mirror_it(inproc: InProcess, library: Library) -> None:
    inproc.enqueue(library.item_id, max_attempts=3)
    worker = inproc.start()
    try:
        wait_for(lambda: inproc.job(library.item_id).status in ("done", "failed"), 90, "the job")
    finally:
        worker.stop()
        assert worker.join()


def assert_only_the_new_file(inproc: InProcess, library: Library, tmp_path: Path) -> None:
    job = inproc.job(library.item_id)
    assert job.status == "done", job.error
    assert library.swapped.is_set()
    assert job.video_key is not None
    video = tmp_path / "mirrored.mp4"
    video.write_bytes(inproc.fake_store.body(job.video_key))
    colours = frame_colours(inproc.ffmpeg_path, video)
    old = [n for n, (red, _, blue) in enumerate(colours) if red > blue]
    assert not old, f"frames {old[:5]}... of {len(colours)} come from the old (red) file"
    assert len(colours) == library.new_s * FPS
    probed = inproc.read_back(job.video_key, tmp_path)
    assert probed.duration_s == pytest.approx(library.new_s, abs=0.1)
    # The row describes the bytes mirrored: the new file's size and Last-Modified.
    assert job.source is not None
    assert job.source["size"] == len(library.new_bytes)
    mtime = int(library.served.stat().st_mtime)
    assert job.source["last_modified"] == formatdate(mtime, usegmt=True)


def test_a_retry_inside_the_attempt_restarts_from_the_new_file(
    inproc: InProcess,
    library: Library,
    client_with: Callable[[int], JellyfinClient],
    tmp_path: Path,
) -> None:
    """The client's own retry gets the whole new file (200 to the conditional range)
    after ffmpeg was fed the old one's first MiB: the attempt ends without using an
    attempt, nothing of it is published, and the next one mirrors the new file."""
    inproc.media = client_with(5)

    mirror_it(inproc, library)

    assert_only_the_new_file(inproc, library, tmp_path)
    assert inproc.attempt_outcomes(library.item_id) == ["waiting", "done"]
    assert inproc.job(library.item_id).attempts == 1


def test_a_partial_kept_for_the_next_attempt_is_not_resumed_into_the_new_file(
    inproc: InProcess,
    library: Library,
    client_with: Callable[[int], JellyfinClient],
    tmp_path: Path,
) -> None:
    """The cut ends the first attempt (its one retry is refused); its partial stays on
    disk. The next attempt's metadata lists the new file, and Jellyfin takes a second to
    answer (503, Retry-After: 1): time enough to feed ffmpeg the whole old partial if it
    were taken for current. It is dropped before any byte of it reaches ffmpeg instead,
    and the download starts at byte 0."""
    inproc.media = client_with(2)
    library.slow_answers = 2

    mirror_it(inproc, library)

    assert_only_the_new_file(inproc, library, tmp_path)
    assert inproc.attempt_outcomes(library.item_id) == ["retry", "done"]
