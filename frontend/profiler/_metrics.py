"""Per-step metrics: step time, compute / communication / host time, bytes per collective
kind, peak memory and compiles, summed from the same spans `flow.profiler` records.

    metrics = flow.profiler.enable_metrics()        # or FLOW_METRICS=steps.jsonl (or .csv)
    for x, y in loader:
        train_step(x, y)                            # an nn.Graph step, or an eager step
    print(metrics.steps[-1])                        # one dict per step
    print(flow.profiler.format_summary(metrics.summary()))

A step ends with each `nn.Graph` call (an evaluation graph's too), each eager
`optimizer.step()`, and where `metrics.step()` is called. Per step:

* `step_ms`: the graph call, or the time since the previous step ended (eager);
* `comm_ms`: time blocked in collectives (MPI waits, inside compiled calls or eager), which
  includes `wait_ms`: the part spent waiting for the last peer of each collective to arrive
  (from the arrival times the ranks of a `flow-run` share; None where they are not shared,
  as under another launcher, and for a step with point-to-point transfers, such as a
  pipeline's sends and receives, whose waits are not split). `comm_ms - wait_ms` is the
  transfer itself;
* `compute_ms`: compiled calls, interpreted runs and eager ops, less the collectives inside
  them; `calls`: the compiled calls;
* `host_ms`: the rest (Python, tracing, compiling, data loading: `data_ms` of it);
* `bytes`: bytes this rank sent per collective kind (`all_reduce`...), `collectives`: counts;
* `compiles`, `cache_hits`: IREE compiles run and modules the compile cache had;
* `device_peak_bytes`: the IREE cpu allocator's peak so far (local-sync counts every buffer,
  local-task only the long-lived ones); `host_rss_peak_bytes`: the process's peak RSS.

With `FLOW_METRICS=path`, every step is appended to `path` as a JSON line (a CSV row when it
ends in `.csv`); under `flow-run -n N` rank r writes `<stem>.rank<r><suffix>`. While a profile
records too, both see every span. Metrics cost one aggregation per span (no event list).
"""

from __future__ import annotations

import csv
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["StepMetrics", "disable_metrics", "enable_metrics", "format_summary"]

ACTIVE: StepMetrics | None = None  # the collector while metrics are on
_COLUMNS = ("step", "kind", "step_ms", "compute_ms", "comm_ms", "wait_ms", "host_ms", "data_ms",
            "calls", "compiles", "cache_hits", "device_peak_bytes", "host_rss_peak_bytes",
            "collectives", "bytes")  # fmt: skip


def _recorder_base():
    from flow.targets.events import Recorder

    return Recorder


class _Counters:
    __slots__ = ("call", "eager", "comm", "wait", "unknown_waits", "data", "calls", "compiles",
                 "hits", "bytes", "count")  # fmt: skip

    def __init__(self):
        self.call = self.eager = self.comm = self.wait = self.unknown_waits = self.data = 0
        self.calls = self.compiles = self.hits = 0
        self.bytes: dict[str, int] = {}
        self.count: dict[str, int] = {}


class StepMetrics:
    """Sums the spans of each step (see the module docstring); `steps` holds one dict per
    finished step, `path` (optional) receives each as a JSON line or CSV row."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.steps: list[dict[str, Any]] = []
        self.path = None if path is None else Path(path)
        self.inner: Any = None  # a profile's recorder, which sees every span too
        self._c = _Counters()
        self._t0 = time.perf_counter_ns()
        self._file: Any = None
        self.wall_offset_ns = time.time_ns() - time.perf_counter_ns()

    # the recorder interface the instrumented paths use (flow.targets.events.Recorder)
    @property
    def record_shapes(self) -> bool:
        return bool(self.inner is not None and self.inner.record_shapes)

    @property
    def keep_calls(self) -> bool:
        return bool(self.inner is not None and self.inner.keep_calls)

    def span(self, name: str, cat: str, args: dict | None = None):
        from flow.targets.events import Span

        return Span(self, name, cat, args)

    def keep_call(self, function: Any, inputs: tuple) -> None:
        if self.inner is not None:
            self.inner.keep_call(function, inputs)

    def name_track(self, tid: int, name: str) -> None:
        if self.inner is not None:
            self.inner.name_track(tid, name)

    def wall_ns(self, t_ns: int) -> int:
        return t_ns + self.wall_offset_ns

    def add(self, name: str, cat: str, t0_ns: int, t1_ns: int, args: dict | None = None,
            tid: int | None = None) -> None:  # fmt: skip
        if self.inner is not None:
            self.inner.add(name, cat, t0_ns, t1_ns, args, tid)
        c, dt = self._c, t1_ns - t0_ns
        if cat == "call":
            c.call += dt
            c.calls += 1
        elif cat == "interpret":  # a step run by the interpreter while IREE compiles it
            c.call += dt
        elif cat == "eager":
            c.eager += dt
        elif cat == "collective":
            c.comm += dt
            waited = (args or {}).get("wait_us")
            if waited is None:
                c.unknown_waits += 1
            else:
                c.wait += int(waited * 1e3)
            op = str((args or {}).get("op", name)).split(" ")[0]  # "all_gather (shard shapes)"
            c.bytes[op] = c.bytes.get(op, 0) + int((args or {}).get("bytes", 0))
            c.count[op] = c.count.get(op, 0) + 1
        elif cat == "data":
            c.data += dt
        elif cat == "compile" and args:
            if name == "iree.compile" and args.get("cache") != "hit":
                c.compiles += 1
            elif args.get("cache") == "hit":
                c.hits += 1
        elif cat == "graph":
            self._end_step("graph", t0_ns, t1_ns)
        elif cat == "optimizer":  # an eager update (a traced one records no span)
            self._end_step("eager", self._t0, t1_ns)

    # ------------------------------------------------------------------ steps
    def step(self) -> None:
        """End the current step here (for loops that neither call an nn.Graph nor step an
        optimizer)."""
        self._end_step("eager", self._t0, time.perf_counter_ns())

    def _end_step(self, kind: str, t0_ns: int, t1_ns: int) -> None:
        c, ms = self._c, 1e-6
        step_ns = max(t1_ns - t0_ns, 0)
        busy = c.call + c.eager
        comm = min(c.comm, busy)  # in compiled calls and eager ops; the rest between them
        record = {
            "step": len(self.steps), "kind": kind, "step_ms": step_ns * ms,
            "compute_ms": max(busy - comm, 0) * ms, "comm_ms": c.comm * ms,
            "wait_ms": None if c.unknown_waits else min(c.wait, c.comm) * ms,
            "host_ms": max(step_ns - busy - (c.comm - comm), 0) * ms, "data_ms": c.data * ms,
            "calls": c.calls, "compiles": c.compiles, "cache_hits": c.hits,
            "device_peak_bytes": _device_peak(), "host_rss_peak_bytes": _rss_peak(),
            "collectives": dict(c.count), "bytes": dict(c.bytes),
        }  # fmt: skip
        self.steps.append(record)
        self._c = _Counters()
        self._t0 = t1_ns
        if self.path is not None:
            self._write(record)

    def summary(self, since: int = 0) -> dict[str, Any]:
        """The steps from `since` on, summed (times, bytes, counts) with the last peaks."""
        rows = self.steps[since:]
        out: dict[str, Any] = {"steps": len(rows)}
        for key in ("step_ms", "compute_ms", "comm_ms", "host_ms", "data_ms", "calls",
                    "compiles", "cache_hits"):  # fmt: skip
            out[key] = sum(r[key] for r in rows)
        waits = [r["wait_ms"] for r in rows]
        out["wait_ms"] = None if None in waits else sum(waits)
        out["bytes"], out["collectives"] = {}, {}
        for r in rows:
            for field in ("bytes", "collectives"):
                for k, v in r[field].items():
                    out[field][k] = out[field].get(k, 0) + v
        last = rows[-1] if rows else {}
        out["device_peak_bytes"] = last.get("device_peak_bytes", 0)
        out["host_rss_peak_bytes"] = last.get("host_rss_peak_bytes", _rss_peak())
        return out

    # ------------------------------------------------------------------ FLOW_METRICS
    def _write(self, record: dict) -> None:
        if self._file is None:
            self.path = _rank_path(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            self._file = open(self.path, "a", encoding="utf-8", newline="")  # noqa: SIM115
            if self.path.suffix == ".csv":
                self._csv = csv.writer(self._file)
                if fresh:
                    self._csv.writerow(_COLUMNS)
        if self.path.suffix == ".csv":
            row = [json.dumps(record[k]) if isinstance(record[k], dict) else record[k]
                   for k in _COLUMNS]  # fmt: skip
            self._csv.writerow(row)
        else:
            self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _rank_path(path: Path) -> Path:
    from flow.distributed import env

    if env.get_world_size() <= 1:
        return path
    return path.with_name(f"{path.stem}.rank{env.get_rank()}{path.suffix}")


def _device_peak() -> int:
    """The cpu device allocator's peak, if a cpu device exists in this process."""
    runtime = sys.modules.get("flow.targets.runtime")
    if runtime is None:
        return 0
    try:
        return int(runtime.cpu_device_peak())
    except Exception:  # noqa: BLE001 - a statistic, never a reason to fail a step
        return 0


def _rss_peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def enable_metrics(path: str | os.PathLike | None = None) -> StepMetrics:
    """Start collecting per-step metrics (appending each step to `path` if given); returns
    the collector. Enabling again returns the one already collecting."""
    global ACTIVE
    if ACTIVE is None:
        ACTIVE = StepMetrics(path)
        from . import _profile

        _profile.install_recorder(_profile.current_recorder())
    return ACTIVE


def disable_metrics() -> StepMetrics | None:
    """Stop collecting; returns the collector (its `steps` stay readable)."""
    global ACTIVE
    metrics, ACTIVE = ACTIVE, None
    if metrics is not None:
        from . import _profile

        _profile.install_recorder(metrics.inner)
        metrics.inner = None
        metrics.close()
    return metrics


def _waiting(s: dict[str, Any], n: int) -> str:
    wait = s.get("wait_ms")
    return f" of which waiting {wait / n:.2f}" if wait and s["comm_ms"] else ""


def format_summary(s: dict[str, Any]) -> str:
    """One line of a `summary()`: steps, ms/step and its split, bytes sent, peaks."""
    n = max(s["steps"], 1)
    sent = ", ".join(f"{k} {v / 2**20:.2f} MiB" for k, v in sorted(s["bytes"].items()))
    line = (f"{s['steps']} steps, {s['step_ms'] / n:.2f} ms/step (compute "
            f"{s['compute_ms'] / n:.2f}, comm {s['comm_ms'] / n:.2f}{_waiting(s, n)}, host "
            f"{s['host_ms'] / n:.2f})")  # fmt: skip
    if sent:
        line += f", sent {sent}"
    line += f", {s['compiles']} compiles, {s['cache_hits']} cache hits"
    if s["device_peak_bytes"]:
        line += f", IREE peak {s['device_peak_bytes'] / 2**20:.1f} MiB"
    return line + f", RSS peak {s['host_rss_peak_bytes'] / 2**20:.0f} MiB"
