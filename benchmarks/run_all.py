"""Run every benchmark case in one process and print the ratio table of the goals.

    python benchmarks/run_all.py [--quick]

Cases: matmul (GFLOP/s vs numpy), elementwise (8-op chain vs numpy eager and a
memory copy), train_step (MLP step vs jax.jit, torch), lenet_step (LeNet step),
toolchain (compile time cold and cached, per-call overhead), first_step (import, first
call, main job, programs per step, each in a fresh process), optimizers (eager optimizer
steps vs torch). Peers that are not installed are skipped with a note. Every ratio is
"higher is better"; rows marked (info) have no target. `--quick` takes fewer samples
(noisier).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import elementwise  # noqa: E402
import first_step  # noqa: E402
import lenet_step  # noqa: E402
import matmul  # noqa: E402
import optimizers  # noqa: E402
import toolchain  # noqa: E402
import train_step  # noqa: E402
from _bench import goals_table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples per measurement")
    args = parser.parse_args()
    q = args.quick
    cases = [
        ("matmul", lambda: matmul.run(rounds=3 if q else 7)),
        ("elementwise", lambda: elementwise.run(rounds=3 if q else 7)),
        ("train_step", lambda: train_step.run(steps=10 if q else 30)),
        ("lenet_step", lambda: lenet_step.run(steps=20 if q else 50)),
        ("toolchain", lambda: toolchain.run(ops=1000 if q else 5000)),
        ("first_step", lambda: first_step.run(quick=q)),
        ("optimizers", lambda: optimizers.run(rounds=3 if q else 7)),
    ]
    goals = []
    t0 = time.perf_counter()
    for name, case in cases:
        print(f"\n=== {name} ===")
        goals += case()
    print(f"\n=== goals (one run, {time.perf_counter() - t0:.0f} s; 2-core machine, noisy) ===")
    goals_table(goals)


if __name__ == "__main__":
    main()
