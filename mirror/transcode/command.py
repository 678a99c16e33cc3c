"""The ffmpeg command line for a plan: one input, every output, one run.

One run decodes the source once however many tracks it has. The global options make
ffmpeg scriptable: no stdin, machine-readable progress on stdout, and only errors on
stderr (which then carries the reason when the run fails).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import ffmpeg

from mirror.transcode.downmix import Loudness, downmix_filters, normalise_filters
from mirror.transcode.encoders import EncoderOptions, VideoEncoder, VideoQuality, encoder_options
from mirror.transcode.outputs import AudioOutput, TranscodePlan, VideoOutput
from mirror.transcode.thumbnails import JPEG_QUALITY, ThumbnailOutput

GLOBAL_OPTIONS: tuple[str, ...] = (
    "-nostdin",
    "-hide_banner",
    "-nostats",
    "-loglevel",
    "error",
    "-progress",
    "pipe:1",
    "-y",
)

# Options every output shares: no chapters, no global or per-stream metadata copied
# from the source (titles of other tracks, encoder tags), MP4 index up front so
# players can start before the whole file is fetched.
_COMMON_OUTPUT_OPTIONS: dict[str, Any] = {
    "format": "mp4",
    "map_chapters": "-1",
    "map_metadata": "-1",
    "movflags": "+faststart",
    # Sparse or late-starting streams otherwise fail with "Too many packets buffered".
    "max_muxing_queue_size": "4096",
}


# `hls`: fragmented MP4 that HLS playlists point into with byte ranges (mirror.hls).
# The moov carries no samples (empty_moov), each fragment starts on a keyframe and is
# self-contained (default_base_moof). No global sidx: ffmpeg would write it at the end
# by moving the whole file, and the file is uploaded while it is written (append-only);
# the playlists come from a walk over the fragments instead. One playable file each.
_FRAGMENTED_MOVFLAGS = "+frag_keyframe+empty_moov+default_base_moof"
_FRAGMENTED_OUTPUT_OPTIONS: dict[str, Any] = {
    **_COMMON_OUTPUT_OPTIONS,
    "movflags": _FRAGMENTED_MOVFLAGS,
}
# Timing that needs no interpretation: MSE players (hls.js, Shaka, video.js) place fMP4
# samples by tfdt + composition offset and ignore edit lists, so each file's first
# presented sample must be at 0 by those alone. Video with B-frames: signed composition
# offsets, so the first frame is presented at its decode time 0 (unsigned ones put it
# at the reorder delay, 2 frames, while the audio starts at 0: lip sync off by ~80 ms).
# Measured in Chromium's MSE, both append modes (tests/fidelity/test_mse_timing.py).
# libavformat alone reads such fragments late by the largest negative offset (mov.c
# adds it to every pts): ffmpeg-based players see the picture that much late.
_VIDEO_MOVFLAGS = _FRAGMENTED_MOVFLAGS + "+negative_cts_offsets"
# Audio: the encoder's priming (1024 samples) gets an edit list for the players that
# honour one (delay_moov: the moov waits for the first fragment, which tells its length);
# the others play it as 21 ms of silence, within one audio frame.
_AUDIO_MOVFLAGS = _FRAGMENTED_MOVFLAGS + "+delay_moov"
FRAGMENT_S = 4
# Video is cut at the first keyframe once a fragment holds this much (keyframes every
# 4 s when encoding give 4 s fragments; a copied stream's own GOP decides otherwise).
_MIN_VIDEO_FRAGMENT_US = 3_500_000
# Audio has no keyframes to cut at, and 1024-sample frames never add up to FRAGMENT_S:
# short fragments (24 frames at 48 kHz), grouped by the playlist into segments that end
# where the video's do (mirror.hls.fragments.aligned), so they never drift apart.
# Costs about 200 bytes of fragment headers a second (~1 % of a 160k track).
_AUDIO_FRAGMENT_US = 500_000


def build_command(plan: TranscodePlan, ffmpeg_path: str, *, from_stdin: bool = False) -> list[str]:
    """The full argv (ffmpeg first) that writes every output of `plan` in one run;
    `from_stdin`: the source comes through a pipe (mirror.transcode.feed)."""
    # A copied video is decoded for the thumbnails alone: its keyframes are enough.
    thumbnails = plan.thumbnails
    keyframes = {"skip_frame:v": "nokey"} if thumbnails and thumbnails.keyframes_only else {}
    source = ffmpeg.input("pipe:0" if from_stdin else file_argument(plan.source), **keyframes)
    fragmented = plan.fragmented
    if plan.ladder:
        outputs = _ladder_outputs(source, plan, fragmented)
    else:
        outputs = [_video_output(source, plan.video, fragmented)]
    for track in plan.audio:
        if track.downmix is None:
            chain = audio_filters(track)
            outputs.append(_audio_output(source[track.specifier], track, fragmented, chain))
        else:  # the stereo track's downmix; the track itself is made after this run
            outputs.append(_downmix_output(source, track))
    # Text subtitles of the file become WebVTT in the same run (sidecars come from Jellyfin).
    outputs += [
        ffmpeg.output(source[sub.specifier], file_argument(sub.path), format="webvtt")
        for sub in plan.subtitles
        if sub.specifier is not None
    ]
    graph = ffmpeg.merge_outputs(*outputs)
    # An encoder's device (VAAPI) is opened before the input.
    encoded = next((video for video in plan.videos if video.codec != "copy"), None)
    device = () if encoded is None else _encoder_options(encoded).global_options
    command: list[str] = ffmpeg.compile(graph, cmd=[ffmpeg_path, *GLOBAL_OPTIONS, *device])
    if thumbnails is not None:  # last: `-progress` counts the first video output's frames
        command += thumbnail_arguments(plan.video.specifier, thumbnails)
    return command


def _encoder_options(video: VideoOutput, filters: Sequence[str] | None = None) -> EncoderOptions:
    """The encoder's options for `video`, on `filters` (default: the video's picture
    filters); a rung's peak rate (MIRROR_RENDITIONS) caps it, with a 2 s buffer."""
    encoder = cast(VideoEncoder, video.codec)
    quality = VideoQuality(
        preset=video.preset or "veryfast",
        crf=23 if video.crf is None else video.crf,
        max_bitrate=None if video.maxrate_kbps is None else video.maxrate_kbps * 1000,
    )
    chain = video.filters if filters is None else filters
    return encoder_options(encoder, quality, chain, device=video.device)


def thumbnail_arguments(specifier: str, thumbnails: ThumbnailOutput) -> list[str]:
    """The sheets as one more output: the decoded video (`specifier`, e.g. `v:0`) through
    the thumbnails' own filtergraph into numbered JPEGs, one per tiled frame
    (passthrough: image2 would otherwise repeat frames up to a frame rate). Raw argv:
    ffmpeg-python would escape the filters' own `:` and `=`."""
    graph = f"[0:{specifier}]{','.join(thumbnails.filters)}[thumbnails]"
    return [
        "-filter_complex",
        graph,
        "-map",
        "[thumbnails]",
        "-c:v",
        "mjpeg",
        "-q:v",
        str(JPEG_QUALITY),
        "-fps_mode",
        "passthrough",
        "-start_number",
        "0",
        "-f",
        "image2",
        file_argument(thumbnails.pattern),
    ]


def _output_options(fragmented: bool) -> dict[str, Any]:
    return dict(_FRAGMENTED_OUTPUT_OPTIONS if fragmented else _COMMON_OUTPUT_OPTIONS)


def _video_output(source: Any, video: VideoOutput, fragmented: bool) -> Any:
    # `source["v:0"]` makes ffmpeg-python emit `-map 0:v:0`: the planned stream by its
    # position among the file's video streams, which no sidecar numbering can shift.
    options: dict[str, Any] = {**_output_options(fragmented), "c:v": video.codec}
    if video.codec != "copy":
        # 8-bit 4:2:0 (yuv420p / nv12): 10-bit or 4:4:4 sources would otherwise give H.264
        # that browsers refuse. The filters leave BT.709 (converted or tone-mapped) and tag
        # the frames so; the encoder adds its hand-over (mirror.transcode.encoders).
        options.update(_encoder_options(video).output_with_filters())
        if fragmented:
            options["force_key_frames"] = f"expr:gte(t,n_forced*{FRAGMENT_S})"
    if fragmented:
        options["min_frag_duration"] = _MIN_VIDEO_FRAGMENT_US
        options["movflags"] = _VIDEO_MOVFLAGS
    return ffmpeg.output(source[video.specifier], file_argument(video.path), **options)


def _ladder_outputs(source: Any, plan: TranscodePlan, fragmented: bool) -> list[Any]:
    """Every rendition from ONE decode: the picture fixes once, then `split` hands the
    frames to the source's encode (a copied source rung reads the packets as they are)
    and down a cascade of scales, each rung scaled from the one above it (480p from
    720p reads 2.25x fewer pixels than from 1080p: about 10 % of the rungs' CPU).

    Players switch renditions at segment boundaries, so every rung has its keyframes
    (and so its fragments) at the same times: the source's own keyframes when it is
    copied (`-force_key_frames source`), else every FRAGMENT_S seconds as today.
    """
    encoded = [video for video in plan.videos if video.codec != "copy"]
    picture = source[plan.video.specifier]
    for chain_filter in encoded[0].filters:  # every rung's are the source's (plan)
        name, args, kwargs = filter_parts(chain_filter)
        picture = picture.filter(name, *args, **kwargs)
    copied = plan.video.codec == "copy"
    keyframes = "source" if copied else f"expr:gte(t,n_forced*{FRAGMENT_S})"
    outputs = [_video_output(source, plan.video, fragmented)] if copied else []
    feeds: list[tuple[VideoOutput, Any]] = []
    level = picture
    if not copied:
        to_source, level = _branches(level, 2)
        feeds.append((plan.video, to_source))
    for position, rung in enumerate(plan.ladder):
        assert rung.scale_height is not None
        scaled = level.filter("scale", w=-2, h=rung.scale_height)  # -2: even width
        if position + 1 < len(plan.ladder):
            to_rung, level = _branches(scaled, 2)
        else:
            to_rung = scaled
        feeds.append((rung, to_rung))
    for video, frames in feeds:
        # The picture filters ran once above the split; each branch ends with the
        # encoder's own hand-over (hardware upload, pixel format) and its options.
        encoder = _encoder_options(video, filters=())
        for chain_filter in encoder.filters:
            name, args, kwargs = filter_parts(chain_filter)
            frames = frames.filter(name, *args, **kwargs)
        options: dict[str, Any] = {
            **_output_options(fragmented),
            **encoder.output,
            "force_key_frames": keyframes,
            **aligned_keyframe_options(video.codec),
        }
        if fragmented:
            options["min_frag_duration"] = _MIN_VIDEO_FRAGMENT_US
            options["movflags"] = _VIDEO_MOVFLAGS
        outputs.append(ffmpeg.output(frames, file_argument(video.path), **options))
    return outputs


def _branches(frames: Any, count: int) -> list[Any]:
    """`count` streams of the same frames (ffmpeg's `split`, which copies no pixels)."""
    split = frames.filter_multi_output("split")
    return [split.stream(position) for position in range(count)]


def aligned_keyframe_options(encoder: str) -> dict[str, Any]:
    """Options that leave keyframes to `-force_key_frames` alone, so the rungs'
    fragments line up: no GOP limit (250 frames) before a copied source's longer GOP
    ends (`-g`, which every encoder reads), and for x264 no scene-cut keyframes of its
    own (each rung would cut at other frames; NVENC and QSV add none by default)."""
    return {"g": 100_000, **({"sc_threshold": 0} if encoder == "libx264" else {})}


def filter_parts(chain_filter: str) -> tuple[str, list[str], dict[str, str]]:
    """`zscale=t=linear:npl=100` -> ("zscale", [], {"t": "linear", "npl": "100"}): a
    `-vf` filter in the shape ffmpeg-python's graph takes (it escapes and joins them)."""
    name, _, arguments = chain_filter.partition("=")
    args: list[str] = []
    kwargs: dict[str, str] = {}
    for part in arguments.split(":") if arguments else []:
        key, equals, value = part.partition("=")
        if equals:
            kwargs[key] = value
        else:
            args.append(part)
    return name, args, kwargs


def build_stereo_command(
    track: AudioOutput, measured: Loudness, ffmpeg_path: str, *, fragmented: bool
) -> list[str]:
    """The argv that encodes a stereo track from its downmix (written by the main run) at
    its loudness target, as the other audio tracks are written (mirror.transcode.stereo)."""
    assert track.downmix is not None
    downmix = ffmpeg.input(file_argument(track.downmix.intermediate))
    chain = ",".join(normalise_filters(track.downmix.loudness_lufs, measured))
    output = _audio_output(downmix["a:0"], track, fragmented, chain)
    command: list[str] = ffmpeg.compile(
        output, cmd=[ffmpeg_path, *STEREO_GLOBAL_OPTIONS, "-loglevel", "error"]
    )
    return command


# The stereo passes (mirror.transcode.stereo adds `-progress pipe:1` and the log level).
STEREO_GLOBAL_OPTIONS: tuple[str, ...] = ("-nostdin", "-hide_banner", "-nostats", "-y")


def _downmix_output(source: Any, track: AudioOutput) -> Any:
    """The stereo track's centre-weighted downmix, lossless (FLAC, 24-bit): its loudness
    is measured once the whole track exists, then it is encoded at the target."""
    assert track.downmix is not None
    timing = audio_filters(track, keep_channels=True)
    chain = ",".join([*([timing] if timing else []), *downmix_filters()])
    return ffmpeg.output(
        source[track.specifier],
        file_argument(track.downmix.intermediate),
        format="flac",
        **{"c:a": "flac", "sample_fmt": "s32", "af": chain, "map_metadata": "-1"},
    )


def _audio_output(stream: Any, track: AudioOutput, fragmented: bool, chain: str | None) -> Any:
    options: dict[str, Any] = {**_output_options(fragmented), "c:a": track.codec}
    if fragmented:
        options["frag_duration"] = _AUDIO_FRAGMENT_US
        options["movflags"] = _AUDIO_MOVFLAGS
    if track.codec != "copy":
        options["b:a"] = track.bitrate
    elif (track.source_codec or "").lower() == "aac":
        # AAC from MPEG-TS is ADTS; MP4 wants raw frames and an AudioSpecificConfig.
        # movenc's automatic aac_adtstoasc does not cover fragmented output (empty_moov):
        # "Malformed AAC bitstream". The filter passes raw AAC (MKV, MP4) through as is.
        options["bsf:a"] = "aac_adtstoasc"
    if chain:
        options["af"] = chain
    if track.channels is not None:
        options["ac"] = track.channels  # fold 7.1 down to 5.1; never set to upmix
    # ffmpeg-python takes options as a dict, so one key cannot repeat: the language goes
    # through the `s:a:0` specifier and the title through `s:a`, both naming the output's
    # only stream.
    if track.language:
        options["metadata:s:a:0"] = f"language={track.language}"
    if track.title:
        options["metadata:s:a"] = f"title={track.title}"
    return ffmpeg.output(stream, file_argument(track.path), **options)


def audio_filters(track: AudioOutput, *, keep_channels: bool = False) -> str | None:
    """The `-af` chain of a re-encoded track: it starts exactly where the video does, in a
    layout AAC has a configuration for.

    ffmpeg's clock puts the video's first frame at `video_start_s`; the track is moved so
    that is 0, then `aresample` pads it with silence from 0 (a track that starts late in
    the source) or trims what comes before (one that starts early), and fills gaps in
    the source's timestamps the same way, so it never drifts from the picture.
    `keep_channels`: no layout conversion (the downmix does its own).
    """
    if track.video_start_s is None:
        return None
    filters = [f"asetpts=PTS-{track.video_start_s:.6f}/TB"] if track.video_start_s else []
    filters.append("aresample=async=1:first_pts=0")
    if track.layout is not None and not keep_channels:
        filters.append(f"aformat=channel_layouts={track.layout}")
    return ",".join(filters)


def file_argument(path: Path) -> str:
    """A path ffmpeg reads as a local file: a relative `a:b.mkv` would look like a protocol."""
    return str(path) if path.is_absolute() else f"file:{path}"
