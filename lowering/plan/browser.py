"""A headless Chromium for the plan: a PNG screenshot of the picture, or the rendered DOM.

The browser is `$FLOW_BROWSER`, else the first of `chromium-headless-shell`, `chromium`,
`chromium-browser`, `google-chrome` on the PATH (Debian: `apt-get install
chromium-headless-shell`). Without one, `BrowserNotFoundError` says how to get one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["BrowserNotFoundError", "dump_dom", "find_browser", "screenshot"]

CANDIDATES = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")


class BrowserNotFoundError(RuntimeError):
    """No headless Chromium to render the plan with."""


def find_browser() -> str | None:
    """The browser to render with (see the module docstring), or None."""
    named = os.environ.get("FLOW_BROWSER", "").strip()
    if named:
        return shutil.which(named) or (named if os.path.exists(named) else None)
    return next((p for name in CANDIDATES if (p := shutil.which(name))), None)


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    browser = find_browser()
    if browser is None:
        raise BrowserNotFoundError(
            "rendering the plan as PNG needs a headless Chromium: apt-get install "
            "chromium-headless-shell (or chromium), or set FLOW_BROWSER; save as .svg or "
            ".html to open it in any browser instead"
        )
    with tempfile.TemporaryDirectory(prefix="flow-plan-browser-") as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)  # fmt: skip
    if run.returncode != 0:
        raise RuntimeError(f"{browser} failed (exit {run.returncode}): {run.stderr[-2000:]}")
    return run


def screenshot(page: str | Path, out: str | Path, width: int, height: int,
               timeout: float = 120.0) -> Path:  # fmt: skip
    """Render the file `page` (SVG or HTML) at `width` x `height` px into the PNG `out`."""
    out = Path(out).resolve()
    url = Path(page).resolve().as_uri()
    _run([f"--screenshot={out}", f"--window-size={width},{height}", url], timeout)
    if not out.exists():
        raise RuntimeError(f"the browser wrote no screenshot to {out}")
    return out


def dump_dom(page: str | Path, timeout: float = 120.0) -> str:
    """The DOM the browser built from the file `page`, serialized."""
    return _run(["--dump-dom", Path(page).resolve().as_uri()], timeout).stdout
