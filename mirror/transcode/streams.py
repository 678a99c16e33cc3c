"""Which streams of the downloaded file become outputs, and which are skipped and why.

Jellyfin's `MediaStreams[].Index` is not ffmpeg's index: sidecar files (`Movie.en.srt`,
`Movie.commentary.mka`) are listed first and every stream is numbered after them. So
streams are mapped by their position among the file's own streams of one kind
(`0:v:N`, `0:a:N`), and the file's own index (ffmpeg's `0:<index>`) is what names the
outputs (`audio/<index>-<lang>.m4a`, `stream_index`): stable whether or not sidecars
come and go. ffmpeg counts cover art (an attached picture; Jellyfin: `EmbeddedImage`)
among the video streams, so video positions count both.

With a probe of the downloaded file the positions and indices are the file's, and
Jellyfin's list is checked against it; without one (before the download) they are
worked out from Jellyfin's list alone, which is enough to fail early on an item with
nothing to mirror. Pure: plain data in, plain data out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any

from mirror.domain.errors import PermanentError
from mirror.domain.item import MediaItem, MediaStream
from mirror.transcode.picture_listing import NO_PICTURE_FACTS
from mirror.transcode.probe import ProbedFile, ProbedStream

# ffmpeg's stream specifier letter for each Jellyfin Type (cover art is video to ffmpeg).
_SPECIFIER = {"Video": "v", "EmbeddedImage": "v", "Audio": "a", "Subtitle": "s", "Data": "d"}
_PROBED_SPECIFIER = {"Video": "v", "Audio": "a", "Subtitle": "s", "Data": "d"}
# The kinds whose counts must agree between Jellyfin and the file, with their names.
_CHECKED = (("v", "video", " (cover art included)"), ("a", "audio", ""), ("s", "subtitle", ""))
_TEXT_SUBTITLES = frozenset(
    {"subrip", "srt", "ass", "ssa", "webvtt", "vtt", "mov_text", "text", "microdvd", "sami"}
)


@dataclass(frozen=True, slots=True)
class FileStream:
    """One stream of the downloaded file, with the facts planning needs.

    Technical facts (codec, pixel format, profile, bit depth, channels) come from the
    probe when there is one, since that is what ffmpeg will read; language, title and
    frame rate from Jellyfin first (people edit those in Jellyfin; `ffmpeg -i` rounds
    frame rates), the probe filling what Jellyfin left out.
    """

    index: int  # ffmpeg's index in the file (`0:<index>`)
    specifier: str  # position among the file's streams of its kind: `v:0`, `a:1`
    type: str  # Jellyfin's Type: Video, EmbeddedImage, Audio, Subtitle, Data
    codec: str | None = None
    language: str | None = None
    title: str | None = None
    channels: int | None = None
    width: int | None = None
    height: int | None = None
    frame_rate: float | None = None
    pixel_format: str | None = None
    profile: str | None = None
    bit_depth: int | None = None
    is_default: bool = False  # Jellyfin's IsDefault: the track a player starts with
    is_forced: bool = False
    start_s: float | None = None  # its first timestamp on ffmpeg's clock (probe only)
    # Picture facts (video), the probe's first: they decide deinterlacing, tone-mapping
    # and scaling (mirror.transcode.picture). Jellyfin alone has VideoRangeType.
    interlaced: bool | None = None
    color_primaries: str | None = None
    color_transfer: str | None = None
    color_space: str | None = None
    sar: tuple[int, int] | None = None  # the probe's; Jellyfin gives no pixel shape
    dv_profile: int | None = None
    video_range_type: str | None = None


@dataclass(frozen=True, slots=True)
class SkippedStream:
    """A stream that gets no output, for the job row's `skipped_streams`.

    `index` is the file's own index for streams inside the file, and Jellyfin's Index
    for sidecars (which are not in the file at all; `path` says where they are).
    """

    index: int
    kind: str
    codec: str | None
    language: str | None
    reason: str
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "index": self.index,
            "kind": self.kind,
            "codec": self.codec,
            "language": self.language,
            "reason": self.reason,
        }
        if self.path is not None:
            entry["path"] = self.path
        return entry


@dataclass(frozen=True, slots=True)
class StreamSelection:
    video: FileStream
    audio: tuple[FileStream, ...]
    skipped: tuple[SkippedStream, ...]
    subtitles: tuple[FileStream, ...] = ()  # text subtitles inside the file
    sidecar_subtitles: tuple[MediaStream, ...] = ()  # text sidecars, fetched from Jellyfin


def is_text_subtitle(codec: str | None) -> bool:
    """SubRip, ASS/SSA, mov_text, WebVTT...: what ffmpeg (and Jellyfin) turn into WebVTT."""
    return (codec or "").lower() in _TEXT_SUBTITLES


def select_streams(
    item: MediaItem, probe: ProbedFile | None = None, *, subtitles: bool = False
) -> StreamSelection:
    """The video, the audio tracks, the text subtitles and the skipped streams of `item`.

    `subtitles` (output format hls) selects text subtitles, in the file and sidecars;
    otherwise they are skipped with a reason, as image subtitles always are.

    PermanentError when there is no video, or when Jellyfin's list and the probed file
    disagree (the error names both counts: a rescan in Jellyfin fixes its list).
    """
    listed = item.file_streams
    if probe is None:
        streams = _from_jellyfin(listed, len(item.external_streams))
    else:
        _check_counts(listed, probe.streams)
        streams = _merged(listed, probe)
    videos = [s for s in streams if s.type == "Video"]
    if not videos:
        only_art = any(s.type == "EmbeddedImage" for s in streams)
        detail = " (only cover art)" if only_art else ""
        raise PermanentError(
            f"item {item.id} ({item.name}) has no video stream{detail}; nothing to mirror"
        )
    video = videos[0]
    audio = tuple(s for s in streams if s.type == "Audio")
    texts = tuple(
        s for s in streams if subtitles and s.type == "Subtitle" and is_text_subtitle(s.codec)
    )
    sidecars = tuple(
        s
        for s in item.external_streams
        if subtitles and s.type == "Subtitle" and is_text_subtitle(s.codec)
    )
    skipped = [_external(s) for s in item.external_streams if s not in sidecars]
    skipped += [
        _skipped(s) for s in streams if s is not video and s.type != "Audio" and s not in texts
    ]
    return StreamSelection(
        video=video,
        audio=audio,
        skipped=tuple(skipped),
        subtitles=texts,
        sidecar_subtitles=sidecars,
    )


def _from_jellyfin(listed: Sequence[MediaStream], sidecars: int) -> list[FileStream]:
    """The file as Jellyfin describes it: its streams numbered after the sidecars."""
    counters: dict[str, int] = {}
    found = []
    for stream in listed:
        letter = _SPECIFIER.get(stream.type)
        if letter is None:
            continue
        nth = counters.get(letter, 0)
        counters[letter] = nth + 1
        index = stream.index - sidecars
        found.append(_file_stream(index, f"{letter}:{nth}", stream.type, stream, None))
    return found


def _merged(listed: Sequence[MediaStream], probe: ProbedFile) -> list[FileStream]:
    """The probed streams in file order, each with the Jellyfin entry at its position."""
    probed = probe.streams
    by_letter = {letter: _jellyfin_of_kind(listed, letter) for letter in "vasd"}
    counters: dict[str, int] = {}
    found = []
    for stream in probed:
        letter = _PROBED_SPECIFIER.get(stream.type)
        if letter is None:
            continue  # attachments (fonts): not media streams, Jellyfin does not list them
        nth = counters.get(letter, 0)
        counters[letter] = nth + 1
        jellyfin = by_letter[letter][nth] if nth < len(by_letter[letter]) else None
        kind = stream.jellyfin_type
        if jellyfin is not None and jellyfin.type == "EmbeddedImage":
            kind = "EmbeddedImage"  # cover art either way: Jellyfin also judges by codec
        found.append(
            replace(
                _file_stream(stream.index, f"{letter}:{nth}", kind, jellyfin, stream),
                start_s=probe.stream_start_s(stream),
            )
        )
    return found


def _file_stream(
    index: int, specifier: str, kind: str, listed: MediaStream | None, probed: ProbedStream | None
) -> FileStream:
    jf = listed or MediaStream(index=index, type=kind)

    def file_first(name: str) -> Any:
        value = getattr(probed, name) if probed is not None else None
        return value if value is not None else getattr(jf, name)

    def jellyfin_first(name: str) -> Any:
        value = getattr(jf, name)
        return value if value is not None or probed is None else getattr(probed, name)

    picture = probed.picture if probed is not None else NO_PICTURE_FACTS

    def picture_first(value: Any, name: str) -> Any:
        return value if value is not None else getattr(jf, name)

    return FileStream(
        index=index,
        specifier=specifier,
        type=kind,
        codec=file_first("codec"),
        language=jellyfin_first("language"),
        title=jellyfin_first("title"),
        channels=file_first("channels"),
        width=file_first("width"),
        height=file_first("height"),
        frame_rate=jellyfin_first("frame_rate"),
        pixel_format=file_first("pixel_format"),
        profile=file_first("profile"),
        bit_depth=file_first("bit_depth"),
        is_default=bool(jellyfin_first("is_default")),
        is_forced=jf.is_forced,
        interlaced=picture_first(picture.interlaced, "is_interlaced"),
        color_primaries=picture_first(picture.primaries, "color_primaries"),
        color_transfer=picture_first(picture.transfer, "color_transfer"),
        color_space=picture_first(picture.matrix, "color_space"),
        sar=picture.sar,
        dv_profile=picture_first(picture.dovi_profile, "dv_profile"),
        video_range_type=jf.video_range_type,
    )


def _jellyfin_of_kind(listed: Sequence[MediaStream], letter: str) -> list[MediaStream]:
    return [s for s in listed if _SPECIFIER.get(s.type) == letter]


def _check_counts(listed: Sequence[MediaStream], probed: Sequence[ProbedStream]) -> None:
    problems = []
    for letter, name, note in _CHECKED:
        said = len(_jellyfin_of_kind(listed, letter))
        has = sum(1 for s in probed if _PROBED_SPECIFIER.get(s.type) == letter)
        if said != has:
            problems.append(
                f"Jellyfin lists {said} {name} stream{'s' if said != 1 else ''}{note}, "
                f"the file has {has}"
            )
    if problems:
        raise PermanentError("; ".join(problems) + ": rescan the item in Jellyfin")


def _external(stream: MediaStream) -> SkippedStream:
    name = PurePath(stream.path).name if stream.path else "a sidecar file"
    return SkippedStream(
        index=stream.index,
        kind=stream.type,
        codec=stream.codec,
        language=stream.language,
        reason=f"external file {name} beside the media: not part of the download",
        path=stream.path,
    )


def _skipped(stream: FileStream) -> SkippedStream:
    return SkippedStream(
        index=stream.index,
        kind=stream.type,
        codec=stream.codec,
        language=stream.language,
        reason=_reason(stream),
    )


def _reason(stream: FileStream) -> str:
    codec = stream.codec or "unknown codec"
    if stream.type == "EmbeddedImage":
        return f"embedded cover art ({codec}), not the video"
    if stream.type == "Video":
        return "another video stream: only the first is mirrored"
    if stream.type == "Subtitle":
        if codec.lower() in _TEXT_SUBTITLES:
            return f"text subtitle ({codec}): output format mp4 writes no subtitles"
        return f"image subtitle ({codec}): only text subtitles can become WebVTT"
    return f"data stream ({codec}): not audio or video"
