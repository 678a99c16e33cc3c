"""Sidecar text subtitles: not in the download, so Jellyfin serves them as WebVTT.

The file's own text subtitles are written by the transcode's ffmpeg run; sidecars
(`Movie.fr.srt` beside the file) come from `/Videos/{id}/{source}/Subtitles/{index}/
Stream.vtt`, by Jellyfin's own Index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from mirror.domain.errors import PermanentError, RetriesExhausted
from mirror.transcode.outputs import SubtitleOutput, TranscodePlan
from mirror.transcode.streams import SkippedStream


def fetch_sidecar_subtitles(plan: TranscodePlan, fetch: Callable[[int], bytes]) -> TranscodePlan:
    """Write every sidecar subtitle of `plan` with `fetch(index)`; the plan that remains.

    One Jellyfin will not serve (404, 400), or answers with a server error however often
    it is retried (a sidecar Jellyfin cannot convert: its SubtitleEncoder throws, and
    Jellyfin.Api/Middleware/ExceptionMiddleware.cs answers 500), is skipped with the
    reason: a subtitle never costs the whole mirror. Other transient errors (no answer
    at all) still end the attempt, retried later.
    """
    kept: list[SubtitleOutput] = []
    skipped: list[SkippedStream] = []
    for sub in plan.subtitles:
        if sub.external:
            try:
                body = fetch(sub.stream_index)
            except PermanentError as error:
                skipped.append(sidecar_not_served(sub, str(error)))
                continue
            except RetriesExhausted as error:
                if error.status is None or error.status < 500:
                    raise
                skipped.append(sidecar_not_served(sub, str(error)))
                continue
            sub.path.parent.mkdir(parents=True, exist_ok=True)
            sub.path.write_bytes(body)
        kept.append(sub)
    return replace(plan, subtitles=tuple(kept), skipped=(*plan.skipped, *skipped))


def sidecar_not_served(sub: SubtitleOutput, error: str) -> SkippedStream:
    """The `skipped_streams` entry of a sidecar subtitle Jellyfin would not serve."""
    return SkippedStream(
        index=sub.stream_index,
        kind="Subtitle",
        codec=sub.source_codec,
        language=sub.language,
        reason=f"sidecar subtitle not served by Jellyfin: {error}",
        path=None,
    )
