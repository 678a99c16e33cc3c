"""Issue 23 point 2, planning: which tracks get a stereo track, named and marked how."""

from __future__ import annotations

from pathlib import Path

from mirror.domain.item import MediaItem, MediaStream
from mirror.transcode import build_command, plan_transcode

WORK = Path("/work/item")
VIDEO = MediaStream(index=0, type="Video", codec="h264", frame_rate=25.0)
STEREO_ENG = MediaStream(index=1, type="Audio", codec="aac", language="eng", channels=2)
SURROUND_FRA = MediaStream(
    index=2, type="Audio", codec="ac3", language="fra", channels=6, is_default=True
)
SURROUND_ENG = MediaStream(index=3, type="Audio", codec="dts", language="eng", channels=8)


def plan(*audio: MediaStream, loudness: float | None = -23.0):  # type: ignore[no-untyped-def]
    item = MediaItem(
        id="a" * 32, name="Movie", type="Movie", container="mkv", size=1000,
        duration_s=100.0, streams=(VIDEO, *audio),
    )  # fmt: skip
    return plan_transcode(item, WORK, WORK / "source.mkv", stereo_loudness=loudness)


def test_each_multichannel_track_is_followed_by_its_stereo_track_the_default_ones_default() -> None:
    planned = plan(STEREO_ENG, SURROUND_FRA, SURROUND_ENG)

    assert [(t.relative_path, t.is_default, t.title) for t in planned.audio] == [
        ("audio/1-eng.m4a", False, None),
        ("audio/2-fra.m4a", False, None),  # Jellyfin's default gives way to its stereo track
        ("audio/2-fra-stereo.m4a", True, "fra (stereo)"),
        ("audio/3-eng.m4a", False, None),
        ("audio/3-eng-stereo.m4a", False, "eng (stereo)"),
    ]
    stereo = planned.audio[2]
    assert stereo.downmix is not None
    assert (stereo.codec, stereo.layout, stereo.channels) == ("aac", "stereo", None)
    assert stereo.downmix.intermediate == WORK / "downmix" / "2.flac"
    assert stereo.downmix.loudness_lufs == -23.0


def test_main_run_writes_the_downmix_not_the_stereo_track() -> None:
    argv = build_command(plan(SURROUND_FRA), "ffmpeg")

    assert str(WORK / "downmix" / "2.flac") in argv
    assert str(WORK / "audio" / "2-fra-stereo.m4a") not in argv
    # Centre 0 dB, fronts -3 dB, surrounds -6 dB, scaled to sum to 1 (never clips).
    (chain,) = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-af" and "pan=" in argv[i + 1]]
    assert chain.endswith(
        "aformat=channel_layouts=5.1,"
        "pan=stereo|FL=0.4527*FC+0.3205*FL+0.2269*BL|FR=0.4527*FC+0.3205*FR+0.2269*BR"
    ), argv


def test_no_stereo_track_when_off_or_when_no_track_is_multichannel() -> None:
    assert [t.relative_path for t in plan(SURROUND_FRA, loudness=None).audio] == ["audio/2-fra.m4a"]
    assert [t.relative_path for t in plan(STEREO_ENG).audio] == ["audio/1-eng.m4a"]
