"""Samples shaped like the files real Jellyfin libraries hold, and how Jellyfin lists them.

The two MKVs of `media.generate_sample` are the easy case. These are the shapes that
break a naive mirror: cover art in an MP4, HEVC, 10-bit H.264, 5.1 AC-3, no audio at
all, an audio track that ends early, and sidecar files beside the media (which Jellyfin
lists first, numbering the file's streams after them). Each is a few seconds, generated
from lavfi sources with the bundled ffmpeg, and comes with the MediaStreams Jellyfin
10.9-10.11 would send for it (EmbeddedImage for cover art, PixelFormat / Profile /
BitDepth for video).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import imageio_ffmpeg

from mirror.demo.media import SampleMedia, generate_sample, probe_duration, run_ffmpeg
from mirror.domain.item import MediaStream

ShapeKind = Literal["cover_art_mp4", "hevc", "h264_10bit", "ac3_51", "no_audio", "short_audio"]


@dataclass(frozen=True)
class _Video:
    codec: str  # as Jellyfin spells it
    profile: str
    pixel_format: str
    bit_depth: int
    args: tuple[str, ...]


@dataclass(frozen=True)
class _Audio:
    codec: str
    channels: int
    args: tuple[str, ...]
    length: float = 1.0  # share of the video's duration


@dataclass(frozen=True)
class _Shape:
    video: _Video
    audio: _Audio | None
    container: str  # file extension, also Jellyfin's Container
    cover_art: bool = False


_H264 = _Video(
    "h264", "Constrained Baseline", "yuv420p", 8,
    ("-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"),
)  # fmt: skip
_AAC = _Audio("aac", 2, ("-c:a", "aac", "-b:a", "96k", "-ac", "2"))

_HEVC = _Video(
    "hevc", "Main", "yuv420p", 8,
    ("-c:v", "libx265", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
     "-x265-params", "log-level=error"),
)  # fmt: skip
_H264_10BIT = _Video(
    "h264", "High 10", "yuv420p10le", 10,
    ("-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p10le", "-profile:v", "high10"),
)  # fmt: skip
_AC3_51 = _Audio("ac3", 6, ("-c:a", "ac3", "-b:a", "384k", "-ac", "6"))

_SHAPES: dict[str, _Shape] = {
    "cover_art_mp4": _Shape(_H264, _AAC, "mp4", cover_art=True),
    "hevc": _Shape(_HEVC, _AAC, "mkv"),
    "h264_10bit": _Shape(_H264_10BIT, _AAC, "mkv"),
    "ac3_51": _Shape(_H264, _AC3_51, "mkv"),
    "no_audio": _Shape(_H264, None, "mkv"),
    "short_audio": _Shape(_H264, replace(_AAC, length=0.25), "mkv"),  # audio ends at 1/4
}

_WIDTH, _HEIGHT, _FPS = 320, 240, 25
_LANGUAGE = "eng"


def generate_shape(
    dest: Path, kind: ShapeKind, *, duration_s: float = 3.0, ffmpeg_path: str | None = None
) -> SampleMedia:
    """Write a sample of `kind` to `dest` (its suffix is replaced by the shape's container)."""
    shape = _SHAPES[kind]
    ffmpeg = ffmpeg_path or imageio_ffmpeg.get_ffmpeg_exe()
    dest = dest.with_suffix(f".{shape.container}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    picture = f"testsrc=size={_WIDTH}x{_HEIGHT}:rate={_FPS}:duration={duration_s}"
    with tempfile.TemporaryDirectory(prefix="mirror-shape-") as scratch:
        argv = [ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-y"]
        argv += ["-f", "lavfi", "-i", picture]
        maps = ["-map", "0:v"]
        if shape.audio is not None:
            length = duration_s * shape.audio.length
            argv += ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={length}"]
            maps += ["-map", f"{len(maps) // 2}:a"]
        if shape.cover_art:
            cover = Path(scratch) / "cover.png"
            run_ffmpeg([ffmpeg, "-nostdin", "-loglevel", "error", "-f", "lavfi",
                        "-i", "color=c=red:size=64x64", "-frames:v", "1", str(cover)])  # fmt: skip
            argv += ["-i", str(cover)]
            maps += ["-map", f"{len(maps) // 2}:v"]
        argv += maps + list(shape.video.args) + ["-g", str(_FPS), "-disposition:v:0", "default"]
        if shape.audio is not None:
            argv += [*shape.audio.args, "-metadata:s:a:0", f"language={_LANGUAGE}"]
            argv += ["-disposition:a:0", "default"]
        if shape.cover_art:
            argv += ["-c:v:1", "png", "-disposition:v:1", "attached_pic"]
        run_ffmpeg([*argv, str(dest)])
    return SampleMedia(
        path=dest,
        streams=_jellyfin_streams(shape),
        duration_s=probe_duration(dest, ffmpeg) or duration_s,
        container=shape.container,
        size=dest.stat().st_size,
    )


def _jellyfin_streams(shape: _Shape) -> tuple[MediaStream, ...]:
    """What Jellyfin lists for a shape: the MP4 muxer moves cover art after the tracks."""
    video = shape.video
    streams = [
        MediaStream(
            index=0, type="Video", codec=video.codec, width=_WIDTH, height=_HEIGHT,
            frame_rate=float(_FPS), is_default=True, pixel_format=video.pixel_format,
            profile=video.profile, bit_depth=video.bit_depth,
        )
    ]  # fmt: skip
    if shape.audio is not None:
        streams.append(
            MediaStream(
                index=len(streams), type="Audio", codec=shape.audio.codec, language=_LANGUAGE,
                channels=shape.audio.channels, is_default=True,
            )
        )  # fmt: skip
    if shape.cover_art:
        streams.append(
            MediaStream(index=len(streams), type="EmbeddedImage", codec="png", width=64, height=64)
        )
    return tuple(streams)


@dataclass(frozen=True)
class SidecarLayout:
    """A media file with sidecar files beside it, as Jellyfin finds it in a library folder."""

    sample: SampleMedia  # path: the media file; streams: Jellyfin's list, sidecars first
    sidecars: tuple[Path, ...]

    @property
    def file_streams(self) -> tuple[MediaStream, ...]:
        return tuple(s for s in self.sample.streams if not s.is_external)


def sidecar_layout(
    folder: Path, media: SampleMedia, *, audio_sidecar: bool = True, ffmpeg_path: str | None = None
) -> SidecarLayout:
    """`Movie.<ext>` + `Movie.en.srt` (+ `Movie.commentary.mka`) in `folder`.

    Jellyfin lists the sidecars first (subtitles, then audio: `FFProbeVideoInfo` adds
    external streams before the file's) with Index 0..k-1, and the file's own streams
    after them with their Index shifted by k.
    """
    ffmpeg = ffmpeg_path or imageio_ffmpeg.get_ffmpeg_exe()
    folder.mkdir(parents=True, exist_ok=True)
    movie = folder / f"Movie{media.path.suffix}"
    shutil.copyfile(media.path, movie)
    srt = folder / "Movie.en.srt"
    srt.write_text("1\n00:00:00,000 --> 00:00:01,000\nSidecar subtitle\n", encoding="utf-8")
    externals = [
        MediaStream(
            index=0, type="Subtitle", codec="subrip", language="eng", is_external=True,
            path=str(srt),
        )
    ]  # fmt: skip
    sidecars = [srt]
    if audio_sidecar:
        mka = folder / "Movie.commentary.mka"
        commentary = generate_sample(
            folder / "commentary-source.mkv", "h264_aac", duration_s=media.duration_s,
            ffmpeg_path=ffmpeg,
        )  # fmt: skip
        run_ffmpeg([ffmpeg, "-nostdin", "-loglevel", "error", "-y", "-i", str(commentary.path),
                    "-map", "0:a:0", "-c", "copy", str(mka)])  # fmt: skip
        commentary.path.unlink()
        externals.append(
            MediaStream(
                index=1, type="Audio", codec="aac", language="eng", title="Commentary",
                channels=2, is_external=True, path=str(mka),
            )
        )  # fmt: skip
        sidecars.append(mka)
    shifted = tuple(replace(s, index=s.index + len(externals)) for s in media.streams)
    sample = replace(media, path=movie, streams=(*externals, *shifted), size=movie.stat().st_size)
    return SidecarLayout(sample=sample, sidecars=tuple(sidecars))
