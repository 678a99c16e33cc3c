"""Running ffmpeg as a child that can be killed whole and never outlives the worker.

Three hazards of a long child process, handled here:
- an abort must stop it at once: it runs in its own process group, killed with SIGKILL;
- its stderr pipe must never fill (ffmpeg would block): a thread drains it all the time
  into a bounded ring buffer, whose tail becomes the error message;
- `kill -9` of the worker must not leave an orphan ffmpeg writing files: on Linux a tiny
  exec shim sets PR_SET_PDEATHSIG(SIGKILL) and then execs ffmpeg. The shim is
  util-linux's `setpriv --pdeathsig KILL` plus a one-line `sh` check (about 1 ms) when
  setpriv is there, else a Python one (interpreter start-up: 25-70 ms per run, which is
  a third of a short remux; see bench/transcode.py).
`supervise` and `raise_for_exit` serve every run (the main one and the stereo passes):
progress while it runs, and one error that says whether a retry can help.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from typing import IO

from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.progress import AbortSignal, ProgressCallback
from mirror.transcode.progress_lines import FfmpegProgressParser

# Runs in a fresh interpreter (-I -S: no site, no user paths) between fork and ffmpeg.
# A preexec_fn would do the same without the extra exec, but it is not safe in a process
# with threads (the worker has several). PDEATHSIG survives execve. The getppid check
# closes the race where the worker died before prctl took effect.
_DEATHSIG_SHIM = """\
import ctypes, os, signal, sys
PR_SET_PDEATHSIG = 1
try:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    os._exit(137)
os.execv(sys.argv[2], sys.argv[2:])
"""

# The same check for the setpriv shim, in sh: $PPID is the parent at the time sh started,
# after setpriv set the death signal; "$1" is the worker's pid.
_PARENT_CHECK_SH = 'if [ "$PPID" != "$1" ]; then exit 137; fi; shift; exec "$@"'
_SH = "/bin/sh"

STDERR_TAIL_LINES = 200
_STDERR_LINE_CHARS = 320  # 200 x 320 chars: at most ~64 KiB kept


def deathsig_prefix() -> list[str]:
    """argv prefix that makes the command die with this process (empty off Linux).

    Caveat: the kernel sends PDEATHSIG when the *thread* that forked the child exits, not
    the process. `run_transcode` forks from the job's thread and blocks in that thread
    until ffmpeg is reaped, so the thread always outlives the child.
    """
    if not sys.platform.startswith("linux"):
        return []
    setpriv = _setpriv_with_pdeathsig()
    if setpriv is not None:
        return [
            setpriv,
            "--pdeathsig",
            "KILL",
            "--",
            _SH,
            "-c",
            _PARENT_CHECK_SH,
            "sh",
            str(os.getpid()),
        ]
    if not sys.executable:
        return []
    return [sys.executable, "-I", "-S", "-c", _DEATHSIG_SHIM, str(os.getpid())]


@functools.cache
def _setpriv_with_pdeathsig() -> str | None:
    """util-linux's setpriv if it knows --pdeathsig (2.33+) and /bin/sh exists; else None."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or not os.access(_SH, os.X_OK):
        return None
    try:
        usage = subprocess.run(
            [setpriv, "--help"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return setpriv if "--pdeathsig" in usage else None


def spawn(argv: Sequence[str], *, stdin_pipe: bool = False) -> subprocess.Popen[bytes]:
    """Start argv in its own session (so its own process group) with piped output
    (and input when `stdin_pipe`)."""
    return subprocess.Popen(
        [*deathsig_prefix(), *argv],
        stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole process group; a no-op once the child is reaped."""
    if process.returncode is not None:
        return
    # Already gone: ProcessLookupError (macOS says PermissionError for a zombie group).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


# ffmpeg exits non-zero on these when the machine, not the media, is at fault.
_TRANSIENT_MARKERS = (
    "No space left on device",
    "Cannot allocate memory",
    "Resource temporarily unavailable",
    "Disk quota exceeded",
    # NVENC: no free encoder session (a GeForce caps them; other jobs hold them now).
    "OpenEncodeSessionEx failed",
)


def supervise(
    process: subprocess.Popen[bytes],
    parser: FfmpegProgressParser,
    on_progress: ProgressCallback,
    abort: AbortSignal,
) -> tuple[int, StderrTail]:
    """Feed `process`'s `-progress` lines through `parser` to `on_progress` until ffmpeg
    ends, its stderr drained all the while; the abort kills it. On any way out (a
    callback that raises included) no process is left behind."""
    assert process.stdout is not None and process.stderr is not None
    stderr = StderrTail(process.stderr)
    stderr.start()
    unregister = abort.on_abort(lambda: kill_group(process))
    try:
        for raw in process.stdout:
            progress = parser.feed(raw.decode("utf-8", errors="replace"))
            if progress is not None:
                on_progress(progress)
        return process.wait(), stderr
    finally:
        unregister()
        if process.poll() is None:
            kill_group(process)
        process.wait()
        stderr.join()


def raise_for_exit(returncode: int, stderr: StderrTail, doing: str = "") -> None:
    """Nothing for a clean exit; else TransientError when ffmpeg was killed or the machine
    ran out of something, PermanentError when it rejected the media. `doing` (e.g.
    " measuring audio/1-eng-stereo.m4a") says which run, after "ffmpeg failed"."""
    if returncode == 0:
        return
    tail = stderr.text() or "(no error output)"
    if returncode < 0:
        name = _signal_name(-returncode)
        raise TransientError(f"ffmpeg was killed by {name}{doing}: {tail}")
    if any(marker in tail for marker in _TRANSIENT_MARKERS):
        raise TransientError(f"ffmpeg failed{doing} (exit {returncode}): {tail}")
    raise PermanentError(f"ffmpeg failed{doing} (exit {returncode}): {tail}")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class StderrTail:
    """Drains a pipe on a daemon thread, keeping only the last lines (bounded memory)."""

    def __init__(self, pipe: IO[bytes], *, max_lines: int = STDERR_TAIL_LINES) -> None:
        self._pipe = pipe
        self._lines: deque[str] = deque(maxlen=max_lines)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="ffmpeg-stderr", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float = 5.0) -> None:
        self._thread.join(timeout)

    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)

    def text(self, max_lines: int = 20, max_chars: int = 2000) -> str:
        """The last non-empty lines, newest last, trimmed to `max_chars` from the end."""
        tail = "\n".join(line for line in self.lines()[-max_lines:] if line)
        return tail[-max_chars:]

    def _drain(self) -> None:
        # A length cap per read: one endless line must not grow memory either.
        for raw in iter(lambda: self._pipe.readline(65536), b""):
            line = raw.decode("utf-8", errors="replace").rstrip()
            with self._lock:
                self._lines.append(line[:_STDERR_LINE_CHARS])
