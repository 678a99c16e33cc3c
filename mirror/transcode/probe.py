"""What a media file really holds, read from `ffmpeg -i` (no ffprobe is needed).

Jellyfin's stream list is a description made at scan time and numbered its own way
(sidecar files first); the downloaded file is what ffmpeg will read. The pipeline probes
the file once after the download, maps outputs from that, and probes every output again
before upload. `ffmpeg -i` without an output only reads the container headers (an MP4's
moov, an MKV's first clusters), so a probe costs milliseconds even for a big file.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.item import MediaStream
from mirror.transcode.picture_listing import (
    NO_PICTURE_FACTS,
    Picture,
    parse_picture,
    parse_side_data_line,
)

# A probe that takes this long is a hung ffmpeg or a dead disk, not a slow header.
PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class ProbedStream:
    """One stream as `ffmpeg -i` prints it.

    `index` is ffmpeg's index in the file (`0:<index>`); `type` is spelled like
    Jellyfin's MediaStream Type (Video, Audio, Subtitle, Data, Attachment), and an
    attached picture (cover art) is a Video with `attached_pic` set.
    """

    index: int
    type: str
    codec: str
    language: str | None = None
    title: str | None = None
    channels: int | None = None
    width: int | None = None
    height: int | None = None
    frame_rate: float | None = None
    is_default: bool = False
    attached_pic: bool = False
    pixel_format: str | None = None  # video only, e.g. yuv420p10le
    profile: str | None = None  # video only, e.g. High 10
    # Its first timestamp, when ffmpeg prints one (`start 0.480000`: it does only when the
    # stream starts elsewhere than the file); None: where the file starts.
    start_s: float | None = None
    picture: Picture = NO_PICTURE_FACTS  # video only: scan, colour, pixel shape, rotation

    @property
    def jellyfin_type(self) -> str:
        """The Type Jellyfin gives this stream: cover art is an EmbeddedImage."""
        return "EmbeddedImage" if self.attached_pic else self.type

    @property
    def bit_depth(self) -> int | None:
        """Bits per sample of a video stream, from its pixel format (`yuv420p10le`: 10)."""
        if self.type != "Video" or self.pixel_format is None:
            return None
        match = re.search(r"p(\d+)(?:le|be)$", self.pixel_format)
        return int(match[1]) if match else 8

    def to_media_stream(self) -> MediaStream:
        """The MediaStream Jellyfin would list for this stream of a file without sidecars."""
        video = self.type == "Video" and not self.attached_pic
        return MediaStream(
            index=self.index,
            type=self.jellyfin_type,
            codec=self.codec,
            language=self.language,
            title=self.title,
            channels=self.channels,
            width=self.width,
            height=self.height,
            frame_rate=self.frame_rate,
            is_default=self.is_default,
            pixel_format=self.pixel_format if video else None,
            profile=self.profile if video else None,
            bit_depth=self.bit_depth if video else None,
            # As Jellyfin's IsInterlaced reads (mirror.jellyfin.models): only true says so.
            is_interlaced=True if video and self.picture.interlaced else None,
            color_primaries=self.picture.primaries if video else None,
            color_transfer=self.picture.transfer if video else None,
            color_space=self.picture.matrix if video else None,
            dv_profile=self.picture.dovi_profile if video else None,
        )


@dataclass(frozen=True, slots=True)
class ProbedFile:
    """Every stream of a file in ffmpeg's order, and the container's duration."""

    streams: tuple[ProbedStream, ...]
    duration_s: float | None
    start_s: float = 0.0  # the file's first timestamp: ffmpeg's clock starts there

    def stream_start_s(self, stream: ProbedStream) -> float:
        """Where `stream` starts on ffmpeg's clock (which subtracts the file's start)."""
        return (self.start_s if stream.start_s is None else stream.start_s) - self.start_s

    def of_type(self, kind: str) -> tuple[ProbedStream, ...]:
        """Streams of one ffmpeg kind in file order (`Video` includes cover art, as `0:v`)."""
        return tuple(s for s in self.streams if s.type == kind)


# Enough for every stream's facts in MKV / MP4 headers (and a few frames) at any bitrate;
# ffmpeg's default (5 MB, decoding what it reads) costs 0.1-1 s on 1080p.
QUICK_PROBE_SIZE = 1_000_000


def probe_file(path: Path, ffmpeg_path: str, *, quick: bool = False) -> ProbedFile:
    """Read `path`'s streams and duration; PermanentError when ffmpeg finds no stream.

    `quick` reads at most QUICK_PROBE_SIZE bytes: right for MKV and MP4, whose headers
    list every stream; a container that reveals streams as it goes (MPEG-TS) may need
    the full probe, so callers re-probe before trusting a disagreement.
    """
    options = ["-probesize", str(QUICK_PROBE_SIZE)] if quick else []
    text = _run_listing(ffmpeg_path, [*options, "-i", str(path)], path)
    probed = parse_probe(text)
    if not probed.streams:
        tail = " ".join(text.strip().splitlines()[-3:])[-600:] or "(no output)"
        raise PermanentError(f"ffmpeg failed to read {path.name}: {tail}")
    return probed


def probe_own_outputs(paths: Sequence[Path], ffmpeg_path: str) -> list[ProbedFile]:
    """Read files mirror wrote itself (faststart MP4s), all in ONE ffmpeg run.

    One process instead of one per output (ffmpeg's start-up is most of a probe), and
    a quick probe each: an MP4's moov holds every stream's facts and the duration. A
    file ffmpeg cannot open stops the run; then each file is probed alone so the error
    names the right one.
    """
    options = ["-probesize", str(QUICK_PROBE_SIZE)]
    inputs = [arg for path in paths for arg in (*options, "-i", str(path))]
    sections = _input_sections(_run_listing(ffmpeg_path, inputs, paths[0] if paths else None))
    if len(sections) == len(paths) and all(section.streams for section in sections):
        return sections
    return [probe_file(path, ffmpeg_path) for path in paths]


def ffmpeg_listing(path: Path, ffmpeg_path: str) -> str:
    """What `ffmpeg -i <path>` prints about the file (its stderr)."""
    return _run_listing(ffmpeg_path, ["-i", str(path)], path)


def _run_listing(ffmpeg_path: str, inputs: list[str], path: Path | None) -> str:
    try:
        # Without an output ffmpeg exits 1 after printing the inputs' descriptions.
        result = subprocess.run(
            [ffmpeg_path, "-nostdin", "-hide_banner", *inputs],
            capture_output=True,
            check=False,
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise TransientError(f"ffmpeg took over {PROBE_TIMEOUT_S:.0f}s to read {path}") from exc
    except OSError as exc:
        raise TransientError(f"cannot start ffmpeg ({ffmpeg_path}): {exc.strerror or exc}") from exc
    return result.stderr.decode("utf-8", errors="replace")


_INPUT = re.compile(r"^Input #\d+, ", re.MULTILINE)
_STREAM = re.compile(
    r"^\s*Stream #\d+:(?P<index>\d+)(?:\[0x[0-9a-f]+\])?(?:\((?P<lang>[^)]*)\))?: "
    r"(?P<type>\w+): (?P<codec>[\w-]+)(?P<rest>.*)$"
)
_TITLE = re.compile(r"^\s+title\s*: (?P<title>.*)$")
_DURATION = re.compile(r"Duration: (\d+):(\d+):(\d+(?:\.\d+)?)")
_FILE_START = re.compile(r"Duration: [^\n]*?, start: (-?\d+(?:\.\d+)?)")
_STREAM_START = re.compile(r", start (-?\d+(?:\.\d+)?)")
_SIZE = re.compile(r", (\d+)x(\d+)[ ,]")
_FPS = re.compile(r", (\d+(?:\.\d+)?) fps")
# `h264 (High 10) (avc1 / 0x31637661), yuv420p10le(tv, progressive), 1920x1080 ...`:
# the first parenthesis is the profile unless it is a codec tag (`avc1 / 0x...`).
_PROFILE = re.compile(r"^ \((?P<profile>[^)/]+)\)")
_PIXEL_FORMAT = re.compile(r"^(?: \([^)]*\))*, (?P<pix>[a-z][a-z0-9_]*)(?:\(|,|$)")
_LAYOUT_CHANNELS = {"mono": 1, "stereo": 2, "2.1": 3, "quad": 4, "5.0": 5, "5.1": 6, "7.1": 8}


def parse_probe(text: str) -> ProbedFile:
    """The first input's streams and duration from `ffmpeg -i` output."""
    start = _FILE_START.search(text)
    return ProbedFile(
        tuple(parse_stream_listing(text)),
        parse_duration(text),
        start_s=float(start[1]) if start else 0.0,
    )


def _input_sections(text: str) -> list[ProbedFile]:
    """One ProbedFile per `Input #k` block of a several-input listing, in order."""
    starts = [match.start() for match in _INPUT.finditer(text)]
    ends = [*starts[1:], len(text)]
    return [parse_probe(text[start:end]) for start, end in zip(starts, ends, strict=True)]


def parse_duration(text: str) -> float | None:
    """The container duration `ffmpeg -i` prints, in seconds (None for N/A)."""
    match = _DURATION.search(text)
    if not match:
        return None
    hours, minutes, seconds = match.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def parse_stream_listing(text: str) -> list[ProbedStream]:
    """Parse the `Stream #k:N` lines (and their titles) of the first input `ffmpeg` lists."""
    found: list[ProbedStream] = []
    in_stream = False  # a title line belongs to the stream above it, not to the file
    seen_input = False
    for line in text.splitlines():
        if line.startswith("Output #") or (line.startswith("Input #") and seen_input):
            break  # only the first input describes the file
        match = _STREAM.match(line)
        if match:
            found.append(_probed(match))
            in_stream = True
        elif line.startswith("Input #"):
            seen_input = True
        elif line.lstrip().startswith("Chapter"):
            in_stream = False
        elif in_stream and (title := _TITLE.match(line)):
            found[-1] = replace(found[-1], title=title["title"])
        elif in_stream and found[-1].type == "Video":
            # Side data (display matrix, Dolby Vision record) is listed under its stream.
            picture = parse_side_data_line(line, found[-1].picture)
            if picture is not found[-1].picture:
                found[-1] = replace(found[-1], picture=picture)
    return found


def _probed(match: re.Match[str]) -> ProbedStream:
    rest = match["rest"]
    start = _STREAM_START.search(rest)
    stream = ProbedStream(
        index=int(match["index"]),
        type=match["type"],
        codec=match["codec"],
        language=match["lang"] if match["lang"] not in (None, "und") else None,
        is_default="(default)" in rest,
        start_s=float(start[1]) if start else None,
    )
    if stream.type == "Video":
        size = _SIZE.search(rest)
        fps = _FPS.search(rest)
        pixel_format = _PIXEL_FORMAT.match(rest)
        # Only a video's parenthesis is its profile: audio and subtitles show the decoder
        # there (`mp3 (mp3float)`, `subrip (srt)`).
        profile = _PROFILE.match(rest)
        return replace(
            stream,
            width=int(size[1]) if size else None,
            height=int(size[2]) if size else None,
            frame_rate=float(fps[1]) if fps else None,
            attached_pic="(attached pic)" in rest,
            pixel_format=pixel_format["pix"] if pixel_format else None,
            profile=profile["profile"].strip() if profile else None,
            picture=parse_picture(rest),
        )
    if stream.type == "Audio":
        return replace(stream, channels=_channels(rest))
    return stream


def _channels(rest: str) -> int | None:
    if explicit := re.search(r", (\d+) channels", rest):
        return int(explicit[1])
    for part in rest.split(", "):
        layout = part.split("(")[0].strip()
        if layout in _LAYOUT_CHANNELS:
            return _LAYOUT_CHANNELS[layout]
    return None
