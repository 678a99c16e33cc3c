"""Mapping outputs from the file's own streams, not Jellyfin's numbering (issue 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.domain.errors import PermanentError
from mirror.domain.item import MediaItem, MediaStream
from mirror.transcode import build_command, plan_transcode
from mirror.transcode.probe import ProbedFile, ProbedStream
from mirror.transcode.streams import select_streams

WORK = Path("/work/item")
SOURCE = WORK / "source.mkv"
SRT = MediaStream(
    index=0, type="Subtitle", codec="subrip", language="eng", is_external=True,
    path="/media/Movie/Movie.en.srt",
)  # fmt: skip
MKA = MediaStream(
    index=1, type="Audio", codec="aac", language="eng", title="Commentary", is_external=True,
    path="/media/Movie/Movie.commentary.mka",
)  # fmt: skip


def item(*streams: MediaStream) -> MediaItem:
    return MediaItem(
        id="a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21", name="Movie", type="Movie", container="mkv",
        size=1000, duration_s=100.0, streams=streams,
    )  # fmt: skip


def shifted(k: int, *streams: MediaStream) -> list[MediaStream]:
    return [MediaStream(**{**_fields(s), "index": s.index + k}) for s in streams]


def _fields(stream: MediaStream) -> dict[str, object]:
    return {name: getattr(stream, name) for name in MediaStream.__dataclass_fields__}


VIDEO = MediaStream(index=0, type="Video", codec="h264", frame_rate=25.0)
ENG = MediaStream(index=1, type="Audio", codec="aac", language="eng")
FRA = MediaStream(index=2, type="Audio", codec="ac3", language="fra", channels=6)
SUB = MediaStream(index=3, type="Subtitle", codec="subrip", language="eng")
PROBED = ProbedFile(
    streams=(
        ProbedStream(0, "Video", "h264", pixel_format="yuv420p", profile="High"),
        ProbedStream(1, "Audio", "aac", language="eng", channels=2),
        ProbedStream(2, "Audio", "ac3", language="fre", channels=6),
        ProbedStream(3, "Subtitle", "subrip", language="eng"),
    ),
    duration_s=99.5,
)


def test_sidecars_are_skipped_and_file_streams_keep_their_file_index() -> None:
    listed = item(SRT, MKA, *shifted(2, VIDEO, ENG, FRA, SUB))

    selection = select_streams(listed, PROBED)

    assert (selection.video.index, selection.video.specifier) == (0, "v:0")
    assert [(a.index, a.specifier, a.language) for a in selection.audio] == [
        (1, "a:0", "eng"),
        (2, "a:1", "fra"),  # Jellyfin's language wins over the file's tag
    ]
    externals = [s.to_json() for s in selection.skipped if "path" in s.to_json()]
    assert externals == [
        {"index": 0, "kind": "Subtitle", "codec": "subrip", "language": "eng",
         "reason": "external file Movie.en.srt beside the media: not part of the download",
         "path": "/media/Movie/Movie.en.srt"},
        {"index": 1, "kind": "Audio", "codec": "aac", "language": "eng",
         "reason": "external file Movie.commentary.mka beside the media: not part of the download",
         "path": "/media/Movie/Movie.commentary.mka"},
    ]  # fmt: skip


def test_without_a_probe_sidecars_are_subtracted_from_jellyfins_index() -> None:
    plan = plan_transcode(item(SRT, MKA, *shifted(2, VIDEO, ENG, FRA, SUB)), WORK, SOURCE)

    assert [a.relative_path for a in plan.audio] == ["audio/1-eng.m4a", "audio/2-fra.m4a"]
    command = build_command(plan, "ffmpeg")
    maps = [command[i + 1] for i, arg in enumerate(command) if arg == "-map"]
    assert maps == ["0:v:0", "0:a:0", "0:a:1"]


def test_audio_keys_are_the_same_with_and_without_sidecars() -> None:
    plain = plan_transcode(item(VIDEO, ENG, FRA, SUB), WORK, SOURCE, probe=PROBED)
    with_sidecars = plan_transcode(
        item(SRT, MKA, *shifted(2, VIDEO, ENG, FRA, SUB)), WORK, SOURCE, probe=PROBED
    )

    assert [a.relative_path for a in plain.audio] == [a.relative_path for a in with_sidecars.audio]


def test_cover_art_is_never_the_video_and_counts_as_an_ffmpeg_video_stream() -> None:
    cover = MediaStream(index=0, type="EmbeddedImage", codec="mjpeg")
    probe = ProbedFile(
        streams=(
            ProbedStream(0, "Video", "mjpeg", attached_pic=True),
            ProbedStream(1, "Video", "h264", pixel_format="yuv420p"),
            ProbedStream(2, "Audio", "aac"),
        ),
        duration_s=10.0,
    )
    listed = item(cover, *shifted(1, VIDEO), MediaStream(index=2, type="Audio", codec="aac"))

    plan = plan_transcode(listed, WORK, SOURCE, probe=probe)

    assert (plan.video.stream_index, plan.video.specifier) == (1, "v:1")
    assert plan.skipped_json() == [
        {"index": 0, "kind": "EmbeddedImage", "codec": "mjpeg", "language": None,
         "reason": "embedded cover art (mjpeg), not the video"},
    ]  # fmt: skip


def test_an_attached_picture_jellyfin_calls_video_is_still_cover_art() -> None:
    probe = ProbedFile((ProbedStream(0, "Video", "png", attached_pic=True),), 10.0)

    with pytest.raises(PermanentError, match="has no video stream \\(only cover art\\)"):
        select_streams(item(MediaStream(index=0, type="Video", codec="png")), probe)


def test_lying_jellyfin_list_fails_naming_both_counts() -> None:
    probe = ProbedFile(PROBED.streams[:2], 99.5)  # one audio stream in the file

    with pytest.raises(PermanentError) as raised:
        select_streams(item(VIDEO, ENG, FRA), probe)

    assert str(raised.value) == (
        "Jellyfin lists 2 audio streams, the file has 1: rescan the item in Jellyfin"
    )


def test_counts_that_agree_pass_and_every_disagreement_is_named() -> None:
    probe = ProbedFile(PROBED.streams[:2], 99.5)

    with pytest.raises(PermanentError) as raised:
        select_streams(item(VIDEO, ENG, FRA, SUB), probe)

    message = str(raised.value)
    assert "Jellyfin lists 2 audio streams, the file has 1" in message
    assert "Jellyfin lists 1 subtitle stream, the file has 0" in message
    assert message.endswith(": rescan the item in Jellyfin")


def test_subtitles_data_and_extra_videos_are_skipped_with_reasons() -> None:
    probe = ProbedFile(
        streams=(
            ProbedStream(0, "Video", "h264"),
            ProbedStream(1, "Video", "h264"),
            ProbedStream(2, "Subtitle", "hdmv_pgs_subtitle"),
            ProbedStream(3, "Subtitle", "subrip"),
            ProbedStream(4, "Data", "bin_data"),
            ProbedStream(5, "Attachment", "ttf"),
        ),
        duration_s=5.0,
    )
    listed = item(
        VIDEO, MediaStream(index=1, type="Video", codec="h264"),
        MediaStream(index=2, type="Subtitle", codec="PGSSUB"),
        MediaStream(index=3, type="Subtitle", codec="subrip"),
        MediaStream(index=4, type="Data"),
    )  # fmt: skip

    selection = select_streams(listed, probe)

    assert selection.audio == ()
    assert [(s.index, s.kind, s.reason) for s in selection.skipped] == [
        (1, "Video", "another video stream: only the first is mirrored"),
        (2, "Subtitle",
         "image subtitle (hdmv_pgs_subtitle): only text subtitles can become WebVTT"),
        (3, "Subtitle", "text subtitle (subrip): output format mp4 writes no subtitles"),
        (4, "Data", "data stream (bin_data): not audio or video"),
    ]  # fmt: skip


def test_file_facts_fill_what_jellyfin_left_out() -> None:
    bare = item(MediaStream(index=0, type="Video"), MediaStream(index=1, type="Audio"))
    probe = ProbedFile(
        (
            ProbedStream(0, "Video", "h264", pixel_format="yuv420p10le", profile="High 10"),
            ProbedStream(1, "Audio", "eac3", language="deu", channels=8),
        ),
        duration_s=42.0,
    )

    plan = plan_transcode(bare, WORK, SOURCE, probe=probe)

    assert (plan.video.source_codec, plan.video.codec) == ("h264", "libx264")
    (track,) = plan.audio
    assert (track.source_codec, track.language, track.codec, track.channels) == (
        "eac3",
        "deu",
        "aac",
        6,
    )
    assert plan.duration_s == 42.0  # the file's duration wins over RunTimeTicks


def test_hls_keeps_text_subtitles_and_text_sidecars_and_skips_image_ones_by_codec() -> None:
    probe = ProbedFile(
        streams=(
            ProbedStream(0, "Video", "h264"),
            ProbedStream(1, "Subtitle", "hdmv_pgs_subtitle"),
            ProbedStream(2, "Subtitle", "ass"),
        ),
        duration_s=5.0,
    )
    sidecar_srt = MediaStream(
        index=0,
        type="Subtitle",
        codec="subrip",
        language="fra",
        is_external=True,
        path="/media/Movie.fr.srt",
    )
    sidecar_sup = MediaStream(
        index=1, type="Subtitle", codec="PGSSUB", is_external=True, path="/media/Movie.sup"
    )
    listed = item(
        sidecar_srt, sidecar_sup,
        MediaStream(index=2, type="Video", codec="h264"),
        MediaStream(index=3, type="Subtitle", codec="PGSSUB"),
        MediaStream(index=4, type="Subtitle", codec="ass", language="eng", is_forced=True),
    )  # fmt: skip

    selection = select_streams(listed, probe, subtitles=True)

    assert [(s.index, s.specifier, s.codec, s.is_forced) for s in selection.subtitles] == [
        (2, "s:1", "ass", True)
    ]
    assert selection.sidecar_subtitles == (sidecar_srt,)
    assert [(s.index, s.codec) for s in selection.skipped] == [
        (1, "PGSSUB"),
        (1, "hdmv_pgs_subtitle"),
    ]
