"""Issue 23 point 2: beside a 5.1 track, a stereo track people can hear.

The source is a 5.1 mix whose dialogue (the centre) is quiet, as film mixes often are:
each channel group carries its own tone, so the mirrored stereo track can be read back
band by band. The stereo track must reach the configured loudness (EBU R128, measured
with ffmpeg's ebur128 filter) within 1 LU, carry the centre well above where a plain
fold-down (`-ac 2`) puts it, and be the master's DEFAULT audio rendition.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia, probe_duration, run_ffmpeg
from mirror.domain.item import MediaStream
from mirror.domain.progress import AbortSignal, Progress
from mirror.hls import package_hls
from mirror.transcode import plan_transcode, probe_file, run_transcode, verify_outputs
from mirror.transcode.downmix import Loudness, normalise_filters, parse_loudness

TARGET_LUFS = -20.0  # not the default: the setting must be what decides
# The tones: fronts "music" at 250 Hz, centre "dialogue" at 1 kHz (quiet), LFE at 60 Hz,
# surrounds "effects" at 4 kHz. Volumes are amplitudes on top of sine's own 1/8.
_FRONT_HZ, _CENTRE_HZ, _SURROUND_HZ = 250, 1000, 4000


def _quiet_centre_51(dest: Path, ffmpeg: str, duration_s: float = 4.0) -> SampleMedia:
    def tone(hz: int, volume: float) -> list[str]:
        source = f"sine=f={hz}:r=48000:d={duration_s},volume={volume}"
        return ["-f", "lavfi", "-i", source]

    argv = [ffmpeg, "-nostdin", "-loglevel", "error", "-y"]
    argv += ["-f", "lavfi", "-i", f"color=c=gray:s=64x48:r=10:d={duration_s}"]
    argv += tone(_FRONT_HZ, 2.0) + tone(_CENTRE_HZ, 0.5) + tone(60, 1.0) + tone(_SURROUND_HZ, 1.0)
    graph = (
        "[1]asplit[fl][fr];[4]asplit[sl][sr];[fl][fr][2][3][sl][sr]join=inputs=6"
        ":channel_layout=5.1(side):map=0.0-FL|1.0-FR|2.0-FC|3.0-LFE|4.0-SL|5.0-SR[a]"
    )
    argv += ["-filter_complex", graph, "-map", "0:v", "-map", "[a]"]
    argv += ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"]
    argv += ["-c:a", "pcm_s16le", "-metadata:s:a:0", "language=eng", str(dest)]
    run_ffmpeg(argv)
    streams = (
        MediaStream(index=0, type="Video", codec="h264", width=64, height=48, frame_rate=10.0),
        MediaStream(index=1, type="Audio", codec="pcm_s16le", language="eng", channels=6,
                    is_default=True),
    )  # fmt: skip
    duration = probe_duration(dest, ffmpeg) or duration_s
    return SampleMedia(dest, streams, duration, "mkv", dest.stat().st_size)


def _log_of(argv: list[str]) -> str:
    """ffmpeg's log (stderr) of a run that must succeed."""
    result = subprocess.run(argv, capture_output=True, text=True, check=True)
    return result.stderr


def _integrated_lufs(ffmpeg: str, path: Path) -> float:
    null = ["-f", "null", "-"]
    log = _log_of(
        [ffmpeg, "-nostdin", "-hide_banner", "-nostats", "-i", str(path), "-af", "ebur128", *null]
    )
    summary = log.split("Summary:")[-1]
    return float(re.search(r"I:\s+(-?[\d.]+) LUFS", summary).group(1))  # type: ignore[union-attr]


def _band_db(ffmpeg: str, path: Path, hz: int) -> float:
    """The mean level of `path` in a narrow band around `hz` (both channels mixed)."""
    log = _log_of(
        [ffmpeg, "-nostdin", "-hide_banner", "-nostats", "-i", str(path), "-af",
         f"pan=mono|c0=0.5*c0+0.5*c1,bandpass=f={hz}:t=q:w=8,volumedetect", "-f", "null", "-"]
    )  # fmt: skip
    return float(re.search(r"mean_volume: (-?[\d.]+) dB", log).group(1))  # type: ignore[union-attr]


def test_stereo_track_is_centre_weighted_at_the_loudness_target_and_default(
    tmp_path: Path, ffmpeg_path: str
) -> None:
    sample = _quiet_centre_51(tmp_path / "quiet-centre.mkv", ffmpeg_path)
    probe = probe_file(sample.path, ffmpeg_path)
    out = tmp_path / "out"
    plan = plan_transcode(
        sample.to_item("c" * 32), out, sample.path, probe=probe, output_format="hls",
        stereo_loudness=TARGET_LUFS,
    )  # fmt: skip
    assert [track.relative_path for track in plan.audio] == [
        "audio/1-eng.m4a",
        "audio/1-eng-stereo.m4a",
    ]
    heard: list[Progress] = []
    run_transcode(plan, ffmpeg_path, heard.append, AbortSignal())
    # The passes after the main run report progress (the stall watchdog sees it move).
    notes = [progress.note for progress in heard if progress.note]
    assert any("audio/1-eng-stereo.m4a: measuring loudness" in note for note in notes), notes
    assert notes[-1] == "stereo track audio/1-eng-stereo.m4a: encoding 100%", notes
    verified = verify_outputs(plan, ffmpeg_path)
    surround, stereo = plan.audio
    assert [track.duration_s for track in verified.audio] == pytest.approx(
        [sample.duration_s] * 2, abs=0.1
    )
    assert not (out / "downmix" / "1.flac").exists()  # the downmix is not left behind

    # Loudness: EBU R128 integrated, within 1 LU of the target.
    assert _integrated_lufs(ffmpeg_path, stereo.path) == pytest.approx(TARGET_LUFS, abs=1.0)

    # Dialogue: the centre against the fronts, ours vs ffmpeg's plain fold-down.
    plain = tmp_path / "plain.m4a"
    run_ffmpeg(
        [ffmpeg_path, "-nostdin", "-loglevel", "error", "-y", "-i", str(sample.path), "-map",
         "0:a:0", "-ac", "2", "-c:a", "aac", str(plain)]
    )  # fmt: skip

    def dialogue_lead(path: Path) -> float:
        centre = _band_db(ffmpeg_path, path, _CENTRE_HZ)
        return centre - _band_db(ffmpeg_path, path, _FRONT_HZ)

    lift = dialogue_lead(stereo.path) - dialogue_lead(plain)
    assert lift >= 5.0, lift  # +6 dB by the matrix (centre 0 dB, fronts -3 dB vs ITU's -3/0)

    # The master: the stereo track is the default; the 5.1 stays, marked by its CHANNELS.
    package = package_hls(plan, width=64, height=48)
    media = [line for line in package.master.path.read_text().splitlines() if "TYPE=AUDIO" in line]
    assert len(media) == 2
    assert 'CHANNELS="6"' in media[0] and "DEFAULT=NO" in media[0]
    assert 'CHANNELS="2"' in media[1] and "DEFAULT=YES" in media[1]
    assert 'NAME="eng (stereo)"' in media[1]
    assert surround.is_default is False


def test_meter_summary_is_read_and_turned_into_a_linear_loudnorm_pass() -> None:
    log = """[Parsed_ebur128_0 @ 0x55] Summary:

  Integrated loudness:
    I:         -31.4 LUFS
    Threshold: -41.9 LUFS

  Loudness range:
    LRA:        14.3 LU
    Threshold: -52.0 LUFS
    LRA low:   -40.1 LUFS
    LRA high:  -25.8 LUFS

  True peak:
    Peak:      -12.0 dBFS
[out#0/null @ 0x56] video:0KiB audio:4500KiB"""
    measured = parse_loudness(log)
    assert measured == Loudness(-31.4, -12.0, 14.3, -41.9)
    loudnorm, *rest = normalise_filters(-23.0, measured)
    assert "measured_I=-31.4" in loudnorm and "measured_thresh=-41.9" in loudnorm
    assert "linear=true" in loudnorm
    assert "LRA=15" in loudnorm  # the film's own range: kept linear when the peak allows
    assert rest == ["aresample=48000", "aformat=channel_layouts=stereo"]
    silence = log.replace("-31.4 LUFS", "-70.0 LUFS").replace("-12.0 dBFS", "-inf dBFS")
    silent = parse_loudness(silence)
    assert silent is not None and silent.silent
    assert normalise_filters(-23.0, silent) == (
        "aformat=sample_rates=48000:channel_layouts=stereo",
    )
    assert parse_loudness("no summary here") is None
