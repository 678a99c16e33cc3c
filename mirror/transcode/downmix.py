"""The stereo track's sound: a centre-weighted downmix, loudness-normalised (EBU R128).

Why centre-weighted: film mixes put dialogue in the centre channel and music and effects
in the others. The usual fold-down (ITU-R BS.775, ffmpeg's `-ac 2`) takes the centre at
-3 dB against the fronts, so on a TV or a laptop the voices drown (Jellyfin's issues
#1986, #11907, #13214; its answer is a choice of pan matrices, DownMixStereoAlgorithms,
whose "NightmodeDialogue" keeps the centre at full and the rest at 0.3). Here the centre
is at full, the fronts at -3 dB and the surrounds at -6 dB: dialogue sits 3 dB above the
fronts (6 dB more than the plain fold-down) while music and effects stay well audible,
milder than night mode. The LFE is left out, as every stereo fold-down does.
The coefficients are scaled so each output's sum is 1: the downmix never clips, whatever
the source, and the loudness normalisation sets the level afterwards anyway.

Loudness: two passes. The first measures the downmix with ffmpeg's EBU R128 meter
(integrated loudness, its gate, loudness range, true peak: loudnorm's `measured_*`);
the second is `loudnorm` given those values, which applies one gain to reach the
target (MIRROR_STEREO_LOUDNESS, EBU R128's -23 LUFS by default) when the true peak
allows it, keeping the film's dynamics. When the gain would push the true peak over
TRUE_PEAK_DBTP, loudnorm's dynamic mode (a gentle compressor and a true-peak limiter)
takes over. Pure: filter strings in, numbers out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# Layout every multichannel source is brought to before the pan: ffmpeg's resampler
# maps side channels to back ones (AC-3 and DTS decode to `5.1(side)`), folds 7.1's four
# surrounds into two and gives layouts without a centre a silent one.
DOWNMIX_FROM = "5.1"
CENTRE, FRONT, SURROUND = 1.0, 10 ** (-3 / 20), 10 ** (-6 / 20)
_SUM = CENTRE + FRONT + SURROUND
# EBU R128 allows -1 dBTP; lossy coding adds overshoots, so R128 s1 / Tech 3343 advise
# leaving more room for AAC: -2 dBTP (loudnorm's own default).
TRUE_PEAK_DBTP = -2.0
# loudnorm keeps a linear gain only while the measured range fits its LRA target (1-50):
# the target is the film's own range, at least EBU R128 s1's 7 LU for broadcast.
_MIN_LRA, _MAX_LRA = 7.0, 50.0
# loudnorm works at 192 kHz (true peak); the track goes back to 48 kHz, AAC's usual rate.
OUTPUT_RATE = 48_000
# Below this the track is silence (EBU R128's absolute gate is -70 LUFS): no gain.
_SILENT_LUFS = -70.0


def pan_filter() -> str:
    """The centre-weighted pan from 5.1 to stereo (channel names: FC centre, BL/BR back)."""
    centre, front, surround = (round(value / _SUM, 4) for value in (CENTRE, FRONT, SURROUND))
    return (
        f"pan=stereo|FL={centre}*FC+{front}*FL+{surround}*BL"
        f"|FR={centre}*FC+{front}*FR+{surround}*BR"
    )


def downmix_filters() -> tuple[str, ...]:
    """The filters that turn a multichannel track into the stereo downmix."""
    return (f"aformat=channel_layouts={DOWNMIX_FROM}", pan_filter())


@dataclass(frozen=True, slots=True)
class Loudness:
    """The first pass's EBU R128 measurement of the downmix: what loudnorm's second pass
    takes as `measured_I`, `measured_TP`, `measured_LRA` and `measured_thresh`."""

    integrated_lufs: float
    true_peak_dbtp: float
    range_lu: float
    threshold_lufs: float

    @property
    def silent(self) -> bool:
        return not math.isfinite(self.integrated_lufs) or self.integrated_lufs <= _SILENT_LUFS


def measure_filter() -> str:
    """The first pass: ffmpeg's EBU R128 meter with true peaks (its summary ends the log).

    The same measurements loudnorm's own first pass makes (integrated loudness and its
    gate, loudness range, true peak), at a seventh of the cost: loudnorm also renders its
    dynamic-mode output at 192 kHz while it measures (10 min of stereo: 28 CPU-s against
    4.2 with the meter, bench/stereo.py).
    """
    return "ebur128=peak=true:framelog=quiet"


def normalise_filters(target_lufs: float, measured: Loudness) -> tuple[str, ...]:
    """The second pass: one gain to `target_lufs` from the measurement, back at 48 kHz
    stereo. A silent track gets no gain (nothing to measure)."""
    if measured.silent:
        return (f"aformat=sample_rates={OUTPUT_RATE}:channel_layouts=stereo",)
    target_lra = min(_MAX_LRA, max(_MIN_LRA, math.ceil(measured.range_lu)))
    loudnorm = ":".join(
        [
            f"loudnorm=I={target_lufs}",
            f"TP={TRUE_PEAK_DBTP}",
            f"LRA={target_lra}",
            f"measured_I={_clamp(measured.integrated_lufs, -99.0, 0.0)}",
            f"measured_TP={_clamp(measured.true_peak_dbtp, -99.0, 99.0)}",
            # 0 would read as "not measured" and switch loudnorm to its dynamic mode.
            f"measured_LRA={_clamp(measured.range_lu, 0.01, 99.0)}",
            f"measured_thresh={_clamp(measured.threshold_lufs, -99.0, 0.0)}",
            "linear=true",
            "print_format=none",
        ]
    )
    return (loudnorm, f"aresample={OUTPUT_RATE}", "aformat=channel_layouts=stereo")


def parse_loudness(log: str) -> Loudness | None:
    """The meter's summary in ffmpeg's log (stderr), None when there is none."""
    _, found, summary = log.rpartition("Summary:")
    if not found:
        return None
    facts = []
    for pattern in (_INTEGRATED, _GATE, _RANGE, _PEAK):
        match = pattern.search(summary)
        if match is None:
            return None
        facts.append(float(match.group(1)))
    integrated, gate, loudness_range, peak = facts
    return Loudness(integrated, peak, loudness_range, gate)


_NUMBER = r"(-?(?:inf|nan|\d+(?:\.\d+)?))"
_INTEGRATED = re.compile(rf"\bI:\s+{_NUMBER} LUFS")
_GATE = re.compile(rf"Threshold:\s+{_NUMBER} LUFS")  # the first: the integrated one's
_RANGE = re.compile(rf"\bLRA:\s+{_NUMBER} LU\b")
_PEAK = re.compile(rf"Peak:\s+{_NUMBER} dBFS")


def _clamp(value: float, low: float, high: float) -> float:
    if not math.isfinite(value):
        return low if value < 0 else high
    return round(min(high, max(low, value)), 2)
