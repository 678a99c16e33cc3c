"""MIRROR_RENDITIONS on real ffmpeg: one decode writes every rung, each verified, their
fragments aligned, all in one master (tiny 4 s 320x240 samples, rungs 180p and 144p)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia
from mirror.domain.progress import AbortSignal
from mirror.hls import package_hls
from mirror.hls.fragments import read_fragment_index
from mirror.hls.timestamp_map import first_presentation_s
from mirror.transcode import (
    build_command,
    plan_transcode,
    probe_file,
    run_transcode,
    verify_outputs,
)

ITEM_ID = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
LADDER = ("source", "360p", "180p", "144p")  # 360p is above the source: left out


@pytest.mark.parametrize("sample_name", ["sample_h264_aac", "sample_mpeg4_mp3"])
def test_a_ladder_is_one_decode_of_aligned_verified_renditions_in_one_master(
    sample_name: str, request: pytest.FixtureRequest, tmp_path: Path, ffmpeg_path: str
) -> None:
    sample: SampleMedia = request.getfixturevalue(sample_name)
    plan = plan_transcode(
        sample.to_item(ITEM_ID),
        tmp_path,
        sample.path,
        probe=probe_file(sample.path, ffmpeg_path),
        output_format="hls",
        renditions=LADDER,
    )
    assert [v.relative_path for v in plan.videos] == [
        "video/source.mp4",
        "video/180p.mp4",
        "video/144p.mp4",
    ]
    command = build_command(plan, ffmpeg_path)
    assert command.count("-i") == 1
    # One decode feeds every encode: the graph reads the video once, nothing else maps it.
    graph = command[command.index("-filter_complex") + 1]
    assert graph.count("[0:v:0]") == 1 and "split=2" in graph
    assert command.count("0:v:0") == (1 if plan.video.codec == "copy" else 0)

    run_transcode(plan, ffmpeg_path, lambda _: None, AbortSignal())
    verified = verify_outputs(plan, ffmpeg_path)
    package = package_hls(
        plan, width=verified.video.width, height=verified.video.height, ladder=verified.ladder
    )

    assert [(v.rendition, v.width, v.height) for v in verified.videos] == [
        ("source", 320, 240),
        ("180p", 240, 180),
        ("144p", 192, 144),
    ]
    # Players switch at segment boundaries: every rung is cut at the same times.
    cuts = [
        [round(f.duration_s, 3) for f in read_fragment_index(v.path).fragments] for v in plan.videos
    ]
    assert cuts[0] == cuts[1] == cuts[2] and len(cuts[0]) >= 1
    # ... and shows its first frame at the same instant (the audio and subtitles' 0).
    starts = [first_presentation_s(v.path, read_fragment_index(v.path)) for v in plan.videos]
    assert max(starts) - min(starts) < 0.001, starts
    master = package.master.path.read_text()
    variants = re.findall(r"#EXT-X-STREAM-INF:(.*)\n(.*)", master)
    assert [uri for _, uri in variants] == [
        "video/source.m3u8",
        "video/180p.m3u8",
        "video/144p.m3u8",
    ]
    resolutions = [re.search(r"RESOLUTION=(\S+?),", a).group(1) for a, _ in variants]  # type: ignore[union-attr]
    assert resolutions == ["320x240", "240x180", "192x144"]
    for attributes, _ in variants:
        assert re.search(r"AVERAGE-BANDWIDTH=\d+", attributes)
        assert re.search(r'CODECS="avc1\.\w+,mp4a\.40\.2"', attributes)
        assert "FRAME-RATE=25.000" in attributes
    bandwidths = [int(re.search(r"\bBANDWIDTH=(\d+)", a).group(1)) for a, _ in variants]  # type: ignore[union-attr]
    assert bandwidths[0] > bandwidths[1] > bandwidths[2] > 0
    assert (tmp_path / "video" / "180p.m3u8").read_text().count("#EXT-X-BYTERANGE") == len(cuts[1])
