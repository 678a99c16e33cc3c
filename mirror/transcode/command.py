"""The ffmpeg command line for a plan: one input, every output, one run.

One run decodes the source once however many tracks it has. The global options make
ffmpeg scriptable: no stdin, machine-readable progress on stdout, and only errors on
stderr (which then carries the reason when the run fails).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ffmpeg

from mirror.transcode.plan import AudioOutput, TranscodePlan, VideoOutput

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
_FRAGMENTED_OUTPUT_OPTIONS: dict[str, Any] = {
    **_COMMON_OUTPUT_OPTIONS,
    "movflags": "+frag_keyframe+empty_moov+default_base_moof",
}
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
    source = ffmpeg.input("pipe:0" if from_stdin else file_argument(plan.source))
    fragmented = plan.fragmented
    outputs = [_video_output(source, plan.video, fragmented)]
    outputs += [_audio_output(source, track, fragmented) for track in plan.audio]
    # Text subtitles of the file become WebVTT in the same run (sidecars come from Jellyfin).
    outputs += [
        ffmpeg.output(source[sub.specifier], file_argument(sub.path), format="webvtt")
        for sub in plan.subtitles
        if sub.specifier is not None
    ]
    graph = ffmpeg.merge_outputs(*outputs)
    command: list[str] = ffmpeg.compile(graph, cmd=[ffmpeg_path, *GLOBAL_OPTIONS])
    return command


def _output_options(fragmented: bool) -> dict[str, Any]:
    return dict(_FRAGMENTED_OUTPUT_OPTIONS if fragmented else _COMMON_OUTPUT_OPTIONS)


def _video_output(source: Any, video: VideoOutput, fragmented: bool) -> Any:
    # `source["v:0"]` makes ffmpeg-python emit `-map 0:v:0`: the planned stream by its
    # position among the file's video streams, which no sidecar numbering can shift.
    options: dict[str, Any] = {**_output_options(fragmented), "c:v": video.codec}
    if video.codec != "copy":
        # yuv420p: 10-bit or 4:4:4 sources would otherwise give H.264 that browsers refuse.
        options.update({"preset": video.preset, "crf": video.crf, "pix_fmt": "yuv420p"})
        # The filters leave BT.709 (converted or tone-mapped) and tag the frames so.
        if video.filters:
            options["vf"] = ",".join(video.filters)
        if fragmented:
            options["force_key_frames"] = f"expr:gte(t,n_forced*{FRAGMENT_S})"
    if fragmented:
        options["min_frag_duration"] = _MIN_VIDEO_FRAGMENT_US
    return ffmpeg.output(source[video.specifier], file_argument(video.path), **options)


def _audio_output(source: Any, track: AudioOutput, fragmented: bool) -> Any:
    options: dict[str, Any] = {**_output_options(fragmented), "c:a": track.codec}
    if fragmented:
        options["frag_duration"] = _AUDIO_FRAGMENT_US
    if track.codec != "copy":
        options["b:a"] = track.bitrate
    if track.channels is not None:
        options["ac"] = track.channels  # fold 7.1 down to 5.1; never set to upmix
    # ffmpeg-python takes options as a dict, so one key cannot repeat: the language goes
    # through the `s:a:0` specifier and the title through `s:a`, both naming the output's
    # only stream.
    if track.language:
        options["metadata:s:a:0"] = f"language={track.language}"
    if track.title:
        options["metadata:s:a"] = f"title={track.title}"
    return ffmpeg.output(source[track.specifier], file_argument(track.path), **options)


def file_argument(path: Path) -> str:
    """A path ffmpeg reads as a local file: a relative `a:b.mkv` would look like a protocol."""
    return str(path) if path.is_absolute() else f"file:{path}"
