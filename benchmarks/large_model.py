"""Memory, time and communication of the GPT step of examples/train_gpt.py per layout.

    python benchmarks/large_model.py [--ranks 2] [--steps 10] [--dim 128] [--layers 2]

Each layout runs as its own `flow-run -n R` job (one per layout, so that every one starts
from a fresh process), compiled first (`FLOW_SYNC_COMPILE=1`):
  dp        data parallel: parameters B, batch S(0)
  zero1/2/3 dp with `config.enable_zero(stage=1|2|3, shard_min_size=1)`
  tp        tensor parallel (Megatron's parameter layout; SBP inference places the rest)
  dp+ckpt, zero2+ckpt, zero3+ckpt: with every block's `activation_checkpointing`.
Per rank (rank 0 printed; the ranks are symmetric):
- **static bytes**: parameters and optimizer state as this rank holds them between steps
  (the local shards), and gradients as the step holds them (S(0) for ZeRO 2/3's sharded
  parameters, otherwise the parameter's own layout);
- **IREE peak**: the peak of the device allocator's bytes in the process (parameters,
  state, gradients, activations and temporaries: every buffer of the steps), every run on
  the `local-sync` cpu driver (local-task's allocator statistics do not count the steps'
  transient buffers);
- **step ms**: the median of the timed steps;
- **wire bytes per step**: this rank's sends in the per-rank program's collectives, by the
  ring algorithm (all-reduce of b bytes: 2(R-1)/R·b; reduce-scatter: (R-1)/R·b;
  all-gather of a b-byte shard: (R-1)·b; all-to-all: (R-1)/R·b), against the
  analytic formula of the layout for parameters of P bytes: dp 2(R-1)/R·P; zero1 3(R-1)/R·P
  (all-reduce, then all-gather of the new parameters); zero2 2(R-1)/R·P (reduce-scatter
  and all-gather); zero3 the same (each parameter gathered once, before its first use, and
  kept for the backward pass); tp 4 all-reduces of the activations per block (two
  forward, two backward). A ratio above 1 is traffic beyond the layout's own.
On one process, the same step (no layout) against PyTorch eager and torch.compile
(the same GPT in torch: `_torch_gpt`), timed on the cpu target's default driver (local-task,
both cores, as torch) and on local-sync, and with checkpointing; the blocks' memory is the IREE
peak of the model with 2L blocks less that with L (the workspace of recomputing one block,
needed once whatever the number of blocks, is not the blocks'). Ratios, not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from _bench import Goal, goals_table, machine, optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
MARK = "RESULT "
LAYOUTS = ["dp", "zero1", "zero2", "zero3", "tp", "dp+ckpt", "zero2+ckpt", "zero3+ckpt"]


def _wire_bytes(line: str, ranks: int) -> float:
    """The bytes this rank sends for one line of `communication_plan` (ring algorithms)."""
    op, nbytes = line.split()[0], int(line.split("(")[1].split()[0])
    return {"flow.all_reduce": 2 * (ranks - 1) / ranks * nbytes,
            "flow.reduce_scatter": (ranks - 1) / ranks * nbytes,
            "flow.all_gather": (ranks - 1) * nbytes,
            "flow.all_to_all": (ranks - 1) / ranks * nbytes,
            "flow.send": nbytes}.get(op, 0.0)  # fmt: skip  (local_slice/partial: no traffic)


def _local_bytes(t) -> int:
    from flow.distributed.placement import is_global

    return (t.to_local() if is_global(t) else t).numpy().nbytes


def child(args) -> None:
    """One layout on this rank: build, compile, time; print a RESULT line on rank 0."""
    import flow
    import flow.nn as nn
    from flow.lowering import run_pipeline
    from flow.lowering.print_comm_plan import communication_plan
    from flow.targets.runtime import device_config
    from train_gpt import GPT, Layout, TrainStep, batches, load_text

    layout_name, _, ckpt = args.child.partition("+")
    zero = int(layout_name[4:]) if layout_name.startswith("zero") else 0
    layout = Layout("zero" if zero else layout_name) if args.ranks > 1 else Layout("none")
    flow.manual_seed(0)
    model = GPT(256, args.context, args.dim, args.heads, args.layers)
    layout.place(model)
    optimizer = flow.optim.AdamW(model.parameters(), lr=1e-3)
    step = TrainStep(model, optimizer, None, 1.0)
    if zero:  # every parameter with a dim 0 of at least the ranks is sharded
        step.config.enable_zero(True, stage=zero, shard_min_size=1)
    if ckpt:
        for block in model.blocks:
            block.to(nn.graph.GraphModule).activation_checkpointing = True
    data = load_text()
    rng = np.random.default_rng(0)
    xs = [tuple(map(layout.batch, batches(data, rng, args.batch_size, args.context)))
          for _ in range(args.steps + 2)]  # fmt: skip
    for x, y in xs[:2]:  # the first step creates the optimizer state; both compile
        float(step(x, y))
    times = []
    for x, y in xs[2:]:
        t0 = time.perf_counter()
        float(step(x, y))
        times.append(time.perf_counter() - t0)
    peak = device_config("cpu").device.allocator.statistics["device_bytes_peak"]
    world = flow.env.get_world_size()
    params = list(model.parameters())
    sharded = step.config._zero_plan.sharded if step.config._zero_plan is not None else {}
    grad_bytes = sum(_local_bytes(p) if zero == 3 or id(p) not in sharded or zero < 2
                     else _local_bytes(p) // world for p in params)  # fmt: skip
    wire, plan = 0.0, []
    if world > 1:
        m = step._engine.last_lowered.module.clone()
        run_pipeline(m, f"flow-infer-sbp,flow-partition{{rank={flow.env.get_rank()}}}")
        plan = communication_plan(m)
        wire = sum(_wire_bytes(line, world) for line in plan)
    if flow.env.get_rank() == 0:
        out = {
            "params": sum(_local_bytes(p) for p in params),
            "global_params": sum(p.numel() * 4 for p in params),
            "state": sum(_local_bytes(v) for st in optimizer.state.values()
                         for v in st.values() if isinstance(v, flow.Tensor) and v.ndim),
            "grads": grad_bytes, "peak": peak, "ms": 1e3 * statistics.median(times),
            "wire": wire,
            "activation": args.batch_size * args.context * args.dim * 4,
        }  # fmt: skip
        print(MARK + json.dumps(out), flush=True)


def _run(argv: list[str], ranks: int, driver: str | None = "local-sync",
         timeout: float = 900) -> dict | None:  # fmt: skip
    # the allocator peaks compare on one cpu driver, local-sync (which the launcher picks when
    # the ranks fill the cores); `driver=None`: the cpu target's own (multi-threaded
    # local-task), as a user's one-process step runs and as torch uses the cores
    env = {**os.environ, "FLOW_SYNC_COMPILE": "1", "FLOW_VERBOSE": "0"}
    env.pop("FLOW_CPU_DRIVER", None)
    if driver is not None:
        env["FLOW_CPU_DRIVER"] = driver
    cmd = [sys.executable, os.path.abspath(__file__), "--ranks", str(ranks), *argv]
    if ranks > 1:
        cmd = [sys.executable, "-m", "flow.tools.run", "-n", str(ranks), *cmd[1:]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    for line in proc.stdout.splitlines():
        if MARK in line:
            return json.loads(line.split(MARK, 1)[1])
    print(f"  ({' '.join(argv)} failed, exit {proc.returncode}: "
          f"{(proc.stderr.strip().splitlines() or [''])[-1][:200]})")  # fmt: skip
    return None


def _analytic(layout: str, p_bytes: float, ranks: int, args) -> float:
    f = (ranks - 1) / ranks
    act = args.batch_size * args.context * args.dim * 4
    return {"dp": 2 * f * p_bytes, "zero1": 3 * f * p_bytes, "zero2": 2 * f * p_bytes,
            "zero3": 2 * f * p_bytes, "tp": 4 * args.layers * 2 * f * act}[layout]  # fmt: skip


def torch_step_ms(args) -> tuple[float | None, float | None]:
    """The same GPT step (AdamW, clipping) in PyTorch eager and under torch.compile."""
    torch = optional("torch")
    if torch is None:
        return None, None
    from _torch_gpt import make_step

    torch.manual_seed(0)
    from train_gpt import batches, load_text

    data = load_text()
    rng = np.random.default_rng(0)
    xs = [tuple(torch.from_numpy(a) for a in batches(data, rng, args.batch_size, args.context))
          for _ in range(args.steps + 2)]  # fmt: skip
    out = []
    for compiled in (False, True):
        step = make_step(torch, 256, args.context, args.dim, args.heads, args.layers, compiled)
        for x, y in xs[:2]:
            step(x, y)
        times = []
        for x, y in xs[2:]:
            t0 = time.perf_counter()
            step(x, y)
            times.append(time.perf_counter() - t0)
        out.append(1e3 * statistics.median(times))
    return out[0], out[1]


def main(argv: list[str] | None = None) -> list[Goal]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return []
    shape = ["--steps", str(args.steps), "--batch-size", str(args.batch_size), "--context",
             str(args.context), "--dim", str(args.dim), "--heads", str(args.heads),
             "--layers", str(args.layers)]  # fmt: skip
    goals: list[Goal] = []

    print(f"GPT step (AdamW, clipping; dim {args.dim}, {args.layers} layers, context "
          f"{args.context}, batch {args.batch_size}) on one process [{machine()}]")
    timed = _run(["--child", "none", *shape], 1, driver=None)
    single = _run(["--child", "none", *shape], 1)
    single_ckpt = _run(["--child", "none+ckpt", *shape], 1)
    double = [*shape[:-1], str(2 * args.layers)]  # the blocks' memory: 2L blocks less L
    plain2, ckpt2 = (_run(["--child", c, *double], 1) for c in ("none", "none+ckpt"))
    eager, compiled = torch_step_ms(args)
    rows = {"flow nn.Graph": (timed, None),
            "flow nn.Graph, local-sync": (single, single),
            "flow nn.Graph, local-sync, ckpt": (single_ckpt, single_ckpt),
            "torch eager": (eager, None), "torch.compile": (compiled, None)}  # fmt: skip
    print(f"  {'':32} {'step ms':>9} {'torch eager / it':>17} {'IREE peak MB':>13}")
    for name, (run, peak) in rows.items():
        ms = run["ms"] if isinstance(run, dict) else run
        ratio = f"{eager / ms:16.2f}x" if ms and eager else f"{'n/a':>17}"
        mb = f"{peak['peak'] / 2**20:13.2f}" if peak else f"{'':>13}"
        print(f"  {name:32} {ms or float('nan'):9.2f} {ratio} {mb}")
    if timed and eager:
        goals.append(Goal("gpt step", "torch eager / flow nn.Graph step time (1 process)",
                          eager / timed["ms"], 1.0))  # fmt: skip
    if single and single_ckpt and plain2 and ckpt2:
        plain, ckpt = plain2["peak"] - single["peak"], ckpt2["peak"] - single_ckpt["peak"]
        print(f"  memory of {args.layers} blocks (IREE peak at {2 * args.layers} blocks less at "
              f"{args.layers}): {plain / 2**20:.2f} MB, {ckpt / 2**20:.2f} MB with checkpointing")
        goals.append(Goal("checkpointing", "blocks' memory, plain / checkpointed (1 process)",
                          plain / ckpt, 2.0))  # fmt: skip

    print(f"\nper rank, {args.ranks} ranks (rank 0) [{machine()}]")
    head = (f"  {'layout':12} {'params KB':>10} {'grads KB':>9} {'state KB':>9} "
            f"{'IREE peak KB':>13} {'step ms':>8} {'wire KB':>8} {'formula KB':>11} "
            f"{'wire/formula':>13}")  # fmt: skip
    print(head)
    results = {}
    for layout in LAYOUTS:
        r = _run(["--child", layout, *shape], args.ranks)
        if r is None:
            continue
        results[layout] = r
        base = layout.partition("+")[0]
        want = _analytic(base, r["global_params"], args.ranks, args)
        print(f"  {layout:12} {r['params'] / 1024:10.1f} {r['grads'] / 1024:9.1f} "
              f"{r['state'] / 1024:9.1f} {r['peak'] / 1024:13.1f} {r['ms']:8.2f} "
              f"{r['wire'] / 1024:8.1f} {want / 1024:11.1f} {r['wire'] / want:12.2f}x")
    dp = results.get("dp")
    if dp:
        for layout, what, key in [("zero2", "optimizer state per rank, dp / zero2", "state"),
                                  ("zero3", "parameters per rank, dp / zero3", "params"),
                                  ("dp+ckpt", "IREE peak, dp / dp with checkpointing", "peak")]:
            if layout in results:
                goals.append(Goal(layout, what, dp[key] / results[layout][key],
                                  args.ranks if key != "peak" else 1.0))  # fmt: skip
    goals_table(goals)
    return goals


if __name__ == "__main__":
    main()
