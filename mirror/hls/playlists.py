"""HLS playlists over mirror's own files: pure text from plain data, no I/O.

Every media playlist points into ONE object with `EXT-X-MAP` (the init section) and
`EXT-X-BYTERANGE` (one fragment each), so the bucket holds no duplicate segment files
and `video.mp4` / `audio/*.m4a` stay plain playable files. URIs are relative to the
playlist, which is what lets `mirror serve` rewrite them (see `mirror.web.player`) and a
public bucket or CDN serve them untouched. Version 7: byte ranges and EXT-X-MAP in a
non-I-frame playlist need 6, `DEFAULT`/`AUTOSELECT` with `CHANNELS` is fine from 7.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mirror.hls.fragments import FragmentIndex

VERSION = 7
PLAYLIST_CONTENT_TYPE = "application/vnd.apple.mpegurl"
AUDIO_GROUP = "audio"
SUBTITLE_GROUP = "subs"


def media_playlist(uri: str, index: FragmentIndex) -> str:
    """A VOD media playlist of `index`'s fragments, all inside the object at `uri`."""
    # RFC 8216 4.3.3.1: every EXTINF, rounded to the nearest integer, is <= the target.
    target = max(1, math.floor(max(f.duration_s for f in index.fragments) + 0.5))
    lines = [
        "#EXTM3U",
        f"#EXT-X-VERSION:{VERSION}",
        f"#EXT-X-TARGETDURATION:{target}",
        "#EXT-X-MEDIA-SEQUENCE:0",
        "#EXT-X-PLAYLIST-TYPE:VOD",
        "#EXT-X-INDEPENDENT-SEGMENTS",
        f'#EXT-X-MAP:URI="{uri}",BYTERANGE="{index.init.length}@{index.init.offset}"',
    ]
    for fragment in index.fragments:
        lines.append(f"#EXTINF:{fragment.duration_s:.6f},")
        lines.append(f"#EXT-X-BYTERANGE:{fragment.length}@{fragment.offset}")
        lines.append(uri)
    lines.append("#EXT-X-ENDLIST")
    return "\n".join(lines) + "\n"


def subtitle_playlist(uri: str, duration_s: float) -> str:
    """One WebVTT file as the single segment of a VOD playlist lasting `duration_s`."""
    duration = max(duration_s, 0.001)
    return (
        "\n".join(
            [
                "#EXTM3U",
                f"#EXT-X-VERSION:{VERSION}",
                f"#EXT-X-TARGETDURATION:{max(1, math.floor(duration + 0.5))}",
                "#EXT-X-MEDIA-SEQUENCE:0",
                "#EXT-X-PLAYLIST-TYPE:VOD",
                f"#EXTINF:{duration:.6f},",
                uri,
                "#EXT-X-ENDLIST",
            ]
        )
        + "\n"
    )


@dataclass(frozen=True, slots=True)
class VideoRendition:
    uri: str  # the media playlist, relative to the master
    index: FragmentIndex
    width: int | None
    height: int | None
    frame_rate: float | None = None
    video_range: str = "SDR"  # SDR, PQ or HLG (HLS VIDEO-RANGE)


@dataclass(frozen=True, slots=True)
class AudioRendition:
    uri: str
    index: FragmentIndex
    name: str
    language: str | None
    default: bool
    channels: int | None = None


@dataclass(frozen=True, slots=True)
class SubtitleRendition:
    uri: str
    name: str
    language: str | None
    default: bool = False
    forced: bool = False


def master_playlist(
    video: VideoRendition,
    audio: Sequence[AudioRendition],
    subtitles: Sequence[SubtitleRendition] = (),
    *,
    ladder: Sequence[VideoRendition] = (),
) -> str:
    """The master: one variant per video rendition (the source's first, then `ladder`,
    the lower rungs of MIRROR_RENDITIONS), all sharing one AUDIO group (and SUBTITLES).

    BANDWIDTH is the video's peak plus the largest audio peak (any one track plays at a
    time), AVERAGE-BANDWIDTH the same of the averages, both measured over the written
    fragments; CODECS lists the video and every distinct audio codec, as players select
    variants they cannot decode out by it.
    """
    lines = ["#EXTM3U", f"#EXT-X-VERSION:{VERSION}", "#EXT-X-INDEPENDENT-SEGMENTS"]
    has_default = any(track.default for track in audio)
    audio_names = [_quoted(track.name) for track in audio]
    for position, track in enumerate(audio):
        default = track.default or (not has_default and position == 0)
        attributes = [
            "TYPE=AUDIO",
            f'GROUP-ID="{AUDIO_GROUP}"',
            f'NAME="{_unique_name(audio_names[position], position, audio_names)}"',
        ]
        if track.language:
            attributes.append(f'LANGUAGE="{_quoted(track.language)}"')
        attributes.append(f"DEFAULT={'YES' if default else 'NO'}")
        attributes.append("AUTOSELECT=YES")
        if track.channels:
            attributes.append(f'CHANNELS="{track.channels}"')
        attributes.append(f'URI="{track.uri}"')
        lines.append("#EXT-X-MEDIA:" + ",".join(attributes))
    subtitle_names = [_quoted(sub.name) for sub in subtitles]
    for position, sub in enumerate(subtitles):
        attributes = [
            "TYPE=SUBTITLES",
            f'GROUP-ID="{SUBTITLE_GROUP}"',
            f'NAME="{_unique_name(subtitle_names[position], position, subtitle_names)}"',
        ]
        if sub.language:
            attributes.append(f'LANGUAGE="{_quoted(sub.language)}"')
        attributes.append(f"DEFAULT={'YES' if sub.default else 'NO'}")
        attributes.append(f"AUTOSELECT={'YES' if sub.default or sub.forced else 'NO'}")
        attributes.append(f"FORCED={'YES' if sub.forced else 'NO'}")
        attributes.append(f'URI="{sub.uri}"')
        lines.append("#EXT-X-MEDIA:" + ",".join(attributes))
    for variant in (video, *ladder):
        lines.append("#EXT-X-STREAM-INF:" + ",".join(_variant(variant, audio, bool(subtitles))))
        lines.append(variant.uri)
    return "\n".join(lines) + "\n"


def _variant(video: VideoRendition, audio: Sequence[AudioRendition], subtitles: bool) -> list[str]:
    """The EXT-X-STREAM-INF attributes of one video rendition with the audio group."""
    codecs = [c for c in [video.index.codec, *(a.index.codec for a in audio)] if c]
    peak_audio = max((a.index.peak_bitrate for a in audio), default=0)
    average_audio = max((a.index.average_bitrate for a in audio), default=0)
    stream = [
        f"BANDWIDTH={video.index.peak_bitrate + peak_audio}",
        f"AVERAGE-BANDWIDTH={video.index.average_bitrate + average_audio}",
        f'CODECS="{",".join(dict.fromkeys(codecs))}"',
    ]
    if video.width and video.height:
        stream.append(f"RESOLUTION={video.width}x{video.height}")
    if video.frame_rate:
        stream.append(f"FRAME-RATE={video.frame_rate:.3f}")
    if video.video_range != "SDR":
        # SDR is what players assume without it; an HDR variant must say which HDR.
        stream.append(f"VIDEO-RANGE={video.video_range}")
    if audio:
        stream.append(f'AUDIO="{AUDIO_GROUP}"')
    if subtitles:
        stream.append(f'SUBTITLES="{SUBTITLE_GROUP}"')
    return stream


def _unique_name(name: str, position: int, names: Sequence[str]) -> str:
    """NAME must be unique within a group: a repeated title gets its position added."""
    return name if names.count(name) == 1 else f"{name} ({position + 1})"


def _quoted(value: str) -> str:
    """A track title or language from the file's own tags, safe inside `NAME="..."`.

    RFC 8216 4.2 forbids `"`, CR and LF in a quoted-string; a reader that splits lines on
    more (Python's `splitlines()`: U+2028, U+0085, VT, FF, ...) or attributes on every
    comma would take the rest of the title for a line or an attribute of its own. So
    quotes become `'`, and commas, controls, format and separator characters become
    spaces (runs collapsed): what is left is printable text on one line.
    """
    cleaned = "".join(_SAFE.get(char, char if char.isprintable() else " ") for char in value)
    return " ".join(cleaned.split())


_SAFE = {'"': "'", ",": " "}
