"""Stereo track benchmark: what the stereo track beside a 5.1 one costs, in CPU seconds.

Input (made fresh in bench/data/stereo/): 10 minutes (quick: 1) of 5.1 AC-3 at 448k,
pink noise with a level per channel (the worst case for FLAC; film audio packs smaller).
Each step runs the exact ffmpeg arguments mirror uses, timed by the CPU its ffmpeg
child used (getrusage of children: other load on the machine disturbs it far less than
wall time), one round each:
- downmix: the main run's extra output, the centre-weighted downmix to 24-bit FLAC
  (here alone; in a job it shares the main run's decode of the source);
- measure: pass 1, ffmpeg's R128 meter with true peak (what mirror runs);
- measure with loudnorm: loudnorm's own first pass, for comparison (not run by mirror);
- encode: pass 2, loudnorm with the measured values, then AAC (mirror.transcode.stereo);
- AAC alone: the same AAC encode without loudnorm, for scale;
- 5.1 AAC: the multichannel track itself as mirror re-encodes it, for scale.
Prints a table, then the FLAC's size, and last the stereo track's CPU per hour of audio
(downmix + measure + encode). No target: the figure is the cost README states.
Usage: python bench/stereo.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import resource
import shutil
import subprocess

import harness

from mirror.domain.item import MediaItem, MediaStream
from mirror.transcode import find_ffmpeg, plan_transcode
from mirror.transcode.command import STEREO_GLOBAL_OPTIONS, build_stereo_command, file_argument
from mirror.transcode.downmix import downmix_filters, measure_filter, parse_loudness

_CHANNELS = "c0=c0|c1=0.9*c0|c2=0.5*c0|c3=0.2*c0|c4=0.3*c0|c5=0.25*c0"


def cpu_of(argv: list[str]) -> tuple[float, str]:
    """CPU seconds (user + system) of one ffmpeg run, and its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, done.stderr


def main() -> None:
    minutes = 1 if harness.quick_mode() else 10
    ffmpeg = find_ffmpeg(None)
    folder = harness.data_dir("stereo")
    shutil.rmtree(folder / "out", ignore_errors=True)
    source = folder / "surround.mkv"
    quiet = [ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-y"]
    subprocess.run(
        [*quiet, "-f", "lavfi", "-i", f"anoisesrc=d={minutes * 60}:c=pink:r=48000:a=0.3",
         "-af", f"pan=5.1|{_CHANNELS}", "-c:a", "ac3", "-b:a", "448k", str(source)],
        check=True,
    )  # fmt: skip
    item = MediaItem(
        id="5" * 32, name="Stereo", type="Movie", container="mkv", size=source.stat().st_size,
        duration_s=minutes * 60.0,
        streams=(MediaStream(index=0, type="Video", codec="h264"),
                 MediaStream(index=1, type="Audio", codec="ac3", language="eng", channels=6)),
    )  # fmt: skip
    plan = plan_transcode(item, folder / "out", source, output_format="hls", stereo_loudness=-23.0)
    surround, stereo = plan.audio
    assert stereo.downmix is not None
    flac = stereo.downmix.intermediate
    flac.parent.mkdir(parents=True, exist_ok=True)
    stereo.path.parent.mkdir(parents=True, exist_ok=True)
    reading = [*quiet, "-i", str(source), "-map", "0:a:0"]
    rows: list[tuple[str, float]] = []

    chain = ",".join(["aresample=async=1:first_pts=0", *downmix_filters()])
    rows.append(("downmix to FLAC (main run's extra output)", cpu_of(
        [*reading, "-af", chain, "-c:a", "flac", "-sample_fmt", "s32", str(flac)])[0]))  # fmt: skip
    meter = [ffmpeg, *STEREO_GLOBAL_OPTIONS, "-loglevel", "info", "-i", file_argument(flac)]
    used, log = cpu_of([*meter, "-af", measure_filter(), "-f", "null", "-"])
    rows.append(("pass 1: R128 meter, true peak", used))
    loudnorm = "loudnorm=I=-23:TP=-2:LRA=7:print_format=json"
    rows.append(("(loudnorm's own measuring pass)", cpu_of(
        [*meter, "-af", loudnorm, "-f", "null", "-"])[0]))  # fmt: skip
    measured = parse_loudness(log)
    assert measured is not None, log[-500:]
    rows.append(("pass 2: loudnorm + AAC", cpu_of(
        build_stereo_command(stereo, measured, ffmpeg, fragmented=True))[0]))  # fmt: skip
    rows.append(("(AAC alone, stereo)", cpu_of(
        [*quiet, "-i", str(flac), "-c:a", "aac", "-b:a", "160k", "-f", "mp4",
         str(folder / "out" / "plain.m4a")])[0]))  # fmt: skip
    to_51 = f"aresample=async=1:first_pts=0,aformat=channel_layouts={surround.layout}"
    rows.append(("(the 5.1 AAC track, for scale)", cpu_of(
        [*reading, "-af", to_51, "-c:a", "aac", "-b:a", "160k", "-f", "mp4",
         str(surround.path)])[0]))  # fmt: skip

    print(f"{minutes} min of 5.1 AC-3 (pink noise), {ffmpeg}")
    print(f"{'step':<45} {'CPU s':>7} {'per hour':>9}")
    for name, seconds in rows:
        print(f"{name:<45} {seconds:7.2f} {seconds * 60 / minutes:9.1f}")
    size_mb = flac.stat().st_size / 1e6
    print(f"FLAC downmix: {size_mb:.1f} MB ({size_mb * 8 / (minutes * 60):.2f} Mbit/s)")
    ours = rows[0][1] + rows[1][1] + rows[3][1]
    print(f"stereo track per hour of audio: {ours * 60 / minutes:.0f} CPU-s")


if __name__ == "__main__":
    main()
