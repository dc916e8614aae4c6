"""The profiler's event recorder: what `flow.profiler` fills while it records.

Code on a path worth timing checks one module-level global and does nothing else when no
profile records::

    rec = events.ACTIVE
    if rec is not None:
        with rec.span("iree.compile", "compile", {"target": "cpu"}):
            ...

A `Recorder` keeps complete spans (name, category, start and end on the process's
`perf_counter_ns` clock, the thread, an args dict) and the names of the threads that made
them; `wall_ns` turns a start into wall-clock time, so the spans of several ranks can be laid
side by side. The category says what a span measures, so that totals per kind (compute,
collectives and their bytes, compiles and cache hits) can be summed from the list later:

* `jit`, `graph`: a `flow.jit` call, an `nn.Graph` step, from the user's side;
* `trace`: tracing a program; `build`: lowering and compiling one (its `lower` pipeline
  spans, one `pass` span per pass, `compile` spans: IREE's compile and the compile cache's
  lookups, `args["cache"]` "hit" or "miss"); `load`: loading a module on its device;
* `call`: one call of a compiled function (`uploaded_bytes`, `read_back_bytes`);
  `interpret`: a run of the interpreter meanwhile; `eager`: one eager primitive;
* `collective`: one MPI wait (`op`, `group` as world ranks, `seq`, `bytes` sent);
* `pipeline`: one (phase, micro-batch) slot of an interpreted pipeline step;
* `optimizer`: one `optimizer.step()` (per-step metrics end an eager step there);
* `data`: a DataLoader batch; `step`: a `prof.step()` interval; `user`: `record_function`;
* `iree_dispatch`: IREE's own dispatch timings of a replayed program (flow.profiler).

The frontend's hot paths read `flow.core.profiling.ACTIVE`, which `flow.profiler` sets to the
same recorder (`import flow` does not load this package). Appending to a list is atomic
under the GIL, so spans from the background compile thread need no lock.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from . import faults

__all__ = ["ACTIVE", "CATEGORIES", "Recorder", "Span", "set_active"]

CATEGORIES = ("jit", "graph", "trace", "build", "lower", "pass", "compile", "load", "call",
              "interpret", "eager", "collective", "pipeline", "data", "step", "user",
              "optimizer", "iree_dispatch")  # fmt: skip

ACTIVE: Recorder | None = None  # the recorder of the profile that records now, if any


def set_active(recorder: Recorder | None) -> None:
    """Make `recorder` the one every instrumented path fills (None: record nothing)."""
    global ACTIVE
    ACTIVE = recorder
    faults.RECORDER = recorder  # the collectives' watchdog records their spans


class Span:
    """`with recorder.span(...) as s:` times its body; `s.args` may be added to inside."""

    __slots__ = ("rec", "name", "cat", "args", "t0")

    def __init__(self, rec: Recorder, name: str, cat: str, args: dict | None):
        self.rec, self.name, self.cat = rec, name, cat
        self.args = {} if args is None else args

    def __enter__(self) -> Span:
        self.t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.rec.add(self.name, self.cat, self.t0, time.perf_counter_ns(), self.args)


class Recorder:
    """The spans of one profile. `record_shapes`: call and eager spans also carry their
    operands' shapes and dtypes. `keep_calls`: each compiled function called keeps a copy of
    its first call's arguments (for replaying it under IREE's own profiling)."""

    def __init__(self, *, record_shapes: bool = False, keep_calls: bool = False):
        self.record_shapes = record_shapes
        self.keep_calls = keep_calls
        self.events: list[tuple[str, str, int, int, int, dict]] = []
        self.threads: dict[int, str] = {}
        self.calls: dict[int, tuple[Any, tuple]] = {}  # id(function) -> (function, inputs)
        # wall-clock ns at perf_counter_ns() == 0, taken once: spans keep perf_counter's
        # resolution and still line up with other processes' wall clocks
        self.wall_offset_ns = time.time_ns() - time.perf_counter_ns()

    def span(self, name: str, cat: str, args: dict | None = None) -> Span:
        return Span(self, name, cat, args)

    def add(self, name: str, cat: str, t0_ns: int, t1_ns: int, args: dict | None = None,
            tid: int | None = None) -> None:  # fmt: skip
        """One complete span from `t0_ns` to `t1_ns` (`perf_counter_ns`), on this thread
        unless `tid` names another track."""
        if tid is None:
            tid = threading.get_ident()
            if tid not in self.threads:
                self.threads[tid] = threading.current_thread().name
        self.events.append((name, cat, t0_ns, t1_ns, tid, {} if args is None else args))

    def name_track(self, tid: int, name: str) -> None:
        self.threads[tid] = name

    def keep_call(self, function: Any, inputs: tuple) -> None:
        """Keep `function`'s first profiled inputs (copies), when asked to."""
        if self.keep_calls and id(function) not in self.calls:
            import numpy as np

            kept = tuple(np.array(a) if isinstance(a, np.ndarray) else a for a in inputs)
            self.calls[id(function)] = (function, kept)

    def wall_ns(self, t_ns: int) -> int:
        return t_ns + self.wall_offset_ns

    def clear(self) -> None:
        self.events.clear()
        self.calls.clear()
