"""The frontend's switch for `flow.profiler`: `ACTIVE` is the recording
`flow.targets.events.Recorder`, or None when no profile records.

Hot paths (eager ops, compiled calls, data loading) test this one global and do nothing
else while it is None; `flow.profiler` sets it together with `flow.targets.events.ACTIVE`.
It lives here, apart from the recorder, so that `import flow` loads no part of
`flow.targets`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ACTIVE", "set_active"]

ACTIVE: Any = None  # a flow.targets.events.Recorder while a profile records


def set_active(recorder: Any) -> None:
    global ACTIVE
    ACTIVE = recorder
