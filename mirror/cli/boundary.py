"""How the `mirror` command ends on an error: one line on stderr and an exit code.

Every line passes through the redaction step, so a message that quotes a secret (a
library's, or a URL's) still never prints it. An unexpected exception is a bug or an
unforeseen failure: one line too, with its traceback only when asked for (--debug).
"""

from __future__ import annotations

import sys
import traceback
from typing import NoReturn

from mirror.domain.redact import redact

MAX_DETAIL = 300


def fail(message: str, code: int) -> NoReturn:
    """Print `mirror: <message>` (secrets masked) on stderr and exit with `code`."""
    sys.stderr.write(f"mirror: {redact(message)}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def fail_unexpectedly(error: BaseException, *, with_traceback: bool) -> NoReturn:
    """Exit 1 with the error's type and first line; the traceback first if asked for."""
    if with_traceback:
        sys.stderr.write(redact("".join(traceback.format_exception(error))))
        hint = ""
    else:
        hint = " (run with --debug for the traceback)"
    lines = str(error).strip().splitlines()
    detail = f": {lines[0][:MAX_DETAIL]}" if lines else ""
    fail(f"unexpected error: {type(error).__name__}{detail}{hint}", 1)
