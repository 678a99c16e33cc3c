"""Which video encoder this worker uses: MIRROR_VIDEO_ENCODER, `auto` probed once at start.

`auto` asks the ffmpeg build which H.264 encoders it has (`ffmpeg -encoders`), skips
those whose device is not there (no `/dev/dri/renderD*` for VAAPI and QSV, no
`/dev/nvidiactl` for NVENC: a container started without the compose override), and
makes a tiny test encode (a fraction of a second of lavfi test picture through the same
options a job uses) with each remaining one, NVENC first, then QSV, then VAAPI; the
first that succeeds is used, otherwise libx264. A build can list an encoder whose
driver or GPU is missing, so only the test encode tells. An explicit choice is tested
the same way and stops start-up with one line when it fails: asked-for hardware that is
not there is a configuration error, not something to paper over with software.
"""

from __future__ import annotations

import glob
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mirror.domain.errors import ConfigError
from mirror.transcode.encoders import (
    HARDWARE_ENCODERS,
    SOFTWARE_ENCODER,
    VideoEncoder,
    VideoEncoderSetting,
    VideoQuality,
    encoder_options,
)

TEST_ENCODE_TIMEOUT_S = 30.0
# 8 frames of 256x144: enough for an encoder to open its session and emit a frame.
_TEST_SOURCE = "testsrc2=size=256x144:rate=25:duration=0.32"
_NVIDIA_DEVICE = "/dev/nvidiactl"
_RENDER_NODES = "/dev/dri/renderD*"

# Runs argv, returns (exit code, stderr); a test seam over subprocess.
Runner = Callable[[Sequence[str]], tuple[int, str]]


@dataclass(frozen=True, slots=True)
class EncoderChoice:
    """The encoder this worker uses, its device (VAAPI's render node) and why."""

    encoder: VideoEncoder
    device: str | None = None
    reason: str = ""

    def describe(self) -> str:
        where = f" on {self.device}" if self.device else ""
        return f"{self.encoder}{where} ({self.reason})" if self.reason else self.encoder + where


def choose_video_encoder(
    setting: VideoEncoderSetting,
    ffmpeg_path: str,
    *,
    run: Runner | None = None,
    render_nodes: Sequence[str] | None = None,
    nvidia_present: bool | None = None,
) -> EncoderChoice:
    """The encoder for `setting` (see the module docstring); ConfigError when an explicitly
    chosen hardware encoder fails its test encode. The seams default to the real machine."""
    run = run or _run
    nodes = sorted(glob.glob(_RENDER_NODES)) if render_nodes is None else list(render_nodes)
    nvidia = os.path.exists(_NVIDIA_DEVICE) if nvidia_present is None else nvidia_present
    if setting == SOFTWARE_ENCODER:
        return EncoderChoice(SOFTWARE_ENCODER, reason="MIRROR_VIDEO_ENCODER=libx264")
    built = listed_encoders(ffmpeg_path, run)
    if setting != "auto":
        if setting not in built:
            raise ConfigError(
                f"MIRROR_VIDEO_ENCODER={setting}: this ffmpeg ({ffmpeg_path}) has no {setting} "
                "encoder (use auto or libx264, or an ffmpeg built with it)"
            )
        device = nodes[0] if nodes and setting == "h264_vaapi" else None
        problem = test_encode(setting, ffmpeg_path, run, device=device)
        if problem is not None:
            raise ConfigError(f"MIRROR_VIDEO_ENCODER={setting}: the test encode failed: {problem}")
        return EncoderChoice(setting, device, reason="MIRROR_VIDEO_ENCODER, test encode passed")
    tried: list[str] = []
    for encoder in HARDWARE_ENCODERS:
        if encoder not in built:
            continue
        has_device = nvidia if encoder == "h264_nvenc" else bool(nodes)
        if not has_device:
            tried.append(f"{encoder}: no device")
            continue
        device = nodes[0] if encoder == "h264_vaapi" else None
        problem = test_encode(encoder, ffmpeg_path, run, device=device)
        if problem is None:
            return EncoderChoice(encoder, device, reason="auto: test encode passed")
        tried.append(f"{encoder}: {problem}")
    found = "; ".join(tried) if tried else "this ffmpeg has no hardware H.264 encoder"
    return EncoderChoice(SOFTWARE_ENCODER, reason=f"auto: {found}")


def listed_encoders(ffmpeg_path: str, run: Runner) -> frozenset[str]:
    """The encoder names `ffmpeg -encoders` lists (empty when it cannot say)."""
    code, text = run([ffmpeg_path, "-hide_banner", "-encoders"])
    return parse_encoders(text) if code == 0 else frozenset()


def parse_encoders(text: str) -> frozenset[str]:
    """Names from `ffmpeg -encoders`: lines of six flag columns, the name, a description."""
    names = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and len(parts[0]) == 6 and parts[0][0] in "VAS" and parts[1] != "=":
            names.add(parts[1])
    return frozenset(names)


def test_encode(
    encoder: VideoEncoder, ffmpeg_path: str, run: Runner, *, device: str | None = None
) -> str | None:
    """None when `encoder` encodes a few test frames with a job's options, else why not
    (the first line of ffmpeg's that says so: later ones tend to be consequences)."""
    options = encoder_options(encoder, VideoQuality(), device=device)
    argv = [ffmpeg_path, "-hide_banner", "-nostdin", "-loglevel", "error"]
    argv += [*options.global_options, "-f", "lavfi", "-i", _TEST_SOURCE]
    for name, value in options.output_with_filters().items():
        argv += [f"-{name}", str(value)]
    argv += ["-f", "null", "-"]
    code, stderr = run(argv)
    if code == 0:
        return None
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    telling = [line for line in lines if any(word in line.lower() for word in _FAILURE_WORDS)]
    return (telling or lines or [f"exit {code}"])[0][:200]


_FAILURE_WORDS = ("error", "fail", "cannot", "could not", "unable", "invalid", "no device")


def _run(argv: Sequence[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TEST_ENCODE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return 124, f"no answer within {TEST_ENCODE_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return 127, str(exc.strerror or exc)
    return done.returncode, done.stderr + done.stdout
