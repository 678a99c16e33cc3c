"""Short sample media made with ffmpeg, and a way to read back what a file holds.

Used by the tests and by `mirror demo`: each sample is an MKV shaped like a real
library file (one video stream, two audio tracks in different languages, one with a
non-ASCII title, and a subtitle), generated in well under a second from lavfi sources.
`describe_streams` reads a file's streams back with the production probe (`ffmpeg -i`).
"""

from __future__ import annotations

import random
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import imageio_ffmpeg

from mirror.domain.item import MediaItem, MediaStream
from mirror.transcode.probe import (
    ProbedStream,
    ffmpeg_listing,
    parse_duration,
    parse_stream_listing,
)

SampleKind = Literal["h264_aac", "mpeg4_mp3"]


@dataclass(frozen=True)
class SampleMedia:
    """A generated file and its streams exactly as Jellyfin would report them."""

    path: Path
    streams: tuple[MediaStream, ...]
    duration_s: float
    container: str
    size: int

    def to_item(self, item_id: str, name: str = "Mirror Sample", type: str = "Movie") -> MediaItem:
        """The MediaItem Jellyfin would describe this file as."""
        return MediaItem(
            id=item_id,
            name=name,
            type=type,
            container=self.container,
            size=self.size,
            duration_s=self.duration_s,
            streams=self.streams,
        )


@dataclass(frozen=True)
class _Track:
    language: str
    title: str
    channels: int
    frequency: int


@dataclass(frozen=True)
class _Recipe:
    video_codec: str  # as Jellyfin spells it
    video_profile: str  # as ffprobe (and so Jellyfin) names the encoder's profile
    video_args: tuple[str, ...]
    audio_codec: str
    audio_args: tuple[str, ...]
    tracks: tuple[_Track, _Track]


# Titles and subtitles are non-ASCII on purpose (\u2013 is an en dash).
# Both encoders exist in imageio-ffmpeg's build (libmp3lame included); a system ffmpeg
# without libmp3lame fails the mpeg4_mp3 sample with ffmpeg's own "Unknown encoder".
_RECIPES: dict[str, _Recipe] = {
    "h264_aac": _Recipe(
        video_codec="h264",
        video_profile="Constrained Baseline",  # x264's ultrafast preset
        video_args=("-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"),
        audio_codec="aac",
        audio_args=("-c:a", "aac", "-b:a", "96k"),
        tracks=(
            _Track("eng", "English Stereo", 2, 440),
            _Track("fra", "Français \u2013 commentaire", 1, 660),
        ),
    ),
    "mpeg4_mp3": _Recipe(
        video_codec="mpeg4",
        video_profile="Simple Profile",
        video_args=("-c:v", "mpeg4", "-q:v", "5", "-pix_fmt", "yuv420p"),
        audio_codec="mp3",
        audio_args=("-c:a", "libmp3lame", "-b:a", "96k"),
        tracks=(
            _Track("eng", "English Stereo", 2, 440),
            _Track("jpn", "日本語 \u2013 解説", 1, 550),
        ),
    ),
}

_SUBTITLE_LANGUAGE = "eng"
_SUBTITLE_TITLE = "English"


def _picture(width: int, height: int, fps: int, duration_s: float, noise: bool) -> str:
    source = f"testsrc=size={width}x{height}:rate={fps}:duration={duration_s}"
    return source + (",noise=alls=80:allf=t+u" if noise else "")


def generate_sample(
    dest: Path,
    kind: SampleKind,
    *,
    duration_s: float = 4.0,
    width: int = 320,
    height: int = 240,
    fps: int = 25,
    ffmpeg_path: str | None = None,
    noise: bool = False,
) -> SampleMedia:
    """Write a sample MKV of `kind` to `dest` and describe it; raises RuntimeError on failure.

    `noise` makes the picture hard to compress, for outputs big enough to need multipart
    uploads (several MiB per second of video).
    """
    recipe = _RECIPES[kind]
    ffmpeg = ffmpeg_path or imageio_ffmpeg.get_ffmpeg_exe()
    dest.parent.mkdir(parents=True, exist_ok=True)
    first, second = recipe.tracks
    with tempfile.TemporaryDirectory(prefix="mirror-sample-") as scratch:
        srt = Path(scratch) / "subtitles.srt"
        srt.write_text(_subtitles(duration_s), encoding="utf-8")
        argv = [
            ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
            "-f", "lavfi", "-i", _picture(width, height, fps, duration_s, noise),
            "-f", "lavfi", "-i", _sine(first.frequency, duration_s),
            "-f", "lavfi", "-i", _sine(second.frequency, duration_s),
            "-i", str(srt),
            "-map", "0:v", "-map", "1:a", "-map", "2:a", "-map", "3:s",
            *recipe.video_args, "-g", str(fps),
            *recipe.audio_args,
            "-ac:a:0", str(first.channels), "-ac:a:1", str(second.channels),
            "-c:s", "srt",
            "-metadata:s:a:0", f"language={first.language}",
            "-metadata:s:a:0", f"title={first.title}",
            "-metadata:s:a:1", f"language={second.language}",
            "-metadata:s:a:1", f"title={second.title}",
            "-metadata:s:s:0", f"language={_SUBTITLE_LANGUAGE}",
            "-metadata:s:s:0", f"title={_SUBTITLE_TITLE}",
            "-disposition:v:0", "default", "-disposition:a:0", "default",
            "-disposition:a:1", "0", "-disposition:s:0", "0",
            "-f", "matroska", str(dest),
        ]  # fmt: skip
        run_ffmpeg(argv)
    streams = (
        MediaStream(
            index=0, type="Video", codec=recipe.video_codec, width=width, height=height,
            frame_rate=float(fps), is_default=True, pixel_format="yuv420p",
            profile=recipe.video_profile, bit_depth=8,
        ),
        MediaStream(
            index=1, type="Audio", codec=recipe.audio_codec, language=first.language,
            title=first.title, channels=first.channels, is_default=True,
        ),
        MediaStream(
            index=2, type="Audio", codec=recipe.audio_codec, language=second.language,
            title=second.title, channels=second.channels,
        ),
        MediaStream(
            index=3, type="Subtitle", codec="subrip", language=_SUBTITLE_LANGUAGE,
            title=_SUBTITLE_TITLE,
        ),
    )  # fmt: skip
    probed_duration = probe_duration(dest, ffmpeg)
    return SampleMedia(
        path=dest,
        streams=streams,
        duration_s=probed_duration if probed_duration is not None else duration_s,
        container="mkv",
        size=dest.stat().st_size,
    )


def corrupt_copy(src: Path, dest: Path) -> Path:
    """A file as big as `src` that ffmpeg cannot open ("Invalid data found ...").

    Pure noise: keeping the real header would let ffmpeg resync past the damage and
    exit 0, which is not the case this stands for.
    """
    size = src.stat().st_size
    noise = random.Random(size)  # deterministic: the same src size gives the same bytes
    dest.parent.mkdir(parents=True, exist_ok=True)
    with dest.open("wb") as out:
        remaining = size
        while remaining:
            chunk = min(remaining, 1 << 20)
            out.write(noise.randbytes(chunk))
            remaining -= chunk
    return dest


# The parser is production code (the pipeline probes every download and output); these
# functions stay for the tests that read back what a file holds.


def describe_streams(path: Path, ffmpeg_path: str | None = None) -> list[ProbedStream]:
    """The streams of the first input in `path`, read from `ffmpeg -i` (no ffprobe)."""
    return parse_stream_listing(ffmpeg_listing(path, ffmpeg_path or _bundled()))


def probe_duration(path: Path, ffmpeg_path: str | None = None) -> float | None:
    """The container duration `ffmpeg -i` prints, in seconds (None for N/A)."""
    return parse_duration(ffmpeg_listing(path, ffmpeg_path or _bundled()))


def _bundled() -> str:
    path: str = imageio_ffmpeg.get_ffmpeg_exe()
    return path


def run_ffmpeg(argv: list[str]) -> None:
    """Run an ffmpeg command that makes a sample; RuntimeError with its reason if it fails."""
    result = subprocess.run(argv, capture_output=True, check=False)
    if result.returncode != 0:
        reason = result.stderr.decode("utf-8", errors="replace").strip()[-2000:]
        raise RuntimeError(
            f"ffmpeg could not generate the sample (exit {result.returncode}): {reason}"
        )


def _sine(frequency: int, duration_s: float) -> str:
    return f"sine=frequency={frequency}:sample_rate=48000:duration={duration_s}"


def _subtitles(duration_s: float) -> str:
    """Two cues inside the duration, one with non-ASCII text."""
    half = duration_s / 2
    cues = [
        (0.0, half * 0.9, "Hello from mirror"),
        (half, duration_s * 0.95, "Ça marche \u2013 動作中"),
    ]
    blocks = [
        f"{n}\n{_srt_time(start)} --> {_srt_time(end)}\n{text}\n"
        for n, (start, end, text) in enumerate(cues, start=1)
    ]
    return "\n".join(blocks)


def _srt_time(seconds: float) -> str:
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02}:{minutes:02}:{secs:02},{millis:03}"
