from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mirror.domain.item import MediaItem, MediaStream
from mirror.transcode import TranscodePlan, build_command, plan_transcode

FFMPEG = "/opt/ffmpeg/bin/ffmpeg"
WORK = Path("/work/item")
SOURCE = WORK / "source.mkv"


def make_plan(*streams: MediaStream, **settings: str) -> TranscodePlan:
    item = MediaItem(
        id="a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21",
        name="Sample",
        type="Movie",
        container="mkv",
        size=1000,
        duration_s=10.0,
        streams=streams,
    )
    return plan_transcode(item, WORK, SOURCE, **settings)  # type: ignore[arg-type]


H264 = MediaStream(index=0, type="Video", codec="h264", frame_rate=25.0)
MPEG4 = MediaStream(index=0, type="Video", codec="mpeg4", frame_rate=25.0)
AAC_ENG = MediaStream(index=1, type="Audio", codec="aac", language="eng", title="English")
MP3_FRA = MediaStream(index=2, type="Audio", codec="mp3", language="fre", title="Français")
AC3_UND = MediaStream(index=4, type="Audio", codec="ac3")
SUBTITLE = MediaStream(index=3, type="Subtitle", codec="subrip", language="eng")


def output_args(command: list[str], plan: TranscodePlan) -> dict[str, list[str]]:
    """The options of each output, keyed by its file name (they precede the file name)."""
    start = command.index(str(SOURCE)) + 1
    segments: dict[str, list[str]] = {}
    for output in plan.outputs:
        end = command.index(str(output.path))
        segments[output.relative_path] = command[start:end]
        start = end + 1
    assert start == len(command), "nothing may follow the last output"
    return segments


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_global_options_come_first_with_one_input() -> None:
    plan = make_plan(H264, AAC_ENG)

    command = build_command(plan, FFMPEG)

    assert command[0] == FFMPEG
    head = command[: command.index("-i")]
    assert {"-nostdin", "-nostats", "-y", "-hide_banner"} <= set(head)
    assert option(head, "-progress") == "pipe:1"
    assert option(head, "-loglevel") == "error"
    assert command.count("-i") == 1
    assert option(command, "-i") == str(SOURCE)


def test_every_output_maps_exactly_its_stream() -> None:
    plan = make_plan(H264, AAC_ENG, MP3_FRA, SUBTITLE, AC3_UND)

    outputs = output_args(build_command(plan, FFMPEG), plan)

    assert list(outputs) == ["video.mp4", "audio/1-eng.m4a", "audio/2-fre.m4a", "audio/4-und.m4a"]
    maps = {
        name: [args[i + 1] for i, a in enumerate(args) if a == "-map"]
        for name, args in outputs.items()
    }
    assert maps == {
        "video.mp4": ["0:v:0"],
        "audio/1-eng.m4a": ["0:a:0"],
        "audio/2-fre.m4a": ["0:a:1"],
        "audio/4-und.m4a": ["0:a:2"],
    }


def test_fitting_sources_are_copied() -> None:
    plan = make_plan(H264, AAC_ENG)

    outputs = output_args(build_command(plan, FFMPEG), plan)

    video = outputs["video.mp4"]
    assert option(video, "-c:v") == "copy"
    assert "-preset" not in video and "-crf" not in video
    audio = outputs["audio/1-eng.m4a"]
    assert option(audio, "-c:a") == "copy"
    assert "-b:a" not in audio


def test_other_sources_are_reencoded_with_x264_and_aac() -> None:
    plan = make_plan(MPEG4, MP3_FRA, x264_preset="medium", audio_bitrate="128k")

    outputs = output_args(build_command(plan, FFMPEG), plan)

    video = outputs["video.mp4"]
    assert option(video, "-c:v") == "libx264"
    assert option(video, "-preset") == "medium"
    assert option(video, "-crf") == "23"
    assert option(video, "-pix_fmt") == "yuv420p"
    audio = outputs["audio/2-fre.m4a"]
    assert option(audio, "-c:a") == "aac"
    assert option(audio, "-b:a") == "128k"


def test_outputs_are_faststart_mp4_without_chapters_or_copied_metadata() -> None:
    plan = make_plan(H264, AAC_ENG, AC3_UND)

    for args in output_args(build_command(plan, FFMPEG), plan).values():
        assert option(args, "-f") == "mp4"
        assert option(args, "-movflags") == "+faststart"
        assert option(args, "-map_chapters") == "-1"
        assert option(args, "-map_metadata") == "-1"


def test_audio_carries_its_language_and_title() -> None:
    plan = make_plan(H264, MP3_FRA, AC3_UND)

    outputs = output_args(build_command(plan, FFMPEG), plan)

    french = outputs["audio/2-fre.m4a"]
    assert option(french, "-metadata:s:a:0") == "language=fre"
    assert option(french, "-metadata:s:a") == "title=Français"
    unknown = outputs["audio/4-und.m4a"]
    assert not any(arg.startswith("-metadata") for arg in unknown)
    assert not any(arg.startswith("-metadata") for arg in outputs["video.mp4"])


def test_video_only_item_has_one_output() -> None:
    plan = make_plan(H264)

    command = build_command(plan, FFMPEG)

    assert command[-1] == str(WORK / "video.mp4")
    assert command.count("-map") == 1


def test_relative_paths_cannot_be_read_as_protocols() -> None:
    item = MediaItem(
        id="a" * 32, name="x", type="Movie", container="mkv", size=1, duration_s=1.0,
        streams=(H264,),
    )  # fmt: skip
    plan = plan_transcode(item, Path("out"), Path("http:evil.mkv"))

    command = build_command(plan, FFMPEG)

    assert option(command, "-i") == "file:http:evil.mkv"
    assert command[-1] == "file:out/video.mp4"


def test_audio_with_more_than_six_channels_is_folded_to_six_and_never_upmixed() -> None:
    surround = MediaStream(index=1, type="Audio", codec="truehd", channels=8, language="eng")
    stereo = MediaStream(index=2, type="Audio", codec="ac3", channels=2, language="fre")
    plan = make_plan(H264, surround, stereo)

    outputs = output_args(build_command(plan, FFMPEG), plan)

    assert option(outputs["audio/1-eng.m4a"], "-ac") == "6"
    assert "-ac" not in outputs["audio/2-fre.m4a"]
    # Either way the encoder gets a layout AAC has a configuration for (5.1: config 6).
    assert option(outputs["audio/1-eng.m4a"], "-af").endswith(",aformat=channel_layouts=5.1")
    assert option(outputs["audio/2-fre.m4a"], "-af").endswith(",aformat=channel_layouts=stereo")


def test_side_surround_is_given_the_layout_aac_names_5_1() -> None:
    """AC-3 and DTS decode to `5.1(side)`; without a layout ffmpeg's AAC encoder writes
    channel configuration 0 + a program config element, which browsers refuse."""
    ac3 = MediaStream(index=1, type="Audio", codec="ac3", channels=6, language="eng")
    plan = make_plan(H264, ac3, output_format="hls")

    audio = output_args(build_command(plan, FFMPEG), plan)["audio/1-eng.m4a"]

    assert option(audio, "-af") == "aresample=async=1:first_pts=0,aformat=channel_layouts=5.1"
    assert "-ac" not in audio


def test_a_reencoded_track_is_padded_to_start_where_the_video_starts() -> None:
    plan = make_plan(H264, MP3_FRA)
    track = replace(plan.audio[0], video_start_s=0.5)

    audio = output_args(build_command(replace(plan, audio=(track,)), FFMPEG), plan)

    # The video's first frame becomes 0 on the track's clock; silence fills up to it.
    assert option(audio["audio/2-fre.m4a"], "-af") == (
        "asetpts=PTS-0.500000/TB,aresample=async=1:first_pts=0"
    )


def test_a_copied_track_gets_no_filters() -> None:
    plan = make_plan(H264, AAC_ENG)

    audio = output_args(build_command(plan, FFMPEG), plan)["audio/1-eng.m4a"]

    assert "-af" not in audio and option(audio, "-c:a") == "copy"


def test_hls_outputs_are_fragmented_on_keyframes_with_a_segment_index() -> None:
    plan = make_plan(MPEG4, AAC_ENG, output_format="hls")

    outputs = output_args(build_command(plan, FFMPEG), plan)

    fragmented = "+frag_keyframe+empty_moov+default_base_moof"
    video = outputs["video.mp4"]
    # Signed composition offsets: a B-frame stream's first frame is presented at 0.
    assert option(video, "-movflags") == fragmented + "+negative_cts_offsets"
    # The AAC priming gets an edit list, written once the first fragment is known.
    assert option(outputs["audio/1-eng.m4a"], "-movflags") == fragmented + "+delay_moov"
    # Keyframes every 4 s when encoding, so fragments of about 4 s start on them.
    assert option(video, "-force_key_frames") == "expr:gte(t,n_forced*4)"
    assert option(video, "-min_frag_duration") == "3500000"
    assert option(outputs["audio/1-eng.m4a"], "-frag_duration") == "500000"


def test_a_copied_video_keeps_its_own_keyframes_in_hls() -> None:
    plan = make_plan(H264, AAC_ENG, output_format="hls")

    video = output_args(build_command(plan, FFMPEG), plan)["video.mp4"]

    assert "-force_key_frames" not in video
    assert option(video, "-c:v") == "copy"
