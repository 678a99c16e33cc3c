"""Samples whose timing and channels can be measured in what mirror makes of them.

Each shape carries a sync mark: the picture is black except ONE white frame at exactly
MARK_S, and the sound is silent except a 1 kHz beep that starts at exactly MARK_S (to
the sample). Reading both back from the mirrored files tells how far the mirror moved
audio against video (tests/fidelity/av_sync.py), whatever a file's own start is.
Each shape is the smallest file that shows one way a copy goes out of sync or out of
spec: B-frames (a reorder delay), AC-3 5.1 (a layout AAC has no configuration for),
audio that starts after the video, 7.1 (folded to 5.1), 5.1 AAC that names no channel
configuration (0 + a program config element, which browsers refuse), and H.264 + AAC in
MPEG-TS (ADTS frames, which MP4 cannot hold as they are). Generated with the bundled
ffmpeg from lavfi sources in a second or two; MKV, as Jellyfin libraries mostly hold.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import imageio_ffmpeg

from mirror.demo.media import SampleMedia, probe_duration, run_ffmpeg
from mirror.domain.item import MediaStream

MARK_S = 1.0  # the white frame and the start of the beep, in the source's time
BEEP_S = 0.1
FPS = 24  # film's rate: the mark falls on frame 24 exactly
WIDTH, HEIGHT = 320, 240
SAMPLE_RATE = 48000
LANGUAGE = "eng"

# libx264's defaults as most H.264 files have them: B-frames with a pyramid, so the first
# frame is presented two frames after it is decoded.
_H264_WITH_B_FRAMES = (
    "-c:v", "libx264", "-preset", "veryfast", "-bf", "3", "-g", str(2 * FPS),
    "-pix_fmt", "yuv420p", "-profile:v", "high",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Audio:
    codec: str  # as Jellyfin spells it
    channels: int
    args: tuple[str, ...]
    delay_s: float = 0.0  # how long after the video the track starts
    layout: str | None = None  # the source's channel layout, if not the count's usual one


def h264_b_frames_aac(
    dest: Path, *, duration_s: float = 3.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """(a) H.264 with B-frames + stereo AAC: both copied, the common case of lip sync."""
    audio = _Audio("aac", 2, ("-c:a", "aac", "-b:a", "96k"))
    return _generate(dest, audio, duration_s, ffmpeg_path)


def h264_b_frames_ac3_51(
    dest: Path, *, duration_s: float = 3.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """(b) H.264 with B-frames + AC-3 5.1: AC-3 decodes to `5.1(side)`, re-encoded to AAC."""
    audio = _Audio("ac3", 6, ("-c:a", "ac3", "-b:a", "384k"))
    return _generate(dest, audio, duration_s, ffmpeg_path)


def delayed_audio(
    dest: Path, *, delay_s: float = 0.48, duration_s: float = 3.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """(c) stereo AAC that starts `delay_s` after the video (the track's first timestamp
    is `delay_s`, as muxers write a late-starting track), the mark still at MARK_S."""
    audio = _Audio("aac", 2, ("-c:a", "aac", "-b:a", "96k"), delay_s=delay_s)
    return _generate(dest, audio, duration_s, ffmpeg_path)


def surround_71(
    dest: Path, *, duration_s: float = 3.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """(d) 7.1 PCM (8 channels, as Blu-ray remuxes carry it): folded to 5.1 AAC."""
    audio = _Audio("pcm_s16le", 8, ("-c:a", "pcm_s16le"))
    return _generate(dest, audio, duration_s, ffmpeg_path)


def aac_51_configuration_0(
    dest: Path, *, duration_s: float = 3.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """(e) 5.1 AAC in the `5.1(side)` layout: ffmpeg's encoder (as others) writes it with
    channel configuration 0 and a program config element; `ffmpeg -i` shows plain 5.1."""
    audio = _Audio("aac", 6, ("-c:a", "aac", "-b:a", "256k"), layout="5.1(side)")
    return _generate(dest, audio, duration_s, ffmpeg_path)


def mpegts_h264_aac(
    dest: Path, *, duration_s: float = 3.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """(f) (a) remuxed into MPEG-TS, as TV recordings hold it: AAC in ADTS frames that
    starts with the video (within MAX_COPY_START_GAP_S), so `auto` copies it."""
    ffmpeg = ffmpeg_path or imageio_ffmpeg.get_ffmpeg_exe()
    mkv = h264_b_frames_aac(dest.with_name(f"{dest.stem}-remuxed"), duration_s=duration_s,
                            ffmpeg_path=ffmpeg)  # fmt: skip
    dest = dest.with_suffix(".ts")
    # The MPEG-TS muxer keeps the AAC encoder's priming (1024 samples) ahead of the video;
    # a broadcast's audio starts with its picture, so the track is moved by as much.
    priming_s = f"{1024 / SAMPLE_RATE:.6f}"
    run_ffmpeg([ffmpeg, "-nostdin", "-loglevel", "error", "-y", "-i", str(mkv.path),
                "-itsoffset", priming_s, "-i", str(mkv.path), "-map", "0:v", "-map", "1:a",
                "-c", "copy", "-f", "mpegts", str(dest)])  # fmt: skip
    duration = probe_duration(dest, ffmpeg) or mkv.duration_s
    return replace(
        mkv, path=dest, duration_s=duration, container="mpegts", size=dest.stat().st_size
    )


def _generate(dest: Path, audio: _Audio, duration_s: float, ffmpeg_path: str | None) -> SampleMedia:
    ffmpeg = ffmpeg_path or imageio_ffmpeg.get_ffmpeg_exe()
    dest = dest.with_suffix(".mkv")
    dest.parent.mkdir(parents=True, exist_ok=True)
    flash = f"eq(n\\,{round(MARK_S * FPS)})"
    picture = (
        f"color=c=black:size={WIDTH}x{HEIGHT}:rate={FPS}:duration={duration_s},"
        f"drawbox=color=white:thickness=fill:enable='{flash}'"
    )
    # The beep's times are the track's own: it starts `delay_s` into the file.
    start, end = MARK_S - audio.delay_s, MARK_S - audio.delay_s + BEEP_S
    sound = (
        f"aevalsrc='if(between(t\\,{start}\\,{end})\\,0.5*sin(2*PI*1000*t)\\,0)'"
        f":sample_rate={SAMPLE_RATE}:duration={duration_s - audio.delay_s}"
        f":channel_layout={audio.layout or _LAYOUTS[audio.channels]}"
    )
    argv = [ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-y"]
    argv += ["-f", "lavfi", "-i", picture]
    argv += ["-itsoffset", str(audio.delay_s)] if audio.delay_s else []
    argv += ["-f", "lavfi", "-i", sound, "-map", "0:v", "-map", "1:a"]
    argv += [*_H264_WITH_B_FRAMES, *audio.args, "-metadata:s:a:0", f"language={LANGUAGE}"]
    run_ffmpeg([*argv, str(dest)])
    return SampleMedia(
        path=dest,
        streams=_jellyfin_streams(audio),
        duration_s=probe_duration(dest, ffmpeg) or duration_s,
        container="mkv",
        size=dest.stat().st_size,
    )


# aevalsrc repeats its expression on every channel of the layout: the beep is everywhere.
_LAYOUTS = {2: "stereo", 6: "5.1", 8: "7.1"}


def _jellyfin_streams(audio: _Audio) -> tuple[MediaStream, ...]:
    return (
        MediaStream(
            index=0, type="Video", codec="h264", width=WIDTH, height=HEIGHT,
            frame_rate=float(FPS), is_default=True, pixel_format="yuv420p",
            profile="High", bit_depth=8,
        ),
        MediaStream(
            index=1, type="Audio", codec=audio.codec, language=LANGUAGE,
            channels=audio.channels, is_default=True,
        ),
    )  # fmt: skip
