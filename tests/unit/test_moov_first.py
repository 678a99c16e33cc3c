"""moov_first: an MP4 with the moov at the end, rewritten moov-first for a pipe.

Real ffmpeg on generated files: what is fed decodes to the very frames of the original;
layouts it cannot rewrite give None (the caller downloads the whole file as before).
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from mirror.demo.media import run_ffmpeg
from mirror.domain.errors import SourceChanged
from mirror.domain.progress import AbortSignal
from mirror.files.growing_file import GrowingFile
from mirror.transcode.moov_first import (
    MoovFirstFeed,
    TailLayout,
    moov_at_end,
    moov_first,
    moov_first_feed,
)
from mirror.transcode.streamable import HEAD_BYTES


@pytest.fixture(scope="module")
def camera_clip(tmp_path_factory: pytest.TempPathFactory, ffmpeg_path: str) -> Path:
    path = tmp_path_factory.mktemp("moov") / "clip.mp4"
    run_ffmpeg([
        ffmpeg_path, "-nostdin", "-loglevel", "error", "-y",
        "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25:duration=3",
        "-f", "lavfi", "-i", "sine=frequency=440:duration=3",
        "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", "aac",
        "-movflags", "-faststart", str(path),
    ])  # fmt: skip
    return path


def _framemd5(ffmpeg_path: str, source: Path | bytes) -> str:
    """Every decoded frame's MD5: from a file by path, or from bytes through a pipe."""
    name = str(source) if isinstance(source, Path) else "pipe:0"
    piped = None if isinstance(source, Path) else source
    argv = [ffmpeg_path, "-v", "error", "-i", name, "-f", "framemd5", "-"]
    return subprocess.run(argv, input=piped, capture_output=True, check=True).stdout.decode()


def _fed(feed: MoovFirstFeed) -> bytes:
    chunks = []
    with feed.open() as reader:
        while chunk := reader.read_some(64 * 1024):
            chunks.append(chunk)
    return b"".join(chunks)


def _finished(path: Path) -> GrowingFile:
    growing = GrowingFile(path, AbortSignal())
    growing.finish()
    return growing


def test_the_feed_decodes_to_the_frames_of_the_original(
    camera_clip: Path, ffmpeg_path: str
) -> None:
    data = camera_clip.read_bytes()
    fetched: list[tuple[int, int]] = []

    def fetch(start: int, length: int) -> bytes:
        fetched.append((start, length))
        return data[start : start + length]

    feed = moov_first_feed(_finished(camera_clip), data[:HEAD_BYTES], len(data), fetch)

    assert feed is not None
    [(start, length)] = fetched
    assert data[start + 4 : start + 8] == b"moov" and start + length == len(data)
    fed = _fed(feed)
    assert len(fed) == len(data) and fed[40:48] != data[40:48]  # the same bytes, moov first
    assert _framemd5(ffmpeg_path, fed) == _framemd5(ffmpeg_path, camera_clip)
    feed.require_unchanged()


def test_a_file_whose_tail_differs_from_the_fetched_one_is_a_changed_source(
    camera_clip: Path, tmp_path: Path
) -> None:
    data = camera_clip.read_bytes()
    feed = moov_first_feed(
        _finished(camera_clip), data[:HEAD_BYTES], len(data), lambda s, n: data[s : s + n]
    )
    assert feed is not None
    changed = tmp_path / "changed.mp4"
    changed.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # the server's file, replaced
    layout = _layout(data)
    tail = data[layout.moov_start :]
    moov = moov_first(tail, layout)
    assert moov is not None
    replaced = MoovFirstFeed(_finished(changed), data[:HEAD_BYTES], layout, moov, tail)
    with pytest.raises(SourceChanged):
        replaced.require_unchanged()


def _layout(data: bytes) -> TailLayout:
    layout = moov_at_end(data[:HEAD_BYTES], len(data))
    assert layout is not None
    return layout


def test_a_moov_at_the_front_or_no_mp4_is_not_this_layout(tmp_path: Path) -> None:
    ftyp = struct.pack(">I4s", 16, b"ftyp") + b"isom\0\0\0\0"
    moov = struct.pack(">I4s", 8, b"moov")
    mdat = struct.pack(">I4s", 16, b"mdat") + b"\0" * 8
    assert moov_at_end(ftyp + moov + mdat, 40) is None  # faststart: streamable already
    assert moov_at_end(b"\x1a\x45\xdf\xa3" + b"\0" * 60, 64) is None  # Matroska
    assert moov_at_end(ftyp + mdat, None) is None  # no size: no tail to ask for
    assert moov_at_end(ftyp + mdat + moov, 40) == TailLayout(insert_at=16, moov_start=32)


def test_tails_it_cannot_rewrite_give_none(camera_clip: Path) -> None:
    data = camera_clip.read_bytes()
    layout = _layout(data)
    tail = data[layout.moov_start :]
    assert moov_first(tail, layout) is not None
    more_media = struct.pack(">I4s", 16, b"mdat") + b"\0" * 8
    assert moov_first(tail + more_media, layout) is None  # offsets could point past the moov
    assert moov_first(b"free" + tail, layout) is None  # not a moov where it should be
    assert moov_first(tail.replace(b"stco", b"cmov", 1), layout) is None  # compressed
    shifted = moov_first(tail, layout)
    assert shifted is not None and len(shifted) == len(tail) and shifted != tail


def test_a_server_that_does_not_serve_the_range_means_the_whole_download(
    camera_clip: Path,
) -> None:
    data = camera_clip.read_bytes()
    assert (
        moov_first_feed(_finished(camera_clip), data[:HEAD_BYTES], len(data), lambda s, n: None)
        is None
    )
