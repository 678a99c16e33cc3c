"""Which files one ffmpeg run writes for an item, and how: pure planning, no I/O.

The first real video stream of the file (never cover art) becomes `video.mp4`, every
audio stream of the file becomes `audio/<index>-<lang>.m4a`, `<index>` being the
stream's index in the file (see `streams`); sidecars, subtitles, cover art and data are
skipped with a reason. Streams are copied when that gives a file every player plays:
H.264 only when 8-bit 4:2:0 with a profile up to High, progressive and SDR, audio only
when AAC that starts with the video. A copy turns an hour of encoding into a minute of
remuxing; anything else is re-encoded, with the filters that make its picture look right
(mirror.transcode.picture).

Each output is a file of its own that players line up by its timestamps alone, so every
audio output starts where the video does (see `AudioOutput.video_start_s`).

MIRROR_RENDITIONS beyond `source` (mirror.domain.renditions) make the video a ladder:
`video/source.mp4` as above, plus one re-encode per lower rung, `video/<name>.mp4`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from mirror.domain.errors import PermanentError
from mirror.domain.item import MediaItem, MediaStream
from mirror.domain.naming import (
    AUDIO_DIR,
    SUBTITLE_DIR,
    VIDEO_FILE_NAME,
    audio_file_name,
    rendition_path,
    stereo_file_name,
    subtitle_file_name,
)
from mirror.domain.renditions import DEFAULT_RENDITIONS, SOURCE, is_ladder, rungs_below
from mirror.transcode.encoders import VideoEncoder
from mirror.transcode.outputs import (
    AudioOutput,
    OutputFormat,
    StereoDownmix,
    SubtitleOutput,
    TranscodePlan,
    VideoOutput,
)
from mirror.transcode.picture import dolby_vision_without_fallback, shows_as_is, video_filters
from mirror.transcode.probe import ProbedFile
from mirror.transcode.streams import FileStream, select_streams
from mirror.transcode.thumbnails import plan_thumbnails

# What MIRROR_VIDEO_CODEC and MIRROR_AUDIO_CODEC may say (MIRROR_OUTPUT_FORMAT's: outputs): the
# settings validate them once, with these types; the planner takes them as given.
VideoCodecSetting = Literal["auto", "copy", "libx264"]
AudioCodecSetting = Literal["auto", "copy", "aac"]

# Jellyfin spells codecs the way ffprobe does; "avc" shows up from some older probes.
_H264_NAMES = frozenset({"h264", "avc", "avc1"})
_AAC_NAMES = frozenset({"aac"})
# What every browser and TV decodes: 8-bit 4:2:0 (yuvj420p is its full-range twin).
_PLAYABLE_PIXEL_FORMATS = frozenset({"yuv420p", "yuvj420p"})
_PLAYABLE_H264_PROFILES = frozenset({"baseline", "constrained baseline", "main", "high"})
# AAC in MP4 plays everywhere up to 5.1; more channels are folded down, never up.
MAX_AUDIO_CHANNELS = 6
# The layouts of AAC's channel configurations 1-6 (ISO 14496-3 table 1.19), as ffmpeg
# names them. Browsers' decoders take only these: given another layout of the same count
# (AC-3 and DTS decode to `5.1(side)`) ffmpeg's encoder writes configuration 0 with a
# program config element instead, and MSE players refuse the track.
AAC_LAYOUTS = {1: "mono", 2: "stereo", 3: "3.0", 4: "4.0", 5: "5.0", 6: "5.1"}
# A copied track keeps its own first timestamp, and its file starts there: one that starts
# further than this from the video plays that much early or late in every player, so it
# is re-encoded (audio encoding is cheap) and padded with silence to start with the video.
# Less than half an AAC frame; muxers round starts to the millisecond.
MAX_COPY_START_GAP_S = 0.010
# AAC is copied only up to stereo. Above, its channel configuration may be 0 with a
# program config element (some encoders write 5.1 so), which browsers refuse and
# verification then fails for good; neither `ffmpeg -i` nor Jellyfin tells the two
# apart, so multichannel AAC is re-encoded into configuration 6 (audio encoding is cheap).
MAX_COPIED_AAC_CHANNELS = 2
# Where the stereo tracks' downmixes go (under the output dir, never uploaded).
_DOWNMIX_DIR = "downmix"


def plan_transcode(
    item: MediaItem,
    work_dir: Path,
    source: Path,
    *,
    video_codec: VideoCodecSetting = "auto",
    audio_codec: AudioCodecSetting = "auto",
    x264_preset: str = "veryfast",
    x264_crf: int = 23,
    audio_bitrate: str = "160k",
    probe: ProbedFile | None = None,
    output_format: OutputFormat = "mp4",
    stereo_loudness: float | None = None,
    video_encoder: VideoEncoder = "libx264",
    encoder_device: str | None = None,
    thumbnail_interval_s: float | None = None,
    renditions: Sequence[str] = DEFAULT_RENDITIONS,
) -> TranscodePlan:
    """Plan the outputs of `item` under `work_dir`; an item without video is permanent.

    `probe` is the downloaded file as ffmpeg reads it: with it the streams are mapped
    from the file and checked against Jellyfin's list (see `select_streams`); without it
    (before the download) from Jellyfin's list alone. `renditions` (MIRROR_RENDITIONS,
    checked) adds a re-encode per rung smaller than the source. `stereo_loudness` (LUFS;
    None: no stereo tracks) adds a stereo track beside each multichannel one
    (`with_stereo_tracks`). `video_encoder` (on `encoder_device`) re-encodes the video
    and the rungs. `thumbnail_interval_s`: also thumbnail sheets, one thumbnail per that
    many seconds (None: none).
    """
    selection = select_streams(item, probe, subtitles=output_format == "hls")
    ladder = is_ladder(renditions)
    video = _plan_video(
        selection.video,
        work_dir,
        video_codec,
        preset=x264_preset,
        crf=x264_crf,
        rendition=SOURCE if ladder else None,
    )
    if video.codec != "copy":
        video = replace(video, codec=video_encoder, device=encoder_device)
    if video.codec != "copy" and dolby_vision_without_fallback(selection.video):
        raise PermanentError(
            f"item {item.id} ({item.name}) is Dolby Vision profile 5, which has no HDR10 or "
            "SDR picture to fall back on: tone-mapping it needs libplacebo with a Vulkan "
            "device, which mirror's ffmpeg has not (MIRROR_VIDEO_CODEC=copy keeps it as is)"
        )
    audio = tuple(
        _plan_audio(
            stream,
            work_dir,
            audio_codec,
            bitrate=audio_bitrate,
            video_start_s=selection.video.start_s or 0.0,
        )
        for stream in selection.audio
    )
    if stereo_loudness is not None:
        channels = [stream.channels for stream in selection.audio]
        video_start_s = selection.video.start_s or 0.0
        audio = with_stereo_tracks(
            audio, channels, work_dir, stereo_loudness, audio_bitrate, video_start_s
        )
    duration_s = probe.duration_s if probe and probe.duration_s else item.duration_s
    rungs = (
        _plan_ladder(selection.video, work_dir, renditions, x264_preset, x264_crf)
        if ladder and not dolby_vision_without_fallback(selection.video)
        else ()
    )
    rungs = tuple(replace(rung, codec=video_encoder, device=encoder_device) for rung in rungs)
    return TranscodePlan(
        source=source,
        output_dir=work_dir,
        video=video,
        audio=audio,
        duration_s=duration_s,
        frames_total=count_frames(duration_s, selection.video.frame_rate),
        skipped=selection.skipped,
        output_format=output_format,
        subtitles=tuple(
            [_plan_subtitle(s, work_dir, s.specifier, False) for s in selection.subtitles]
            + [_plan_subtitle(s, work_dir, None, True) for s in selection.sidecar_subtitles]
        ),
        thumbnails=None
        if thumbnail_interval_s is None
        else plan_thumbnails(
            selection.video,
            work_dir,
            thumbnail_interval_s,
            # Keyframes only when nothing decodes the video anyway: a re-encoded rung
            # shares the decoder, which must then hand over every frame.
            copy=video.codec == "copy" and not rungs,
            duration_s=duration_s,
        ),
        ladder=rungs,
    )


def count_frames(duration_s: float | None, frame_rate: float | None) -> int | None:
    """Expected number of video frames, when both facts are known and positive."""
    if not duration_s or not frame_rate or duration_s <= 0 or frame_rate <= 0:
        return None
    return max(1, round(duration_s * frame_rate))


def plays_everywhere(stream: FileStream) -> bool:
    """H.264 that every browser and TV decodes and shows right: 8-bit 4:2:0, profile up
    to High, progressive and SDR.

    Unknown facts do not block a copy (Jellyfin and the probe both give them for real
    files); a known 10-bit, 4:2:2 / 4:4:4 or High 10+ stream is re-encoded. So is
    interlaced H.264 (1080i TV): browsers do not deinterlace, a copy would comb on every
    frame of motion. And HDR-tagged H.264: players expect HDR in HLS as HEVC or Dolby
    Vision (Apple's HLS authoring spec), not H.264, so it is tone-mapped to SDR.
    """
    if not _is(stream.codec, _H264_NAMES) or not shows_as_is(stream):
        return False
    if stream.pixel_format is not None and stream.pixel_format not in _PLAYABLE_PIXEL_FORMATS:
        return False
    if stream.bit_depth is not None and stream.bit_depth != 8:
        return False
    return stream.profile is None or stream.profile.lower() in _PLAYABLE_H264_PROFILES


def _plan_video(
    stream: FileStream,
    work_dir: Path,
    setting: str,
    *,
    preset: str,
    crf: int,
    rendition: str | None = None,
) -> VideoOutput:
    copy = setting == "copy" or (setting == "auto" and plays_everywhere(stream))
    relative_path = VIDEO_FILE_NAME if rendition is None else rendition_path(rendition)
    return VideoOutput(
        path=work_dir / relative_path,
        relative_path=relative_path,
        stream_index=stream.index,
        specifier=stream.specifier,
        codec="copy" if copy else "libx264",
        source_codec=stream.codec,
        preset=None if copy else preset,
        crf=None if copy else crf,
        filters=() if copy else video_filters(stream),
        frame_rate=stream.frame_rate,
        start_s=stream.start_s or 0.0,
        rendition=rendition,
    )


def _plan_ladder(
    stream: FileStream, work_dir: Path, renditions: Sequence[str], preset: str, crf: int
) -> tuple[VideoOutput, ...]:
    """One x264 re-encode per rung below the source's height, with the source's picture
    fixes (a copied source needs none, its rungs still get square pixels and BT.709).
    Dolby Vision 5 has no picture to scale without libplacebo: it gets no rungs."""
    return tuple(
        VideoOutput(
            path=work_dir / rendition_path(rung.name),
            relative_path=rendition_path(rung.name),
            stream_index=stream.index,
            specifier=stream.specifier,
            codec="libx264",
            source_codec=stream.codec,
            preset=preset,
            crf=crf,
            filters=video_filters(stream),
            frame_rate=stream.frame_rate,
            start_s=stream.start_s or 0.0,
            rendition=rung.name,
            scale_height=rung.height,
            maxrate_kbps=rung.maxrate_kbps,
        )
        for rung in rungs_below(renditions, stream.height)
    )


def _plan_audio(
    stream: FileStream, work_dir: Path, setting: str, *, bitrate: str, video_start_s: float
) -> AudioOutput:
    copy = setting == "copy" or (
        setting == "auto"
        and _is(stream.codec, _AAC_NAMES)
        and _starts_with(stream, video_start_s)
        and (stream.channels or 0) <= MAX_COPIED_AAC_CHANNELS
    )
    too_many = stream.channels is not None and stream.channels > MAX_AUDIO_CHANNELS
    channels = min(stream.channels, MAX_AUDIO_CHANNELS) if stream.channels else None
    file_name = audio_file_name(stream.index, stream.language)
    relative_path = f"{AUDIO_DIR}/{file_name}"
    return AudioOutput(
        path=work_dir / AUDIO_DIR / file_name,
        relative_path=relative_path,
        stream_index=stream.index,
        specifier=stream.specifier,
        codec="copy" if copy else "aac",
        source_codec=stream.codec,
        language=stream.language,
        title=stream.title,
        bitrate=None if copy else bitrate,
        channels=MAX_AUDIO_CHANNELS if too_many and not copy else None,
        is_default=stream.is_default,
        layout=AAC_LAYOUTS.get(channels or 0) if not copy else None,
        video_start_s=None if copy else video_start_s,
    )


def with_stereo_tracks(
    audio: tuple[AudioOutput, ...],
    channels: Sequence[int | None],
    work_dir: Path,
    loudness_lufs: float,
    bitrate: str,
    video_start_s: float = 0.0,
) -> tuple[AudioOutput, ...]:
    """Each track of more than two `channels` (the source's, None: unknown) followed by a
    stereo track made from it, starting where the video does (`video_start_s` on
    ffmpeg's clock), even beside a copied track.

    Every multichannel track gets one, not just the first: a viewer on a phone or a TV
    without a surround receiver needs their language, or the commentary, in stereo too.
    The stereo track of the track players start with (Jellyfin's default, else the first)
    becomes the default instead (HLS: DEFAULT=YES), since every client plays stereo and
    not all play 5.1; players that do can still pick the original by its CHANNELS.
    """
    lead = next((track for track in audio if track.is_default), audio[0] if audio else None)
    result: list[AudioOutput] = []
    for track, count in zip(audio, channels, strict=True):
        if (count or 0) <= 2:
            result.append(track)
            continue
        file_name = stereo_file_name(track.stream_index, track.language)
        stereo = replace(
            track,
            path=work_dir / AUDIO_DIR / file_name,
            relative_path=f"{AUDIO_DIR}/{file_name}",
            codec="aac",
            title=f"{track.title or track.language or f'Track {track.stream_index}'} (stereo)",
            bitrate=bitrate,
            channels=None,
            is_default=track is lead,
            layout="stereo",
            video_start_s=video_start_s,
            downmix=StereoDownmix(
                intermediate=work_dir / _DOWNMIX_DIR / f"{track.stream_index}.flac",
                loudness_lufs=loudness_lufs,
            ),
        )
        result += [replace(track, is_default=False) if track is lead else track, stereo]
    return tuple(result)


def _starts_with(stream: FileStream, video_start_s: float) -> bool:
    """Whether `stream` starts with the video (an unknown start is taken to)."""
    start = stream.start_s
    return start is None or abs(start - video_start_s) <= MAX_COPY_START_GAP_S


def _plan_subtitle(
    stream: FileStream | MediaStream, work_dir: Path, specifier: str | None, external: bool
) -> SubtitleOutput:
    file_name = subtitle_file_name(stream.index, stream.language)
    return SubtitleOutput(
        path=work_dir / SUBTITLE_DIR / file_name,
        relative_path=f"{SUBTITLE_DIR}/{file_name}",
        stream_index=stream.index,
        specifier=specifier,
        source_codec=stream.codec,
        language=stream.language,
        title=stream.title,
        forced=stream.is_forced,
        default=stream.is_default,
        external=external,
    )


def _is(codec: str | None, names: frozenset[str]) -> bool:
    return codec is not None and codec.lower() in names
