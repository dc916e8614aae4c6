"""One status line while the user waits for a compile: what compiles, for which target, how
many kernels its lowered program has and for how long it has run.

    with progress.status(f"compiling {name} for cpu") as line:
        lowered = lower(...)
        line.detail = f"{count} linalg ops"   # shown from the next refresh on
        compile(...)

Nothing is shown for a compile that ends within `AFTER_S`. On a terminal the line refreshes
in place and is erased when the compile ends; elsewhere (a log) one line is written when it
starts showing and one when it ends. `FLOW_VERBOSE=0` silences it, `FLOW_VERBOSE=1` shows it
on any stderr; by default it shows on a terminal only. Compiles in the background (the
execution tiers) show nothing: no one waits for them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator

__all__ = ["AFTER_S", "Line", "status"]

AFTER_S = 1.0  # a compile shorter than this shows nothing
_REFRESH_S = 0.5


class Line:
    """The status line of one compile; set `detail` to add what became known."""

    def __init__(self, what: str):
        self.what = what
        self.detail = ""
        self.start = time.perf_counter()

    def text(self) -> str:
        detail = f", {self.detail}" if self.detail else ""
        return f"flow: {self.what}{detail} ({time.perf_counter() - self.start:.1f} s)"


def _enabled(stream) -> bool:
    value = os.environ.get("FLOW_VERBOSE", "").strip()
    if value:
        return value not in ("0", "false", "off", "no")
    return _isatty(stream)


@contextlib.contextmanager
def status(what: str) -> Iterator[Line]:
    """Show `what` on stderr while the block runs, once it has run for `AFTER_S`."""
    line = Line(what)
    stream = sys.stderr
    if not _enabled(stream):
        yield line
        return
    done = threading.Event()
    shown = threading.Event()
    tty = _isatty(stream)

    def show() -> None:
        if done.wait(AFTER_S):
            return
        shown.set()
        if not tty:
            _write(stream, line.text() + "\n")
            return
        while not done.is_set():
            _write(stream, "\r\033[K" + line.text())
            done.wait(_REFRESH_S)

    painter = threading.Thread(target=show, name="flow-progress", daemon=True)
    painter.start()
    try:
        yield line
    finally:
        done.set()
        painter.join()
        if shown.is_set():
            _write(stream, "\r\033[K" if tty else f"{line.text()}: done\n")


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _write(stream, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):  # a closed or broken stderr: the status is not worth an error
        pass
