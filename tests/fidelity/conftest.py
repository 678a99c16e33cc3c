"""The fidelity corpus, made once per run (mirror.testing.fidelity_samples)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mirror.demo.media import SampleMedia
from mirror.testing import fidelity_samples
from tests.fixtures.media import shared

_SHAPES: dict[str, Callable[..., SampleMedia]] = {
    "b_frames_aac": fidelity_samples.h264_b_frames_aac,
    "b_frames_ac3_51": fidelity_samples.h264_b_frames_ac3_51,
    "delayed_audio": fidelity_samples.delayed_audio,
    "surround_71": fidelity_samples.surround_71,
}


@pytest.fixture(scope="session")
def fidelity_sample(
    tmp_path_factory: pytest.TempPathFactory, ffmpeg_path: str
) -> Callable[[str], SampleMedia]:
    """`fidelity_sample(name)`: that shape's sample, generated on first use."""

    def make(name: str) -> SampleMedia:
        generate = _SHAPES[name]
        return shared(
            tmp_path_factory,
            f"fidelity-{name}",
            lambda folder: generate(folder / f"fidelity-{name}.mkv", ffmpeg_path=ffmpeg_path),
        )

    return make
