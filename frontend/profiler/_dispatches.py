"""IREE's own dispatch timings, for `profile(iree_dispatches=True)`: a replay, not the run.

IREE 3.13's Python bindings cannot profile (`HalDevice.begin_profiling` needs a profile sink
they do not expose), and the local drivers do not implement `dispatch-events` profiling.
What works here is IREE's benchmark tool with host-execution profiling: it runs a module's
function on the cpu `local-task` driver and records each dispatch's start and end on the
host task system, which `iree-profile dispatch --dispatch_events` lists. (The package's
tracy-instrumented runtime and `iree-tracy-capture` do record zones, but into Tracy's own file
format, which nothing installed here reads back into a trace of ours.) So at the end of a
recorded cycle each cpu function that was called in it is run again in that tool
(`REPLAYS` times, on copies of the inputs of its first profiled call) and its dispatches
become spans of category `iree_dispatch` on a track of their own, named for the replay.
They are laid out after the cycle's last span: they measure the same program and inputs
in another process, not the timing of the profiled calls themselves.

Not replayed (each named in the profile's `dispatch_notes`): programs that import modules
written in Python (the `comm` collectives, the `blas` products; the tool cannot provide
them), programs on non-cpu drivers, calls with non-array arguments.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from typing import Any

import numpy as np

from ..core.dtypes import as_dtype

__all__ = ["REPLAYS", "replay", "tool"]

REPLAYS = 5  # runs of each function in the tool
_TRACK = -1  # the first replay track's id; each function gets one below it


def tool(name: str) -> str:
    """The path of one of the IREE runtime package's command-line tools."""
    import iree.runtime as rt

    base = os.path.dirname(os.path.dirname(os.path.abspath(rt.__file__)))
    path = os.path.join(base, "_runtime_libs", name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"IREE's {name} is not in the runtime package ({path})")
    return path


def replay(rec: Any) -> list[str]:
    """Replay every kept call of `rec` (see the module docstring); returns the notes on the
    programs that were not replayed."""
    notes: list[str] = []
    end = max((t1 for _, _, _, t1, _, _ in rec.events), default=0)
    track = _TRACK
    seen: set[tuple[int, str]] = set()
    for function, inputs in list(rec.calls.values()):
        module = function.module
        if (id(module.vmfb), function.name) in seen:  # one program on two drivers
            continue
        seen.add((id(module.vmfb), function.name))
        why = _unreplayable(module, inputs)
        if why:
            notes.append(f"{function.name}: not replayed, {why}")
            continue
        try:
            events = _run(module.vmfb, function.name, inputs)
        except (OSError, RuntimeError, subprocess.SubprocessError) as err:
            notes.append(f"{function.name}: the replay failed: {err}")
            continue
        if not events:
            notes.append(f"{function.name}: the replay recorded no dispatch")
            continue
        rec.name_track(track, f"IREE dispatches (replay of {function.name})")
        first = min(e["start_host_time_ns"] for e in events)
        at = end + 1000
        for e in events:
            t0 = at + e["start_host_time_ns"] - first
            rec.add(e["key"], "iree_dispatch", t0, t0 + e["duration_ns"],
                    {"function": function.name, "replayed": True,
                     "workgroup_count": e.get("workgroup_count"),
                     "tiles": e.get("tile_count"),
                     "tile_time_us": e.get("tile_duration_sum_ns", 0) / 1e3},
                    tid=track)  # fmt: skip
            end = max(end, t0 + e["duration_ns"])
        track -= 1
    return notes


def _unreplayable(module: Any, inputs: tuple) -> str:
    if module.vmfb is None:
        return "its module was not loaded from a flatbuffer"
    if module.driver not in ("local-task", "local-sync"):
        return f"it runs on {module.driver} (only the cpu drivers are replayed)"
    if module.host_modules:
        hint = " (FLOW_BLAS=none keeps its products in IREE)" if "blas" in module.host_modules \
            else ""  # fmt: skip
        return (f"it imports modules written in Python ({', '.join(module.host_modules)}), "
                f"which IREE's tools cannot provide{hint}")  # fmt: skip
    if not all(isinstance(a, np.ndarray) for a in inputs):
        return "it takes non-array arguments"
    return ""


def _run(vmfb: bytes, name: str, inputs: tuple) -> list[dict]:
    """The dispatch events of `REPLAYS` runs of `name` in IREE's benchmark tool."""
    with tempfile.TemporaryDirectory(prefix="flow-replay-") as tmp:
        module = os.path.join(tmp, "module.vmfb")
        with open(module, "wb") as f:
            f.write(vmfb)
        args = []
        for i, a in enumerate(inputs):
            if a.ndim == 0:  # the tool reads a 0-d .npy as shape [1]: a scalar goes as text
                value = float(a) if a.dtype.kind in "fV" else int(a)  # V: bfloat16
                args.append(f"--input={as_dtype(a.dtype).ir_name}={value!r}")
                continue
            path = os.path.join(tmp, f"in{i}.npy")
            np.save(path, np.ascontiguousarray(a))
            args.append(f"--input=@{path}")
        out = os.path.join(tmp, "replay.ireeprof")
        run = subprocess.run(
            [tool("iree-benchmark-module"), f"--module={module}", f"--function={name}",
             "--device=local-task", *args, f"--benchmark_min_time={REPLAYS}x",
             "--device_profiling_mode=host-execution", f"--device_profiling_output={out}"],
            capture_output=True, text=True, timeout=300)  # fmt: skip
        if run.returncode != 0:
            raise RuntimeError(f"iree-benchmark-module exited {run.returncode}: "
                               f"{(run.stderr or run.stdout).strip()[-500:]}")  # fmt: skip
        listed = subprocess.run([tool("iree-profile"), "dispatch", "--dispatch_events",
                                 "--format=jsonl", out],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        if listed.returncode != 0:
            raise RuntimeError(f"iree-profile exited {listed.returncode}: "
                               f"{listed.stderr.strip()[-500:]}")  # fmt: skip
    events = []
    for line in listed.stdout.splitlines():
        if line.startswith("{"):
            e = json.loads(line)
            if e.get("type") == "host_dispatch_event" and e.get("valid", True):
                events.append(e)
    return events
