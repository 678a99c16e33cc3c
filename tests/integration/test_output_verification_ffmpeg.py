"""Verification with the real ffmpeg: outputs read back in one run, a broken one named."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia, corrupt_copy
from mirror.domain.errors import PermanentError
from mirror.domain.progress import AbortSignal
from mirror.transcode import plan_transcode, probe_file, run_transcode, verify_outputs


def test_outputs_of_a_remux_verify_with_their_facts(
    sample_h264_aac: SampleMedia, tmp_path: Path, ffmpeg_path: str
) -> None:
    probe = probe_file(sample_h264_aac.path, ffmpeg_path)
    plan = plan_transcode(
        sample_h264_aac.to_item("a" * 32), tmp_path, sample_h264_aac.path, probe=probe
    )
    run_transcode(plan, ffmpeg_path, lambda progress: None, AbortSignal())

    verified = verify_outputs(plan, ffmpeg_path)

    assert (verified.video.codec, verified.video.width, verified.video.height) == ("h264", 320, 240)
    assert [a.codec for a in verified.audio] == ["aac", "aac"]
    for output in (verified.video, *verified.audio):
        assert output.duration_s == pytest.approx(4.0, abs=0.2)

    corrupt_copy(plan.audio[1].path, plan.audio[1].path)
    with pytest.raises(PermanentError, match=r"ffmpeg failed to read 2-fra\.m4a"):
        verify_outputs(plan, ffmpeg_path)
