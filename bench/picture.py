"""Picture benchmark: the tone-map and deinterlace re-encodes, ours vs bare ffmpeg.

Inputs (made once by mirror.testing.picture_samples into bench/data/picture/, kept):
- HDR10: HEVC Main 10 640x360 25 fps, BT.2020 / PQ with mastering metadata, 20 s
  (quick: 5 s); planned under `auto`: zscale + tonemap (mobius) to BT.709, libx264;
- interlaced: DVD-style MPEG-2 720x576 25i top field first, SAR 16:15, mp2 audio,
  20 s (quick: 5 s); planned under `auto`: bwdif, scale to 768x576 square pixels,
  BT.601 -> BT.709 (zscale), libx264, audio to AAC.
Each plan (format hls, preset veryfast, crf 23) runs as
- ours: run_transcode(plan, ffmpeg, heartbeat, abort) with a real Heartbeat (in-memory
  store), as bench/transcode.py does;
- peer: build_command(plan)'s argv (the SAME filters and arguments) with subprocess.run.
Warm-up, then 5 rounds (quick: 1) alternating which goes first. Prints the median wall
times and ours/bare per case (target <= 1.03x, as the other transcode figures), and the
median CPU seconds (ffmpeg's, plus this process's for ours: the heartbeat, progress and
stderr threads), which other load on the machine disturbs far less than wall time; the
LAST line is the worse of the two wall-time ratios.
Usage: python bench/picture.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import resource
import shutil
from collections.abc import Callable
from pathlib import Path

import harness
from transcode import run_bare, run_ours

from mirror.demo.media import SampleMedia
from mirror.testing import picture_samples
from mirror.transcode import TranscodePlan, plan_transcode, probe_file

ITEM_ID = "5c0ffee0d1e2f3a4b5c6d7e8f9a0b1c2"


def _sample(name: str, make: Callable[..., SampleMedia], seconds: int, ffmpeg: str) -> SampleMedia:
    """Made fresh each run (a few seconds with x265 ultrafast): the facts stay true."""
    folder = harness.data_dir("picture")
    return make(folder / f"{name}-{seconds}s", duration_s=float(seconds), ffmpeg_path=ffmpeg)


def _plan(sample: SampleMedia, work: Path, ffmpeg: str) -> TranscodePlan:
    # Planned from a probe of the file, as the pipeline plans (the SAR comes from it).
    probe = probe_file(sample.path, ffmpeg)
    plan = plan_transcode(
        sample.to_item(ITEM_ID), work, sample.path, probe=probe, output_format="hls"
    )
    assert plan.video.codec == "libx264" and plan.video.filters, plan.video
    return plan


def _measure(
    label: str, plan: TranscodePlan, ffmpeg: str, rounds: int
) -> tuple[harness.Rounds, dict[str, list[float]]]:
    """Wall times of ours and bare, alternating, and the CPU seconds of each run."""
    cpu: dict[str, list[float]] = {"ours": [], "bare": []}
    result = harness.alternate(
        lambda: _with_cpu(cpu["ours"], lambda: run_ours(plan, ffmpeg)),
        lambda: _with_cpu(cpu["bare"], lambda: run_bare(plan, ffmpeg)),
        rounds=rounds,
        label=label,
    )
    return result, cpu


def _with_cpu(record: list[float], run: Callable[[], float]) -> float:
    """`run`'s wall seconds; its CPU seconds (children and this process) go to `record`."""
    before = _cpu_seconds()
    seconds = run()
    record.append(_cpu_seconds() - before)
    return seconds


def _cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    return children.ru_utime + children.ru_stime + own.ru_utime + own.ru_stime


def main() -> None:
    quick = harness.quick_mode()
    ffmpeg = shutil.which(harness.ffmpeg_binary()) or harness.ffmpeg_binary()
    seconds = 5 if quick else 20
    rounds = 1 if quick else 5
    cases = {
        "tone-map (HDR10 640x360)": _sample("hdr10", picture_samples.hdr10_hevc, seconds, ffmpeg),
        "deinterlace (MPEG-2 720x576i)": _sample(
            "dvd", picture_samples.interlaced_mpeg2, seconds, ffmpeg
        ),
    }
    work = harness.data_dir("picture", "work")
    ratios = []
    lines = []
    for label, sample in cases.items():
        plan = _plan(sample, work / label.split()[0], ffmpeg)
        result, cpu = _measure(label, plan, ffmpeg, rounds)
        ours, bare = harness.median(result.ours), harness.median(result.peer)
        ours_cpu, bare_cpu = harness.median(cpu["ours"]), harness.median(cpu["bare"])
        ratios.append(ours / bare)
        lines.append(
            f"{label}, {seconds} s: ours {ours:.2f} s, bare ffmpeg {bare:.2f} s "
            f"(medians of {len(result.ours)}); -vf {','.join(plan.video.filters)}"
        )
        lines.append(
            f"{label} CPU: ours {ours_cpu:.2f} s, bare {bare_cpu:.2f} s, "
            f"ratio {ours_cpu / bare_cpu:.3f}x"
        )
        lines.append(
            harness.ratio_line(f"{label} ours/bare", ours / bare, "<= 1.03x", ours / bare <= 1.03)
        )
    harness.fresh_file(work)
    print(f"load: {harness.machine_load()}")
    for line in lines:
        print(line)
    worst = max(ratios)
    print(
        harness.ratio_line("picture re-encodes, worst ours/bare", worst, "<= 1.03x", worst <= 1.03)
    )


if __name__ == "__main__":
    main()
