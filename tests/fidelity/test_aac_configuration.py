"""Issue 19 point 1: multichannel AAC must name a standard channel configuration, and
verification reads it from the output itself, so a file browsers refuse never goes up."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia, run_ffmpeg
from mirror.domain.errors import PermanentError
from mirror.domain.progress import AbortSignal
from mirror.transcode import plan_transcode, probe_file, run_transcode, verify_outputs
from mirror.transcode.audio_config import AudioConfig, audio_config, channels, read_moov


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (bytes.fromhex("1190"), (2, 2, 2)),  # AAC LC, 48 kHz, stereo
        (bytes.fromhex("11b0"), (2, 6, 6)),  # AAC LC, 48 kHz, 5.1
        (bytes.fromhex("1180"), (2, 0, None)),  # configuration 0: a PCE follows
        (bytes.fromhex("13880a"), (2, 1, 1)),  # AAC LC, 22.05 kHz (index 6), mono
        (bytes.fromhex("f81e01770040"), (32, 2, 2)),  # escaped object type 32, explicit rate
    ],
)
def test_audio_specific_config_fields(config: bytes, expected: tuple[int, int, int | None]) -> None:
    parsed = AudioConfig.parse(config)

    assert (parsed.audio_object_type, parsed.channel_configuration, parsed.channels) == expected


def test_verification_refuses_5_1_aac_with_channel_configuration_0(
    fidelity_sample: Callable[[str], SampleMedia], tmp_path: Path, ffmpeg_path: str
) -> None:
    sample = fidelity_sample("b_frames_ac3_51")
    probe = probe_file(sample.path, ffmpeg_path)
    plan = plan_transcode(
        sample.to_item("a" * 32), tmp_path, sample.path, probe=probe, output_format="hls"
    )
    run_transcode(plan, ffmpeg_path, lambda progress: None, AbortSignal())
    (track,) = plan.audio
    moov = read_moov(track.path)
    assert (audio_config(moov), channels(moov)) == (AudioConfig(2, 6), 6)
    verify_outputs(plan, ffmpeg_path)  # mirror's own output passes

    # The track as ffmpeg encodes AC-3 5.1 without a layout: 5.1(side) -> configuration 0.
    run_ffmpeg([
        ffmpeg_path, "-nostdin", "-loglevel", "error", "-y", "-i", str(sample.path),
        "-map", "0:a:0", "-c:a", "aac", "-f", "mp4",
        "-movflags", "+frag_keyframe+empty_moov+default_base_moof", str(track.path),
    ])  # fmt: skip
    assert audio_config(read_moov(track.path)) == AudioConfig(2, 0)
    with pytest.raises(PermanentError, match=r"1-eng\.m4a holds 6-channel AAC without a standard"):
        verify_outputs(plan, ffmpeg_path)
