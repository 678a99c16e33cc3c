"""Scrubbing thumbnails (MIRROR_THUMBNAILS): made in the mirror's own ffmpeg run, or
copied from Jellyfin's trickplay tiles.

In this process on the fakes, with real ffmpeg: sheets and a WebVTT track land under
`thumbnails/`, the manifest lists them, and each cue's rectangle holds the picture of
its time (the sample's frames carry their time as a moving pattern: compared here with
a frame decoded at that time).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from mirror.demo.media import SampleMedia
from mirror.demo.stand_in.trickplay import make_trickplay
from mirror.domain.thumbnails import thumbnail_objects
from mirror.pipeline.steps import TranscodeOptions
from mirror.runner.attempt import Outcome
from mirror.transcode.thumbnails import jpeg_size
from tests.fixtures.inprocess import InProcess

_CUE = re.compile(r"^(\S+) --> (\S+)\n(\d+)\.jpg#xywh=(\d+),(\d+),(\d+),(\d+)$", re.M)


def _mirror(inproc: InProcess, sample: SampleMedia, interval_s: float) -> str:
    inproc.transcode = TranscodeOptions(
        ffmpeg_path=inproc.ffmpeg_path, thumbnail_interval_s=interval_s
    )
    item = inproc.add(sample, "Thumbnails")
    inproc.enqueue(item)
    assert inproc.run_burst() == [Outcome.DONE]
    return item


def _manifest(inproc: InProcess, item: str) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads(inproc.fake_store.body(f"mirror/{item}/manifest.json"))
    return manifest


def test_a_copied_video_gets_sheets_and_a_track_from_its_keyframes(
    inproc: InProcess, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    item = _mirror(inproc, sample_h264_aac, interval_s=1.0)

    manifest = _manifest(inproc, item)
    thumbnails = manifest["thumbnails"]
    prefix = f"mirror/{item}/thumbnails"
    assert thumbnails["track"] == f"{prefix}/thumbnails.vtt"
    assert (thumbnails["origin"], thumbnails["interval_s"]) == ("ffmpeg", 1.0)
    # 4 s at one a second: 0, 1, 2, 3, on one sheet of 320-pixel thumbnails.
    assert thumbnails["count"] == 4
    listed = [o["key"] for o in thumbnail_objects(manifest)]
    assert listed == [f"{prefix}/0.jpg", f"{prefix}/thumbnails.m3u8", thumbnails["track"]]
    # The master names the same sheets as an image playlist (Shaka, Roku), last.
    master = inproc.fake_store.body(f"mirror/{item}/master.m3u8").decode()
    assert master.splitlines()[-1].startswith("#EXT-X-IMAGE-STREAM-INF:BANDWIDTH=")
    assert master.splitlines()[-1].endswith(
        f'RESOLUTION=320x{thumbnails["height"]},CODECS="jpeg",URI="thumbnails/thumbnails.m3u8"'
    )
    images = inproc.fake_store.body(f"{prefix}/thumbnails.m3u8").decode()
    assert "#EXT-X-IMAGES-ONLY" in images and images.splitlines()[-2] == "0.jpg"
    # A player that knows no image streams reads the master as before (ffmpeg's hls).
    for key in inproc.fake_store.object_keys():
        local = tmp_path / "bucket" / key
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(inproc.fake_store.body(key))
    master_file = tmp_path / "bucket" / f"mirror/{item}/master.m3u8"
    listing = subprocess.run(
        [inproc.ffmpeg_path, "-hide_banner", "-i", str(master_file)],
        capture_output=True, text=True, check=False,
    ).stderr  # fmt: skip
    assert sorted(re.findall(r"Stream #0:\d+.*?: (Video|Audio)", listing)) == [
        "Audio", "Audio", "Video",
    ], listing  # fmt: skip
    sheet = tmp_path / "0.jpg"
    sheet.write_bytes(inproc.fake_store.body(f"{prefix}/0.jpg"))
    width, height = thumbnails["width"], thumbnails["height"]
    # A sheet just big enough: planned from the file's 4.02 s, 5 x 1 (the video's own
    # 4.00 s holds 4 marks, so the fifth cell stays black and no cue points at it).
    assert width == 320 and jpeg_size(sheet) == (5 * width, height)
    track = inproc.fake_store.body(thumbnails["track"]).decode()
    assert track.startswith("WEBVTT\n")
    cues = _CUE.findall(track)
    assert [(c[0], c[1]) for c in cues] == [
        ("00:00:00.000", "00:00:01.000"),
        ("00:00:01.000", "00:00:02.000"),
        ("00:00:02.000", "00:00:03.000"),
        ("00:00:03.000", "00:00:04.000"),
    ]
    assert [tuple(map(int, c[2:])) for c in cues] == [
        (0, 0, 0, width, height),
        (0, width, 0, width, height),
        (0, 2 * width, 0, width, height),
        (0, 3 * width, 0, width, height),
    ]
    # The copy itself is untouched by the keyframes-only decoding.
    job = inproc.job(item)
    assert job.video is not None and job.video["codec"] == "h264"


def test_a_reencoded_video_feeds_its_thumbnails_from_the_same_decode(
    inproc: InProcess, sample_mpeg4_mp3: SampleMedia, tmp_path: Path
) -> None:
    item = _mirror(inproc, sample_mpeg4_mp3, interval_s=2.0)

    thumbnails = _manifest(inproc, item)["thumbnails"]
    assert thumbnails["count"] == 2 and thumbnails["width"] == 320
    # The second thumbnail is the frame at 2 s (the mark), not the last one before 3 s
    # (fps's default rounding): testsrc's colour bar moves, its digit shows the second.
    sheet = tmp_path / "sheet.jpg"
    sheet.write_bytes(inproc.fake_store.body(f"mirror/{item}/thumbnails/0.jpg"))
    w, h = thumbnails["width"], thumbnails["height"]
    crop = _pixels(inproc.ffmpeg_path, sheet, f"crop={w}:{h}:{w}:0")
    frame = _pixels(inproc.ffmpeg_path, sample_mpeg4_mp3.path, f"scale={w}:{h}", seek=2.0)
    late = _pixels(inproc.ffmpeg_path, sample_mpeg4_mp3.path, f"scale={w}:{h}", seek=2.96)
    assert _distance(crop, frame) < 11 < 14 < _distance(crop, late)  # measured: 7.2, 16.7


def _pixels(ffmpeg: str, path: Path, chain: str, seek: float | None = None) -> bytes:
    """One frame as RGB pixels, after `chain`."""
    before = ["-ss", str(seek)] if seek is not None else []
    argv = [ffmpeg, "-v", "error", *before, "-i", str(path), "-frames:v", "1"]
    argv += ["-vf", f"{chain},format=rgb24", "-f", "rawvideo", "-"]
    return subprocess.run(argv, check=True, capture_output=True).stdout


def _distance(a: bytes, b: bytes) -> float:
    assert len(a) == len(b)
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a)


def test_jellyfins_own_trickplay_tiles_are_copied_not_made_again(
    inproc: InProcess, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    tiles = tmp_path / "jellyfin-metadata" / "trickplay" / "320"
    made = make_trickplay(
        sample_h264_aac.path, tiles, 4.0, ffmpeg=inproc.ffmpeg_path, interval_ms=2000
    )
    inproc.transcode = TranscodeOptions(ffmpeg_path=inproc.ffmpeg_path, thumbnail_interval_s=1.0)
    item = inproc.add(sample_h264_aac, "Tiled", trickplay=made)
    inproc.enqueue(item)
    assert inproc.run_burst() == [Outcome.DONE]

    thumbnails = _manifest(inproc, item)["thumbnails"]
    # Jellyfin's grid and interval (2 s), not MIRROR_THUMBNAIL_INTERVAL's (1 s).
    assert (thumbnails["origin"], thumbnails["interval_s"], thumbnails["count"]) == (
        "jellyfin",
        2.0,
        2,
    )
    sheet = inproc.fake_store.body(f"mirror/{item}/thumbnails/0.jpg")
    assert sheet == (tiles / "0.jpg").read_bytes()  # Jellyfin's bytes, as served
    track = inproc.fake_store.body(thumbnails["track"]).decode()
    assert [c[:2] for c in _CUE.findall(track)] == [
        ("00:00:00.000", "00:00:02.000"),
        ("00:00:02.000", "00:00:04.020"),  # the last one ends with the item (4.02 s)
    ]


def test_when_a_jellyfin_sheet_is_gone_ffmpeg_makes_the_thumbnails(
    inproc: InProcess, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    tiles = tmp_path / "trickplay" / "320"
    made = make_trickplay(sample_h264_aac.path, tiles, 4.0, ffmpeg=inproc.ffmpeg_path)
    (tiles / "0.jpg").unlink()  # listed in Jellyfin's database, its file deleted: 404
    inproc.transcode = TranscodeOptions(ffmpeg_path=inproc.ffmpeg_path, thumbnail_interval_s=1.0)
    item = inproc.add(sample_h264_aac, "Tiles gone", trickplay=made)
    inproc.enqueue(item)
    assert inproc.run_burst() == [Outcome.DONE]

    thumbnails = _manifest(inproc, item)["thumbnails"]
    assert (thumbnails["origin"], thumbnails["interval_s"], thumbnails["count"]) == (
        "ffmpeg",
        1.0,
        4,
    )


def test_thumbnails_off_means_no_objects_and_a_null_entry(
    inproc: InProcess, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    made = make_trickplay(sample_h264_aac.path, tmp_path / "t", 4.0, ffmpeg=inproc.ffmpeg_path)
    item = inproc.add(sample_h264_aac, "Off", trickplay=made)  # even when Jellyfin has tiles
    inproc.enqueue(item)
    assert inproc.run_burst() == [Outcome.DONE]

    assert _manifest(inproc, item)["thumbnails"] is None
    assert not [k for k in inproc.fake_store.object_keys() if "/thumbnails/" in k]
