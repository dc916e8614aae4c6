"""Shared helpers of the benchmark scripts: timing, optional peers, tables and goals.

Every script measures flow and its peers in one process (the machine's load changes
between runs, so only ratios measured side by side mean something), prints its own
table, and returns its goal rows (`Goal`) for `benchmarks/run_all.py`.
"""

from __future__ import annotations

import importlib
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


def median_time(fn: Callable[[], object], *, repeat: int = 15, warmup: int = 2) -> float:
    """Median wall time of one `fn()` call, in seconds, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved(fns: dict[str, Callable[[], object]], *, rounds: int = 7, number: int = 1,
                warmup: int = 1) -> dict[str, float]:  # fmt: skip
    """Median seconds per call of each function, timed in alternating rounds so that a burst
    of load on the machine hits every candidate alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            samples[name].append((time.perf_counter() - t0) / number)
    return {name: statistics.median(ts) for name, ts in samples.items()}


def optional(module: str, why: str = "to compare"):
    """Import a peer framework, or print why its rows are skipped and return None."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        print(f"  ({module} skipped: {err}; pip install -e '.[bench]' {why})")
        return None


@dataclass(frozen=True)
class Goal:
    """One goal of the benchmark suite: `ratio` (higher is better) against `target`."""

    case: str
    what: str
    ratio: float
    target: float

    @property
    def met(self) -> bool:
        return self.ratio >= self.target


def machine() -> str:
    """The CPU model, core count and ISA family, for every table's title: machines of one kind
    come with different CPUs (AVX-512 or not), and a figure means little without the one it
    ran on."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    from flow.targets.table import host_cpu_family

    cpu = model or platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, {host_cpu_family()}"


def table(title: str, rows: dict[str, float], unit: str, base: str, *,
          higher_is_better: bool) -> None:  # fmt: skip
    """Print `rows` (name -> value in `unit`) with each value's ratio to the `base` row,
    written so that a ratio above 1 means better than `base`."""
    print(f"{title} [{machine()}]")
    ref = rows[base]
    label = f"vs {base}"
    print(f"  {'':28} {unit:>12} {label:>26}")
    for name, value in rows.items():
        ratio = value / ref if higher_is_better else ref / value
        print(f"  {name:28} {value:12.2f} {ratio:25.2f}x")


def step_goals(case: str, results: dict[str, float], jax_target: float) -> list[Goal]:
    """The goals of a training step's times (`results`: name -> seconds): nn.Graph against
    jax.jit (`jax_target`: jax's time over flow's) and torch eager (info), eager mode within
    2x of torch eager."""
    goals = []
    graph = results["flow nn.Graph"]
    if "jax.jit" in results:
        goals.append(Goal(case, "jax.jit / flow nn.Graph time", results["jax.jit"] / graph,
                          jax_target))  # fmt: skip
    if "torch eager" in results:
        torch = results["torch eager"]
        goals.append(Goal(case, "torch eager / flow nn.Graph time (info)", torch / graph, 0.0))
        if "flow eager (numpy)" in results:
            goals.append(Goal(case, "torch eager / flow eager time",
                              torch / results["flow eager (numpy)"], 0.5))  # fmt: skip
    return goals


def goals_table(goals: list[Goal]) -> None:
    """The summary: one line per goal, ratio against target."""
    print(f"goals [{machine()}]")
    print(f"{'case':14} {'goal':52} {'ratio':>7} {'target':>7}  met")
    for g in goals:
        print(f"{g.case:14} {g.what:52} {g.ratio:7.2f} {g.target:7.2f}  {'yes' if g.met else 'NO'}")


def settle(staged) -> None:
    """Wait until every program of a `flow.jit` or `nn.Graph` is compiled: a new program runs
    interpreted while IREE compiles it in the background, and steady-state figures are of the
    compiled tier. Call it after the first call, before warming up."""
    programs = staged._compiled if hasattr(staged, "_compiled") else staged._cache
    for program in list(programs.values()):
        if hasattr(program, "wait"):
            program.wait()


def train_step(model, optimizer, loss_fn, *, target: str | None = None, **options):
    """An `nn.Graph` training step: `loss_fn(model(x), y)`, its backward and the update
    (`options`: more of nn.Graph's, such as `sync_compile` or `dynamic`)."""
    import flow.nn as nn

    class TrainStep(nn.Graph):
        def __init__(self):
            super().__init__(target=target, **options)
            self.model = model
            self.add_optimizer(optimizer)

        def build(self, xb, yb):
            loss = loss_fn(self.model(xb), yb)
            loss.backward()
            return loss

    return TrainStep()
