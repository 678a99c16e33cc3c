"""Make the stereo tracks once the main run has written their downmixes (two passes).

The source is read once, by the main run, often while it is still downloading: loudness
can only be measured over a whole track, so the main run writes each stereo track's
downmix as lossless FLAC beside the outputs (no second decode of the source, no wait for
the download), and after it this module runs, per stereo track, the measuring pass over
that FLAC (EBU R128 meter) and then loudnorm with the measured values, encoding AAC.
Per hour of film, about 22 CPU-s to measure and 95 to encode (the AAC encoder's own
cost, about 88), besides 23 for the FLAC in the main run (README: A stereo track people
can hear).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress

from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.progress import AbortSignal
from mirror.transcode.command import STEREO_GLOBAL_OPTIONS, build_stereo_command, file_argument
from mirror.transcode.downmix import Loudness, measure_filter, parse_loudness
from mirror.transcode.plan import AudioOutput, TranscodePlan
from mirror.transcode.process import StderrTail, kill_group, spawn


def make_stereo_tracks(plan: TranscodePlan, ffmpeg_path: str, abort: AbortSignal) -> None:
    """Measure and encode every stereo track of `plan`; its downmix is removed after."""
    for track in plan.audio:
        if track.downmix is None:
            continue
        measured = measure_loudness(track, ffmpeg_path, abort)
        argv = build_stereo_command(track, measured, ffmpeg_path, fragmented=plan.fragmented)
        _run(argv, abort, what=f"encoding {track.relative_path}")
        track.downmix.intermediate.unlink(missing_ok=True)
        with suppress(OSError):  # the folder, once its last downmix is gone
            track.downmix.intermediate.parent.rmdir()


def measure_loudness(track: AudioOutput, ffmpeg_path: str, abort: AbortSignal) -> Loudness:
    """The first pass over the track's downmix: the EBU R128 meter's summary on stderr."""
    assert track.downmix is not None
    argv = [
        ffmpeg_path,
        *STEREO_GLOBAL_OPTIONS,
        "-loglevel",
        "info",  # the summary is printed at info level
        "-i",
        file_argument(track.downmix.intermediate),
        "-af",
        measure_filter(),
        "-f",
        "null",
        "-",
    ]
    lines = _run(argv, abort, what=f"measuring the loudness of {track.relative_path}")
    measured = parse_loudness("\n".join(lines))
    if measured is None:
        raise PermanentError(
            f"ffmpeg's ebur128 printed no measurement for {track.relative_path}: "
            + "\n".join(lines[-5:])
        )
    return measured


def _run(argv: Sequence[str], abort: AbortSignal, *, what: str) -> list[str]:
    """Run one short ffmpeg pass to its end (killed on abort); its stderr lines."""
    abort.raise_if_set()
    try:
        process = spawn(argv)
    except OSError as exc:
        raise TransientError(f"cannot start ffmpeg ({argv[0]}): {exc.strerror or exc}") from exc
    assert process.stdout is not None and process.stderr is not None
    stderr = StderrTail(process.stderr)
    stderr.start()
    unregister = abort.on_abort(lambda: kill_group(process))
    with process:
        try:
            process.stdout.read()  # nothing is written there; this waits for the end
            returncode = process.wait()
        finally:
            unregister()
            if process.poll() is None:
                kill_group(process)
            process.wait()
            stderr.join()
    abort.raise_if_set()
    if returncode != 0:
        kind = TransientError if returncode < 0 else PermanentError
        raise kind(f"ffmpeg failed {what} (exit {returncode}): {stderr.text()}")
    return stderr.lines()
