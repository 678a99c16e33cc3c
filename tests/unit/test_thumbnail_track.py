"""The scrubbing thumbnails' track and command: pure, no ffmpeg run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mirror.domain.thumbnails import ThumbnailGrid, thumbnail_count, thumbnail_track
from mirror.hls.image_playlist import image_playlist, image_stream_line
from mirror.transcode import build_command
from mirror.transcode.streams import FileStream
from mirror.transcode.thumbnails import plan_thumbnails, thumbnail_filters
from tests.unit.test_transcode_command import AAC_ENG, FFMPEG, H264, MPEG4, make_plan, option


def test_one_thumbnail_per_interval_from_zero_at_least_one() -> None:
    assert [thumbnail_count(d, 10) for d in (0.5, 10.0, 10.04, 30.0, 31.0)] == [1, 1, 2, 3, 4]


def test_cues_run_left_to_right_then_down_then_onto_the_next_sheet() -> None:
    grid = ThumbnailGrid(interval_s=10, width=320, height=180, count=5, columns=2, rows=2)

    track = thumbnail_track(grid, duration_s=43.5)

    assert track.split("\n\n") == [
        "WEBVTT",
        "00:00:00.000 --> 00:00:10.000\n0.jpg#xywh=0,0,320,180",
        "00:00:10.000 --> 00:00:20.000\n0.jpg#xywh=320,0,320,180",
        "00:00:20.000 --> 00:00:30.000\n0.jpg#xywh=0,180,320,180",
        "00:00:30.000 --> 00:00:40.000\n0.jpg#xywh=320,180,320,180",
        # The last one ends with the video.
        "00:00:40.000 --> 00:00:43.500\n1.jpg#xywh=0,0,320,180\n",
    ]
    assert grid.sheets == 2


def test_cue_times_pass_the_hour() -> None:
    grid = ThumbnailGrid(interval_s=10, width=320, height=180, count=400)
    assert "01:06:30.000 --> 01:06:40.000\n3.jpg#xywh=2880,1620,320,180" in thumbnail_track(
        grid, None
    )


def test_a_copied_video_decodes_only_its_keyframes_for_the_sheets() -> None:
    plan = make_plan(H264, AAC_ENG, thumbnail_interval_s=10.0)  # type: ignore[arg-type]

    command = build_command(plan, FFMPEG)

    assert option(command, "-skip_frame:v") == "nokey"
    assert command.index("-skip_frame:v") < command.index("-i")
    # The sheets come last (`-progress` counts the first video output's frames).
    assert command[-1] == "/work/item/thumbnails/%d.jpg"
    graph = option(command, "-filter_complex")
    assert graph.startswith("[0:v:0]fps=1000/10000:round=up:eof_action=pass,")
    assert graph.endswith(",tile=1x1[thumbnails]")  # a 10 s item: one thumbnail
    assert option(command, "-map") == "0:v:0"  # the copy maps the stream itself


def test_a_reencoded_video_shares_its_decode_and_skips_no_frame() -> None:
    plan = make_plan(MPEG4, AAC_ENG, thumbnail_interval_s=10.0)  # type: ignore[arg-type]

    command = build_command(plan, FFMPEG)

    assert "-skip_frame:v" not in command
    assert command[-1].endswith("thumbnails/%d.jpg")


def test_no_thumbnails_without_an_interval() -> None:
    command = build_command(make_plan(H264, AAC_ENG), FFMPEG)
    assert "-skip_frame:v" not in command and "-filter_complex" not in command


def test_hdr_thumbnails_are_tone_mapped_like_a_reencode() -> None:
    hdr = FileStream(index=0, specifier="v:0", type="Video", color_transfer="smpte2084")
    sdr = FileStream(index=0, specifier="v:0", type="Video", color_space="bt709", height=720)

    assert any(f.startswith("tonemap=") for f in thumbnail_filters(hdr, 10.0))
    assert not any(f.startswith(("tonemap=", "zscale")) for f in thumbnail_filters(sdr, 10.0))


def test_the_image_playlist_has_one_segment_per_sheet_cut_in_tiles() -> None:
    grid = ThumbnailGrid(interval_s=10, width=320, height=180, count=150)

    playlist = image_playlist(grid, duration_s=1495.5)

    assert playlist.splitlines() == [
        "#EXTM3U",
        "#EXT-X-VERSION:7",
        "#EXT-X-TARGETDURATION:1000",
        "#EXT-X-MEDIA-SEQUENCE:0",
        "#EXT-X-PLAYLIST-TYPE:VOD",
        "#EXT-X-IMAGES-ONLY",
        "#EXTINF:1000,",
        "#EXT-X-TILES:RESOLUTION=320x180,LAYOUT=10x10,DURATION=10",
        "0.jpg",
        "#EXTINF:495.5,",  # the last sheet: 50 thumbnails, up to the end
        "#EXT-X-TILES:RESOLUTION=320x180,LAYOUT=10x10,DURATION=10",
        "1.jpg",
        "#EXT-X-ENDLIST",
    ]
    assert image_stream_line(grid, 6000, "thumbnails/thumbnails.m3u8") == (
        '#EXT-X-IMAGE-STREAM-INF:BANDWIDTH=6000,RESOLUTION=320x180,CODECS="jpeg",'
        'URI="thumbnails/thumbnails.m3u8"'
    )


def test_a_run_that_made_no_sheet_mirrors_without_thumbnails(tmp_path: Path) -> None:
    from mirror.pipeline.thumbnails import made_thumbnails

    plan = make_plan(H264, AAC_ENG, thumbnail_interval_s=10.0)  # type: ignore[arg-type]
    plan = replace(plan, thumbnails=replace(plan.thumbnails, directory=tmp_path))  # type: ignore[type-var]

    assert made_thumbnails(plan, "mirror", "a" * 32, 10.0) is None


@pytest.mark.parametrize(
    ("duration_s", "layout"),
    [(4.0, (1, 1)), (35.0, (4, 1)), (250.0, (10, 3)), (7200.0, (10, 10)), (None, (10, 10))],
)
def test_a_short_item_gets_a_sheet_just_big_enough(
    duration_s: float | None, layout: tuple[int, int]
) -> None:
    stream = FileStream(index=0, specifier="v:0", type="Video")
    planned = plan_thumbnails(stream, Path("/w"), 10.0, copy=True, duration_s=duration_s)
    assert (planned.columns, planned.rows) == layout
    assert planned.filters[-1] == f"tile={layout[0]}x{layout[1]}"
