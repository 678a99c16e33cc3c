"""Pictures that a naive mirror copies wrongly, one generator per shape.

Each writes a few seconds from lavfi's moving `testsrc2` pattern with the bundled ffmpeg
and returns the SampleMedia with the MediaStreams Jellyfin would list (read from the
file as Jellyfin's ffprobe would, plus the VideoRangeType Jellyfin derives):
- odd size: 720x405 MPEG-4 part 2 (re-encoded, and H.264 takes no odd side);
- interlaced: DVD-style MPEG-2 720x576, top field first, every field a moment of motion;
- interlaced H.264 (1080i-TV style, at 720x576 to stay small), in MPEG-TS;
- HDR10 and HLG: HEVC 10-bit BT.2020, made by converting the SDR pattern (the same
  pattern rendered as SDR is the reference a tone-map is compared with);
- anamorphic: H.264 720x576 with SAR 64:45 (shown 1024x576, 16:9);
- rotated: a phone's H.264 1280x720 with a -90 degree display matrix (shown 720x1280).

Every shape carries the fidelity samples' sync mark (mirror.testing.fidelity_samples):
one uniform white frame at MARK_S over the pattern and a 1 kHz beep from MARK_S in an
otherwise silent stereo track, so lip sync is measured on the picture shapes too. The
white frame is a jump of the frame's mean brightness, which a tone-map keeps.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import imageio_ffmpeg

from mirror.demo.media import SampleMedia, describe_streams, probe_duration, run_ffmpeg
from mirror.testing.fidelity_samples import BEEP_S, MARK_S, SAMPLE_RATE

_FPS = 25
# Silence but for a 1 kHz beep from MARK_S (the sync mark's sound), on both channels.
_BEEP = (
    f"aevalsrc='if(between(t\\,{MARK_S}\\,{MARK_S + BEEP_S})\\,0.5*sin(2*PI*1000*t)\\,0)'"
    f":sample_rate={SAMPLE_RATE}:channel_layout=stereo"
)
_AUDIO = ("-c:a", "aac", "-b:a", "64k", "-ac", "2")
_MP2 = ("-c:a", "mp2", "-b:a", "192k", "-ac", "2")
_X265_LOG = "log-level=error"
# The mastering display of most HDR10 discs (P3 in BT.2020, 1000 nits) and its light levels.
_HDR10_METADATA = (
    "hdr10=1:master-display=G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)"
    "L(10000000,1):max-cll=1000,400"
)


def pattern(width: int, height: int, duration_s: float, rate: int = _FPS) -> str:
    """The moving test pattern every shape starts from (also the SDR reference)."""
    return f"testsrc2=size={width}x{height}:rate={rate}:duration={duration_s}"


def odd_size_mpeg4(
    dest: Path, *, duration_s: float = 2.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """720x405 MPEG-4 part 2 (square pixels): 16:9 at a height H.264 cannot encode."""
    picture = ["-vf", "scale=720:405,setsar=1", "-c:v", "mpeg4", "-q:v", "4"]
    return _generate(dest.with_suffix(".mp4"), pattern(720, 406, duration_s), picture, ffmpeg_path)


def interlaced_mpeg2(
    dest: Path, *, duration_s: float = 2.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """DVD-style MPEG-2 in MPEG-PS: 720x576 25i top field first, 4:3 (SAR 16:15).

    The pattern runs at 50 frames a second and each pair of frames is woven into one
    interlaced frame, so each field is its own moment: combing shows wherever it moves.
    """
    picture = [
        "-vf", "tinterlace=interleave_top,setfield=tff,setsar=16/15",
        "-c:v", "mpeg2video", "-flags", "+ilme+ildct", "-b:v", "6M", "-maxrate", "9M",
        "-bufsize", "1835k",
    ]  # fmt: skip
    return _generate(
        dest.with_suffix(".mpg"),
        pattern(720, 576, duration_s, rate=2 * _FPS),
        picture,
        ffmpeg_path,
        audio=_MP2,
        container="mpeg",
        rate=2 * _FPS,
    )


def interlaced_h264(
    dest: Path, *, duration_s: float = 2.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """Interlaced H.264 (as 1080i TV, at 720x576) in MPEG-TS: 8-bit High, copyable but
    for its fields."""
    picture = [
        "-vf", "tinterlace=interleave_top,setfield=tff",
        "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
        "-flags", "+ilme+ildct", "-x264-params", "tff=1",
    ]  # fmt: skip
    return _generate(
        dest.with_suffix(".ts"),
        pattern(720, 576, duration_s, rate=2 * _FPS),
        picture,
        ffmpeg_path,
        audio=_MP2,  # what DVB broadcasts carry
        container="mpegts",
        rate=2 * _FPS,
    )


def hdr10_hevc(
    dest: Path, *, duration_s: float = 2.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """HEVC Main 10, BT.2020 / PQ (SMPTE 2084), with HDR10 mastering metadata."""
    return _hdr(
        dest, "smpte2084", f"{_X265_LOG}:{_HDR10_METADATA}", "HDR10", duration_s, ffmpeg_path
    )


def hlg_hevc(dest: Path, *, duration_s: float = 2.0, ffmpeg_path: str | None = None) -> SampleMedia:
    """HEVC Main 10, BT.2020 / HLG (ARIB STD-B67)."""
    return _hdr(dest, "arib-std-b67", _X265_LOG, "HLG", duration_s, ffmpeg_path)


def anamorphic_h264(
    dest: Path, *, duration_s: float = 2.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """PAL widescreen: H.264 720x576 stored, SAR 64:45, shown 1024x576 (16:9)."""
    picture = ["-vf", "scale=720:576,setsar=64/45", "-c:v", "libx264", "-preset", "ultrafast"]
    return _generate(
        dest.with_suffix(".mkv"), pattern(1024, 576, duration_s), picture, ffmpeg_path,
        container="mkv",
    )  # fmt: skip


def rotated_h264(
    dest: Path, *, duration_s: float = 2.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """A phone video: H.264 1280x720 stored, display matrix -90 degrees (shown 720x1280)."""
    ffmpeg = ffmpeg_path or imageio_ffmpeg.get_ffmpeg_exe()
    dest = dest.with_suffix(".mp4")
    with tempfile.TemporaryDirectory(prefix="mirror-picture-") as scratch:
        upright = _generate(
            Path(scratch) / "landscape.mp4",
            pattern(1280, 720, duration_s),
            ["-c:v", "libx264", "-preset", "ultrafast"],
            ffmpeg,
        )
        # The rotation is container metadata: a copy with a display matrix added.
        run_ffmpeg([ffmpeg, "-nostdin", "-loglevel", "error", "-y", "-display_rotation", "-90",
                    "-i", str(upright.path), "-c", "copy", str(dest)])  # fmt: skip
    return _sample(dest, ffmpeg, container="mp4")


def _hdr(
    dest: Path,
    transfer: str,
    x265_params: str,
    range_type: str,
    duration_s: float,
    ffmpeg_path: str | None,
) -> SampleMedia:
    # The SDR pattern re-expressed in BT.2020 + PQ/HLG, SDR white at 100 nits: a correct
    # tone-map gives back about the SDR picture, a missing one a washed-out grey.
    convert = (
        "zscale=tin=bt709:min=bt709:pin=bt709:rin=tv:"
        f"t={transfer}:m=bt2020nc:p=bt2020:npl=100,format=yuv420p10le"
    )
    tags = f"colorprim=bt2020:transfer={transfer}:colormatrix=bt2020nc"
    picture = [
        "-vf", convert, "-c:v", "libx265", "-preset", "ultrafast",
        "-x265-params", f"{x265_params}:{tags}", "-tag:v", "hvc1",
    ]  # fmt: skip
    sample = _generate(
        dest.with_suffix(".mp4"), pattern(640, 360, duration_s), picture, ffmpeg_path
    )
    video, *rest = sample.streams
    return replace(sample, streams=(replace(video, video_range_type=range_type), *rest))


def _generate(
    dest: Path,
    picture: str,
    video_args: list[str],
    ffmpeg_path: str | None,
    *,
    audio: tuple[str, ...] = _AUDIO,
    container: str = "mp4",
    rate: int = _FPS,
) -> SampleMedia:
    ffmpeg = ffmpeg_path or imageio_ffmpeg.get_ffmpeg_exe()
    dest.parent.mkdir(parents=True, exist_ok=True)
    # The white frame: every frame of `picture` within the one output frame at MARK_S
    # (both fields of an interlaced one, woven from two frames at twice the rate).
    first, last = round(MARK_S * rate), round(MARK_S * rate) + rate // _FPS - 1
    flash = f"drawbox=color=white:thickness=fill:enable='between(n\\,{first}\\,{last})'"
    run_ffmpeg([
        ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
        "-f", "lavfi", "-i", f"{picture},{flash}", "-f", "lavfi", "-i", _BEEP,
        "-map", "0:v", "-map", "1:a", "-shortest", *video_args, "-g", str(_FPS), *audio,
        "-metadata:s:a:0", "language=eng", str(dest),
    ])  # fmt: skip
    return _sample(dest, ffmpeg, container=container)


def _sample(path: Path, ffmpeg: str, *, container: str) -> SampleMedia:
    """`path` with the streams Jellyfin's ffprobe scan would list for it."""
    streams = tuple(stream.to_media_stream() for stream in describe_streams(path, ffmpeg))
    return SampleMedia(
        path=path,
        streams=tuple(replace(s, is_default=s.is_default or s.type == "Video") for s in streams),
        duration_s=probe_duration(path, ffmpeg) or 0.0,
        container=container,
        size=path.stat().st_size,
    )
