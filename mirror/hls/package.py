"""Write an item's HLS playlists next to its verified outputs (output format `hls`).

Runs after verification, before upload: each output's fragment index is read from the
file itself, so every playlist matches the bytes that go to S3. The playlists are small
local files uploaded with the outputs; `master.m3u8` is the item's entry point (the job
row's `hls_key`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mirror.hls.fragments import FragmentIndex, aligned, read_fragment_index
from mirror.hls.playlists import (
    PLAYLIST_CONTENT_TYPE,
    AudioRendition,
    SubtitleRendition,
    VideoRendition,
    master_playlist,
    media_playlist,
    subtitle_playlist,
)
from mirror.hls.timestamp_map import first_presentation_s, with_timestamp_map
from mirror.transcode.outputs import AudioOutput, TranscodePlan, VideoOutput
from mirror.transcode.picture import VideoRange
from mirror.transcode.verify import VerifiedOutput

MASTER_FILE_NAME = "master.m3u8"


@dataclass(frozen=True, slots=True)
class PlaylistFile:
    path: Path
    relative_path: str  # also the S3 key suffix
    content_type: str = PLAYLIST_CONTENT_TYPE


@dataclass(frozen=True, slots=True)
class HlsPackage:
    master: PlaylistFile
    playlists: tuple[PlaylistFile, ...]  # media playlists, then the master last


def playlist_path(relative_path: str) -> str:
    """`audio/1-eng.m4a` -> `audio/1-eng.m3u8`: each playlist sits beside its object."""
    return str(PurePosixPath(relative_path).with_suffix(".m3u8"))


def package_hls(
    plan: TranscodePlan,
    *,
    width: int | None,
    height: int | None,
    video_range: VideoRange = "SDR",
    ladder: Sequence[VerifiedOutput] = (),
) -> HlsPackage:
    """Write `video.m3u8` (or one playlist per rendition), one per audio track and
    subtitle, and the master; put every subtitle on the video's clock (`X-TIMESTAMP-MAP`,
    mirror.hls.timestamp_map).

    `width` x `height` is the size players show (RESOLUTION), `video_range` what the
    video.mp4 is tagged (VIDEO-RANGE, written for PQ and HLG: only a copy stays HDR);
    `ladder` the lower renditions as verified (plan.ladder's order), re-encoded to SDR.
    """
    root = plan.output_dir
    written: list[PlaylistFile] = []
    video_index = read_fragment_index(plan.video.path)
    video = VideoRendition(
        uri=_write_media(root, plan.video, video_index, written),
        index=video_index,
        width=width,
        height=height,
        frame_rate=plan.video.frame_rate,
        video_range=video_range,
    )
    rungs = []
    for rung, checked in zip(plan.ladder, ladder, strict=True):
        index = read_fragment_index(rung.path)
        width, height = checked.display_size
        rungs.append(
            VideoRendition(
                uri=_write_media(root, rung, index, written),
                index=index,
                width=width,
                height=height,
                frame_rate=rung.frame_rate,
            )
        )
    # Audio segments end where the video's do (to within half an audio fragment).
    video_ends = list(itertools.accumulate(f.duration_s for f in video_index.fragments))[:-1]
    audio = []
    for track in plan.audio:
        index = aligned(read_fragment_index(track.path), video_ends)
        audio.append(
            AudioRendition(
                uri=_write_media(root, track, index, written),
                index=index,
                name=_track_name(track),
                language=track.language,
                default=track.is_default,
                # Every rendition says how many channels it holds, read from the file
                # (players pick by it and show it; stereo "2", 5.1 "6").
                channels=index.channels or track.channels,
            )
        )
    duration = video_index.duration_s
    video_start_s = first_presentation_s(plan.video.path, video_index)
    subtitle_renditions = []
    for sub in plan.subtitles:
        _map_to_video(sub.path, video_start_s, plan.video.start_s)
        uri = playlist_path(sub.relative_path)
        body = subtitle_playlist(PurePosixPath(sub.relative_path).name, duration)
        written.append(_write(root, uri, body))
        subtitle_renditions.append(
            SubtitleRendition(
                uri=uri,
                name=sub.title or sub.language or f"Subtitle {sub.stream_index}",
                language=sub.language,
                default=sub.default,
                forced=sub.forced,
            )
        )
    master = _write(
        root, MASTER_FILE_NAME, master_playlist(video, audio, subtitle_renditions, ladder=rungs)
    )
    return HlsPackage(master=master, playlists=(*written, master))


def _write_media(
    root: Path, output: VideoOutput | AudioOutput, index: FragmentIndex, written: list[PlaylistFile]
) -> str:
    relative = playlist_path(output.relative_path)
    # The playlist sits beside its object, so the object is named by its file name alone.
    written.append(_write(root, relative, media_playlist(output.path.name, index)))
    return relative


def _map_to_video(vtt: Path, media_start_s: float, clock_start_s: float) -> None:
    """The cue at `clock_start_s` (ffmpeg's clock) goes with the video's first frame,
    presented at `media_start_s` in video.mp4."""
    # surrogateescape: bytes that are not UTF-8 go back out as they came in.
    text = vtt.read_bytes().decode("utf-8", errors="surrogateescape")
    mapped = with_timestamp_map(text, media_start_s, local_s=clock_start_s)
    vtt.write_bytes(mapped.encode("utf-8", "surrogateescape"))


def _write(root: Path, relative: str, body: str) -> PlaylistFile:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return PlaylistFile(path, relative)


def _track_name(track: AudioOutput) -> str:
    """What a player's menu shows: the title, else the language, else the index."""
    return track.title or track.language or f"Track {track.stream_index}"
