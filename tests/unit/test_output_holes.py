"""Punching stored media payloads out of fragmented outputs keeps what verify and the
playlists read: real ffmpeg writes the files, the box walk and `ffmpeg -i` read them back."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mirror.files.holes import OutputHoles, punch_hole
from mirror.hls.fragments import read_fragment_index
from mirror.transcode.probe import probe_own_outputs

FRAGMENTED = ["-movflags", "+frag_keyframe+empty_moov+default_base_moof"]


@pytest.fixture(scope="module")
def encoded(tmp_path_factory: pytest.TempPathFactory, ffmpeg_path: str) -> tuple[Path, Path]:
    """Fragmented outputs as the transcode writes them, encoded once for the module."""
    tmp = tmp_path_factory.mktemp("holes")
    video, audio = tmp / "video.mp4", tmp / "audio.m4a"
    subprocess.run(
        [ffmpeg_path, "-nostdin", "-y", "-loglevel", "error",
         "-f", "lavfi", "-i", "testsrc=size=640x360:rate=25:duration=30",
         "-f", "lavfi", "-i", "sine=duration=30",
         "-map", "0:v", "-c:v", "libx264", "-preset", "ultrafast", "-g", "50",
         *FRAGMENTED, "-min_frag_duration", "2000000", str(video),
         "-map", "1:a", "-c:a", "aac", *FRAGMENTED, "-frag_duration", "500000", str(audio)],
        check=True,
    )  # fmt: skip
    return video, audio


def _outputs(tmp: Path, encoded: tuple[Path, Path]) -> tuple[Path, Path]:
    """A test's own copies: holes are punched in place."""
    video, audio = (Path(shutil.copy(path, tmp / path.name)) for path in encoded)
    return video, audio


def _stream(path: Path, keep_head: int, chunk: int, part: int) -> OutputHoles:
    """Feed the file as the upload reads it (odd chunks), storing a part at a time."""
    holes = OutputHoles(path, keep_head=keep_head)
    data = path.read_bytes()
    for start in range(0, len(data), chunk):
        holes.observe(data[start : start + chunk])
    for end in range(part, len(data) + part, part):
        holes.stored(min(end, len(data)))
    return holes


def test_stored_payloads_give_their_disk_back_and_verify_and_playlists_read_the_same(
    tmp_path: Path, ffmpeg_path: str, encoded: tuple[Path, Path]
) -> None:
    video, audio = _outputs(tmp_path, encoded)
    probe = tmp_path / "probe"
    probe.write_bytes(b"\0" * 8192)
    with probe.open("r+b") as file:
        if not punch_hole(file.fileno(), 0, 4096):
            pytest.skip("this file system has no holes")
    before = {p: (read_fragment_index(p), p.stat().st_blocks) for p in (video, audio)}
    copies = {p: p.with_name("copy-" + p.name) for p in (video, audio)}
    for path, copy in copies.items():
        shutil.copy(path, copy)

    freed = [_stream(p, keep_head=64 * 1024, chunk=4099, part=100_000).freed for p in copies]
    assert freed[0] > 0  # audio fragments (~4 KiB of payload) hold no whole page here
    assert video.stat().st_size == copies[video].stat().st_size  # the size stays
    assert video.stat().st_blocks < before[video][1] / 4  # most of the video is freed
    assert audio.stat().st_blocks <= before[audio][1]
    for path in (video, audio):
        assert read_fragment_index(path) == before[path][0]  # playlists: the same
    punched = probe_own_outputs([video, audio], ffmpeg_path)
    whole = probe_own_outputs(list(copies.values()), ffmpeg_path)
    assert [p.duration_s for p in punched] == [w.duration_s for w in whole]
    assert punched[0].duration_s == pytest.approx(30.0, abs=0.1)
    assert [s.codec for p in punched for s in p.streams] == ["h264", "aac"]


def test_nothing_is_freed_before_it_is_stored_nor_in_the_head(
    tmp_path: Path, encoded: tuple[Path, Path]
) -> None:
    video, _ = _outputs(tmp_path, encoded)
    original = video.read_bytes()
    holes = OutputHoles(video, keep_head=64 * 1024)
    holes.observe(original)
    holes.stored(300_000)
    now = video.read_bytes()
    assert now[: 64 * 1024] == original[: 64 * 1024]
    assert now[300_000:] == original[300_000:]
    assert now != original


def test_bytes_that_are_not_boxes_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "not-mp4"
    path.write_bytes(b"\0" * 100_000)
    holes = OutputHoles(path, keep_head=0)
    holes.observe(path.read_bytes())
    holes.stored(100_000)
    assert holes.freed == 0
