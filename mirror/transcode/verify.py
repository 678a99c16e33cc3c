"""Read every output back before anything is uploaded: no bad output is ever marked done.

ffmpeg exiting 0 says little about what it wrote: a wrong `-map` gives a `video.mp4`
holding an audio track, an audio track that ends early gives a short `.m4a`. Each
output is probed (`ffmpeg -i`, headers only, all outputs in one run) and must hold
exactly one stream of the right kind and planned codec, and last as long as the source
within max(1 s, 1 %); AAC with more than two channels must name a standard channel
configuration (browsers refuse the program config element ffmpeg writes otherwise).
A mismatch is permanent (the same file gives the same outputs) and names the output
and what is wrong. The facts read here go on the job row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirror.domain.errors import PermanentError
from mirror.transcode.audio_config import audio_config, read_moov
from mirror.transcode.outputs import AudioOutput, TranscodePlan, VideoOutput
from mirror.transcode.picture import VideoRange, display_size, range_of_transfer
from mirror.transcode.picture_listing import NO_PICTURE_FACTS, Picture
from mirror.transcode.probe import ProbedFile, probe_own_outputs

_SAME_CODEC = {"avc": "h264", "avc1": "h264"}


@dataclass(frozen=True, slots=True)
class VerifiedOutput:
    """What one output holds, as read back from the file."""

    relative_path: str
    codec: str
    duration_s: float | None
    width: int | None = None
    height: int | None = None
    picture: Picture = NO_PICTURE_FACTS  # pixel shape, rotation and colour, as tagged
    rendition: str | None = None  # the video's MIRROR_RENDITIONS name, in a ladder

    @property
    def display_size(self) -> tuple[int | None, int | None]:
        """What a player shows: a copy keeps its SAR and rotation (a re-encode has none)."""
        if self.width is None or self.height is None:
            return self.width, self.height
        return display_size(self.width, self.height, self.picture.sar, self.picture.rotation)

    @property
    def video_range(self) -> VideoRange:
        """SDR, or the HDR (PQ, HLG) a copied video is tagged with."""
        return range_of_transfer(self.picture.transfer)

    def video_json(self, key: str) -> dict[str, Any]:
        """The job row's `video` facts (size and sha256 are added by the upload); a
        rendition of a ladder also says its name."""
        facts: dict[str, Any] = {
            "key": key,
            "codec": self.codec,
            "width": self.width,
            "height": self.height,
            "duration_s": self.duration_s,
        }
        if self.rendition is not None:
            facts["rendition"] = self.rendition
        return facts


@dataclass(frozen=True, slots=True)
class VerifiedOutputs:
    video: VerifiedOutput
    audio: tuple[VerifiedOutput, ...]  # in the plan's order
    ladder: tuple[VerifiedOutput, ...] = ()  # the lower renditions, in the plan's order

    @property
    def videos(self) -> tuple[VerifiedOutput, ...]:
        return (self.video, *self.ladder)


def verify_outputs(plan: TranscodePlan, ffmpeg_path: str) -> VerifiedOutputs:
    """Probe and check every output of `plan`; PermanentError on the first mismatch."""
    for subtitle in plan.subtitles:
        check_subtitle(subtitle.path, subtitle.relative_path)
    probed = probe_own_outputs([output.path for output in plan.outputs], ffmpeg_path)
    checked = [
        check_output(output, found, plan.duration_s)
        for output, found in zip(plan.outputs, probed, strict=True)
    ]
    videos = len(plan.videos)
    for track, found in zip(plan.audio, probed[videos:], strict=True):
        check_aac_configuration(track, found.streams[0].channels)
    return VerifiedOutputs(
        video=checked[0], audio=tuple(checked[videos:]), ladder=tuple(checked[1:videos])
    )


def check_aac_configuration(track: AudioOutput, channels: int | None) -> None:
    """An AAC track of more than two channels must carry a standard channel configuration
    in its AudioSpecificConfig: with configuration 0 (the layout in a program config
    element) hls.js, Shaka and video.js all stop on an audio SourceBuffer error."""
    if channels is not None and channels <= 2:
        return
    try:
        config = audio_config(read_moov(track.path))
    except (OSError, PermanentError) as exc:
        raise PermanentError(f"verify: {track.relative_path} has no readable moov ({exc})") from exc
    if config is not None and config.channel_configuration == 0:
        raise PermanentError(
            f"verify: {track.relative_path} holds {channels or 'multi'}-channel AAC without a "
            "standard channel configuration (0, a program config element): browsers refuse it"
        )


def check_subtitle(path: Path, relative_path: str) -> None:
    """A WebVTT output must at least say so: `WEBVTT` first (after an optional BOM)."""
    try:
        head = path.read_bytes()[:16]
    except OSError as exc:
        raise PermanentError(f"verify: {relative_path} was not written ({exc.strerror})") from exc
    if not head.removeprefix(b"\xef\xbb\xbf").startswith(b"WEBVTT"):
        raise PermanentError(f"verify: {relative_path} is not WebVTT (starts {head[:8]!r})")


def duration_tolerance(source_s: float) -> float:
    """How far an output's duration may be from the source's: max(1 s, 1 %)."""
    return max(1.0, source_s * 0.01)


def check_output(
    output: VideoOutput | AudioOutput, probed: ProbedFile, source_duration_s: float | None
) -> VerifiedOutput:
    """The facts of one output, or PermanentError naming it and what is wrong."""
    name = output.relative_path
    kind = "Video" if isinstance(output, VideoOutput) else "Audio"
    streams = probed.streams
    if len(streams) != 1 or streams[0].type != kind or streams[0].attached_pic:
        held = ", ".join(_describe(s.type, s.codec, s.attached_pic) for s in streams) or "nothing"
        raise PermanentError(
            f"verify: {name} must hold exactly one {kind.lower()} stream, it holds {held}"
        )
    (stream,) = streams
    expected = output.expected_codec
    if expected is not None and _codec(stream.codec) != _codec(expected):
        raise PermanentError(
            f"verify: {name} holds {stream.codec} {kind.lower()}, the plan says {expected}"
        )
    duration = probed.duration_s
    if source_duration_s is not None:
        if duration is None:
            raise PermanentError(
                f"verify: {name} has no duration (the source lasts {source_duration_s:.2f}s)"
            )
        allowed = duration_tolerance(source_duration_s)
        if abs(duration - source_duration_s) > allowed:
            raise PermanentError(
                f"verify: {name} lasts {duration:.2f}s, the source {source_duration_s:.2f}s "
                f"(more than {allowed:.2f}s apart)"
            )
    if isinstance(output, VideoOutput) and output.codec != "copy":
        _check_bt709(name, stream.picture)
    if isinstance(output, VideoOutput) and output.scale_height not in (None, stream.height):
        raise PermanentError(
            f"verify: {name} is {stream.height} lines high, the rendition {output.rendition} "
            f"must be {output.scale_height}"
        )
    return VerifiedOutput(
        relative_path=name,
        codec=stream.codec,
        duration_s=duration,
        width=stream.width,
        height=stream.height,
        picture=stream.picture,
        rendition=output.rendition if isinstance(output, VideoOutput) else None,
    )


def _check_bt709(name: str, picture: Picture) -> None:
    """A re-encode is SDR BT.709 (mirror.transcode.picture): other tags would make
    players show it with the wrong colours (BT.2020/PQ left on it: washed out)."""
    tags = (picture.matrix, picture.primaries, picture.transfer)
    if any(tag not in (None, "bt709") for tag in tags):
        shown = "/".join(tag or "unknown" for tag in tags)
        raise PermanentError(f"verify: {name} is tagged {shown}, a re-encode must be bt709")


def _codec(name: str) -> str:
    lowered = name.lower()
    return _SAME_CODEC.get(lowered, lowered)


def _describe(kind: str, codec: str, attached_pic: bool) -> str:
    return f"cover art ({codec})" if attached_pic else f"{kind.lower()} ({codec})"
