"""Dispatches and compile time of three nn.Graph train steps on the cpu target.

    python benchmarks/dispatches.py [--steps 30] [--compare="--flag=value ..."] [--foreach]

The steps: the README's MLP (784-256-10, batch 64, cross-entropy, SGD momentum), the LeNet
step of examples/train_digits.py (its TrainGraph, batch 32, SGD momentum with a cosine
schedule) and a transformer block (embed 64, 4 heads, sequence 32, batch 8, 4x MLP, pre-layer
norms, GELU, MSE loss, Adam). IREE generates code for each dispatch separately, so the number
of dispatches is what the compile time of a step scales with, and bounds its launches.

Per step: `first call` is the graph's first call with an empty compile cache (tracing,
lowering, and IREE compiling both the step that creates the optimizer state and the steady
step); then the steady step's program is lowered and compiled again, uncached, for
`lower s`, `IREE s` and its `dispatches`, and its `ms/step` is the median of a call. With
`--compare`, the steady step is also compiled with the target table's flags plus the given
ones (later flags override), in the same run, with ratios against the table's flags. With
`--foreach`, each step is also built with its optimizer's `foreach=True` (the update of all
parameters of a dtype on one flat vector) and measured the same way, with ratios against
the per-parameter update.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _bench import machine, median_time, train_step

os.environ["FLOW_CACHE_DIR"] = tempfile.mkdtemp(prefix="flow-dispatches-")  # empty: compiles

import flow  # noqa: E402 - after the cache is chosen
import flow.nn as nn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import train_digits  # noqa: E402


def mlp_step(foreach: bool | None = None):
    """The README's train step and a batch for it."""
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=foreach)
    graph = train_step(model, optimizer, nn.CrossEntropyLoss())
    return graph, (flow.randn(64, 784), flow.randint(0, 10, (64,)))


def lenet_step(foreach: bool | None = None):
    """examples/train_digits.py's TrainGraph with its optimizer and schedule, batch 32."""
    model = train_digits.LeNet()
    optimizer = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, foreach=foreach)
    scheduler = flow.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=1000)
    graph = train_digits.TrainGraph(model, nn.CrossEntropyLoss(), optimizer, scheduler)
    return graph, (flow.rand(32, 1, 8, 8), flow.randint(0, 10, (32,)))


class Block(nn.Module):
    """A pre-norm transformer block: x + attention(ln(x)), then + mlp(ln(x))."""

    def __init__(self, embed: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(embed), nn.LayerNorm(embed)
        self.qkv, self.proj = nn.Linear(embed, 3 * embed), nn.Linear(embed, embed)
        self.mlp = nn.Sequential(
            nn.Linear(embed, 4 * embed), nn.GELU(), nn.Linear(4 * embed, embed)
        )

    def forward(self, x):
        b, s, e = x.shape
        d = e // self.heads
        qkv = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (b, heads, s, d) each
        attn = flow.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, s, e))
        return x + self.mlp(self.ln2(x))


def transformer_step(foreach: bool | None = None):
    """One transformer block regressed onto a target with MSE, Adam."""
    model = Block(64, 4)
    optimizer = flow.optim.Adam(model.parameters(), lr=1e-3, foreach=foreach)
    graph = train_step(model, optimizer, nn.MSELoss())
    return graph, (flow.randn(8, 32, 64), flow.randn(8, 32, 64))


CASES = {"MLP (README)": mlp_step, "LeNet (train_digits)": lenet_step,
         "transformer block": transformer_step}  # fmt: skip


def measure(make, steps: int, compare: list[str], foreach: bool = False) -> list[dict]:
    """One row per flag set (the table's; the table's + `compare`) for one train step."""
    from flow.compile.stages import Compiled
    from flow.core.pytree import flatten
    from flow.lowering import run_pipeline, to_iree_text
    from flow.targets import compile_mlir, dispatch_count

    graph, batch = make(foreach=True) if foreach else make()
    t0 = time.perf_counter()
    graph(*batch)
    first = time.perf_counter() - t0
    graph(*batch)  # the steady step now exists
    lowered = graph._engine.last_lowered
    leaves, _ = flatten(list(batch))
    t0 = time.perf_counter()
    text = to_iree_text(run_pipeline(lowered.module.clone(), "flow-to-iree-input"))
    lower_s = time.perf_counter() - t0
    rows = []
    for flags in ([], compare) if compare else ([],):
        t0 = time.perf_counter()
        vmfb = compile_mlir(text, "cpu", flags, use_cache=False)
        iree_s = time.perf_counter() - t0
        program = Compiled(lowered, "cpu", vmfb)
        step_s = median_time(lambda p=program: p.call_flat(leaves), repeat=steps, warmup=12)
        rows.append({"flags": " ".join(flags) or "table", "dispatches": dispatch_count(vmfb),
                     "first": first if not flags else float("nan"), "lower": lower_s,
                     "iree": iree_s, "ms": step_s * 1e3})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--compare", default="",
                        help='extra IREE flags to compare: --compare="--a=1 --b"')  # fmt: skip
    parser.add_argument("--foreach", action="store_true",
                        help="also measure each step with foreach=True")  # fmt: skip
    args = parser.parse_args()
    compare = shlex.split(args.compare)
    print(f"nn.Graph train steps, cpu target, empty compile cache [{machine()}]")
    head = f"  {'step':22} {'flags':>8} {'dispatches':>10} {'first call s':>12} {'lower s':>8}"
    print(f"{head} {'IREE s':>7} {'ms/step':>8}   vs table: dispatches  IREE s  ms/step")
    for name, make in CASES.items():
        rows = measure(make, args.steps, compare)
        labels = ["table"] + ["+compare"] * (len(rows) - 1)
        if args.foreach:
            more = measure(make, args.steps, compare, foreach=True)
            rows, labels = rows + more, labels + ["foreach"] + ["+both"] * (len(more) - 1)
        base = rows[0]
        for i, row in enumerate(rows):
            flags = labels[i]
            first = "" if row["flags"] != "table" else f"{row['first']:.2f}"
            line = (
                f"  {name if i == 0 else '':22} {flags:>8} {row['dispatches']:10d} "
                f"{first:>12} {row['lower']:8.2f} {row['iree']:7.2f} {row['ms']:8.3f}"
            )
            ratios = (
                f"{row['dispatches'] / base['dispatches']:19.2f}x "
                f"{base['iree'] / row['iree']:6.2f}x {base['ms'] / row['ms']:7.2f}x"
            )
            print(f"{line}   {ratios}")
    if compare:
        print(f"  +compare: {' '.join(compare)} (IREE s and ms/step ratios: >1 is faster)")
    if args.foreach:
        print("  foreach: the optimizer's foreach=True (one flat update per dtype); "
              "+both: with +compare")


if __name__ == "__main__":
    np.random.seed(0)
    flow.manual_seed(0)
    main()
