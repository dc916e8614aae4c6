"""`profile`, `schedule` and `record_function`: when flow records, in `torch.profiler`'s terms.

A profile owns one `flow.targets.events.Recorder`. While its schedule says WARMUP, RECORD or
RECORD_AND_SAVE the recorder is installed (`flow.targets.events.ACTIVE` and
`flow.core.profiling.ACTIVE`), so every instrumented path adds its spans; otherwise both are
None and those paths cost one test of a global. Warm-up spans are dropped when recording
starts, as torch drops them; a cycle ends on the `step()` that leaves RECORD_AND_SAVE (or on
`stop()`), which hands its spans to `on_trace_ready`.
"""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Callable
from typing import Any

from flow.core import profiling

__all__ = ["ProfilerAction", "profile", "record_function", "schedule"]


_PROFILE_RECORDER: Any = None  # the recorder a profile installed, if one records


def current_recorder() -> Any:
    """The recorder a profile has installed (None when no profile records)."""
    return _PROFILE_RECORDER


def install_recorder(recorder: Any) -> None:
    """Make `recorder` (a profile's, or None) the one every instrumented path fills; while
    per-step metrics are on (flow.profiler._metrics), they see every span and pass it on."""
    global _PROFILE_RECORDER
    from . import _metrics

    _PROFILE_RECORDER = recorder
    metrics = _metrics.ACTIVE
    if metrics is not None:
        metrics.inner = recorder
        recorder = metrics
    profiling.set_active(recorder)
    if recorder is not None or "flow.targets.events" in _loaded():
        from flow.targets import events

        events.set_active(recorder)


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0,
             skip_first: int = 0) -> Callable[[int], ProfilerAction]:  # fmt: skip
    """The action for each step number: `skip_first` steps, then cycles of `wait` idle steps,
    `warmup` steps whose spans are dropped and `active` recorded steps, the last of which
    saves (`on_trace_ready`); `repeat` cycles (0: for as long as the profile lasts)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError(f"schedule: need wait, warmup, repeat, skip_first >= 0 and active > 0, "
                         f"got wait={wait} warmup={warmup} active={active} repeat={repeat} "
                         f"skip_first={skip_first}")  # fmt: skip
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat and step >= cycle * repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def _always(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class profile:  # noqa: N801  (named like torch.profiler.profile)
    """Record what flow does inside the `with` block (or between `start()` and `stop()`).

    `schedule`: step number -> `ProfilerAction` (`flow.profiler.schedule(...)`); without it
    every step records. `on_trace_ready(prof)` runs at the end of each recorded cycle.
    `record_shapes`: call and eager spans carry their operands' shapes. `iree_dispatches`:
    after each cycle, every cpu program called in it is run again in IREE's benchmark tool
    with IREE's host-execution profiling, and its per-dispatch timings are added on a track
    of their own (flow/profiler/_dispatches.py says what that measures). `activities` is
    accepted for torch compatibility (flow records host activity only)."""

    def __init__(self, *, activities: Any = None, schedule: Callable | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False,
                 iree_dispatches: bool = False, **_torch_options: Any):  # fmt: skip
        self.activities = activities
        self.schedule = schedule or _always
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.iree_dispatches = iree_dispatches
        self.step_num = 0
        self._action = ProfilerAction.NONE
        self._recorder = None
        self._step_t0 = 0
        self._saved = None  # the Recorder of the last finished cycle
        self.dispatch_notes: list[str] = []  # why programs were not replayed

    # ----------------------------------------------------------------- the schedule

    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        self.step_num = 0
        self._enter(self.schedule(0))

    def step(self) -> None:
        """Mark the end of a training step (a `ProfilerStep#N` span) and move the schedule on."""
        prev = self._action
        if prev in _RECORDING:
            self._recorder.add(f"ProfilerStep#{self.step_num}", "step", self._step_t0,
                               time.perf_counter_ns(), {"step": self.step_num})  # fmt: skip
        self.step_num += 1
        new = self.schedule(self.step_num)
        if prev is ProfilerAction.RECORD_AND_SAVE:
            self._finish_cycle()
        self._enter(new)

    def stop(self) -> None:
        if self._action in _RECORDING:
            self._finish_cycle()
        self._install(None)
        self._action = ProfilerAction.NONE

    def _enter(self, action: ProfilerAction) -> None:
        prev, self._action = self._action, action
        if action is ProfilerAction.NONE:
            self._install(None)
            return
        if self._recorder is None:
            from flow.targets.events import Recorder

            self._recorder = Recorder(record_shapes=self.record_shapes,
                                      keep_calls=self.iree_dispatches)  # fmt: skip
        if action in _RECORDING and prev not in _RECORDING:
            self._recorder.clear()  # warm-up spans are not kept
        self._step_t0 = time.perf_counter_ns()
        self._install(self._recorder)

    def _install(self, recorder: Any) -> None:
        install_recorder(recorder)

    def _finish_cycle(self) -> None:
        rec = self._recorder
        self._install(None)
        self._recorder = None
        if self.iree_dispatches:
            from ._dispatches import replay

            self.dispatch_notes = replay(rec)
        rec.calls.clear()
        self._saved = rec
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # ----------------------------------------------------------------- the results

    @property
    def recorder(self):
        """The spans of the last finished cycle (of the running one while it records)."""
        return self._saved if self._saved is not None else self._recorder

    def events(self) -> list[dict]:
        """This rank's spans as dicts: name, cat, ts and dur (microseconds, wall clock), tid,
        thread, args."""
        from ._export import rank_events

        rec = self.recorder
        return [] if rec is None else rank_events(rec)

    def key_averages(self):
        """One row per span name (count, total / self / average / min / max host time),
        with `.table(sort_by=..., row_limit=...)`."""
        from ._table import key_averages

        return key_averages(self.events())

    def export_chrome_trace(self, path: str) -> str | None:
        """Write the Chrome / Perfetto trace JSON of the last cycle to `path`. Under several
        ranks every rank must call it: rank 0 gathers the others' spans and writes one file
        with one process track per rank. Returns the path written (None on other ranks)."""
        from ._export import export

        return export(self.recorder, path)


def _loaded() -> dict:
    import sys

    return sys.modules


class record_function:  # noqa: N801  (named like torch.profiler.record_function)
    """A user span named `name` (category `user`): `with record_function("fwd"):`, or as a
    decorator. Records nothing, at the cost of one test, when no profile records."""

    def __init__(self, name: str, args: dict | None = None):
        self.name = name
        self.args = args
        self._span = None

    def __enter__(self) -> record_function:
        rec = profiling.ACTIVE
        if rec is not None:
            self._span = rec.span(self.name, "user", dict(self.args or {}))
            self._span.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        span, self._span = self._span, None
        if span is not None:
            span.__exit__(*exc)

    def __call__(self, fn: Callable) -> Callable:
        name, args = self.name, self.args

        @functools.wraps(fn)
        def wrapped(*a, **kw):
            if profiling.ACTIVE is None:
                return fn(*a, **kw)
            with record_function(name, args):
                return fn(*a, **kw)

        return wrapped
