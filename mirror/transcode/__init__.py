"""ffmpeg: probe the file, plan the outputs, build one command, run it, verify the outputs.

`streams`, `plan` (deciding the `outputs`) and `progress_lines` are pure (plain data in,
plain data out); `probe` reads a file with `ffmpeg -i`; `command` builds the argv with
ffmpeg-python; `process` and `runner` own the child process; `verify` reads every output
back before upload.
"""

from mirror.transcode.binary import find_ffmpeg
from mirror.transcode.command import build_command
from mirror.transcode.outputs import (
    AudioOutput,
    OutputFormat,
    SubtitleOutput,
    TranscodePlan,
    VideoOutput,
)
from mirror.transcode.plan import AudioCodecSetting, VideoCodecSetting, plan_transcode
from mirror.transcode.probe import ProbedFile, probe_file
from mirror.transcode.progress_lines import FfmpegProgressParser
from mirror.transcode.runner import run_transcode
from mirror.transcode.verify import VerifiedOutputs, verify_outputs

__all__ = [
    "AudioCodecSetting",
    "AudioOutput",
    "FfmpegProgressParser",
    "OutputFormat",
    "ProbedFile",
    "SubtitleOutput",
    "TranscodePlan",
    "VerifiedOutputs",
    "VideoCodecSetting",
    "VideoOutput",
    "build_command",
    "find_ffmpeg",
    "plan_transcode",
    "probe_file",
    "run_transcode",
    "verify_outputs",
]
