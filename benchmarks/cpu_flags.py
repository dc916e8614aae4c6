"""The cpu target's flag sets against each other on this machine (targets/table.py,
CPU_FLAG_SETS): what CPU_FAMILY_FLAGS is chosen from, for the ISA family printed.

    python benchmarks/cpu_flags.py [--sets global-dt,global-dt-inner] [--blas 0,auto] [--steps 20]

Each set runs in a fresh process (`FLOW_CPU_FLAGS=<set>`, an empty compile cache) under each
BLAS policy of `--blas`: `0` keeps every product in IREE (the flags alone are measured),
`auto` (the default policy) sends the large products to BLAS, so the flags serve what stays
in IREE: the small products, their packs and the elementwise work. Cases: flow.jit f32
matmuls (GFLOP/s), the MLP step of train_step.py and the LeNet step of lenet_step.py
(nn.Graph, ms). numpy's matmul runs in the same processes as the peer. A set that fails to
compile a case shows `fails`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from _bench import machine

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, sys, time, statistics
sys.path.insert(0, HERE)
import numpy as np
import flow, flow.nn as nn
from _bench import train_step
import lenet_step, train_step as ts

STEPS = int(sys.argv[1])
out = {}

def timed(fn, repeat):
    fn(); fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter(); fn(); times.append(time.perf_counter() - t0)
    return statistics.median(times)

def case(name, fn):
    try:
        out[name] = fn()
    except Exception as err:  # a set that IREE rejects for this program
        out[name] = f"fails: {type(err).__name__}"

rng = np.random.default_rng(0)
for n in (256, 1024):
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    mm = flow.jit(lambda x, y: x @ y)
    case(f"matmul {n}^3 GFLOP/s", lambda: 2 * n**3 / timed(lambda: mm(a, b).numpy(), 10) / 1e9)
    out[f"numpy {n}^3 GFLOP/s"] = 2 * n**3 / timed(lambda: a @ b, 10) / 1e9

def mlp():
    x, y, w = ts._data()
    layers = []
    for i in range(len(ts.SIZES) - 1):
        lin = nn.Linear(ts.SIZES[i], ts.SIZES[i + 1])
        lin.weight.copy_(flow.tensor(w[2 * i])); lin.bias.copy_(flow.tensor(w[2 * i + 1]))
        layers += [lin, nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    g = train_step(model, flow.optim.SGD(model.parameters(), lr=ts.LR), nn.CrossEntropyLoss())
    xt, yt = flow.tensor(x), flow.tensor(y)
    for _ in range(12):
        g(xt, yt)
    return 1e3 * timed(lambda: g(xt, yt).numpy(), STEPS)

def lenet():
    x, y, params = lenet_step._data()
    model = nn.Sequential(
        nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    for p, v in zip(model.parameters(), params):
        p.copy_(flow.tensor(v))
    opt = flow.optim.SGD(model.parameters(), lr=lenet_step.LR, momentum=lenet_step.MOMENTUM)
    g = train_step(model, opt, nn.CrossEntropyLoss())
    xt, yt = flow.tensor(x), flow.tensor(y)
    for _ in range(12):
        g(xt, yt)
    return 1e3 * timed(lambda: g(xt, yt).numpy(), 5 * STEPS)

case("MLP step ms", mlp)
case("LeNet step ms", lenet)
print(json.dumps(out))
"""


def run_set(name: str, blas: str, steps: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="flow-cpu-flags-") as cache:
        env = {**os.environ, "FLOW_CPU_FLAGS": name, "FLOW_BLAS": blas, "FLOW_SYNC_COMPILE": "1",
               "FLOW_CACHE_DIR": cache}  # fmt: skip
        proc = subprocess.run([sys.executable, "-c", CHILD.replace("HERE", repr(HERE)),
                               str(steps)], env=env, capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "?"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    from flow.targets.table import CPU_FAMILY_FLAGS, CPU_FLAG_SETS, host_cpu_family

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(CPU_FLAG_SETS), help="flag sets, by name")
    parser.add_argument("--blas", default="0,auto", help="FLOW_BLAS policies, each a run")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    family = host_cpu_family()
    print(f"cpu flag sets [{machine()}]: family {family}, chosen "
          f"{CPU_FAMILY_FLAGS[family]}")  # fmt: skip
    rows = {f"{name} blas={blas}": run_set(name, blas, args.steps)
            for blas in args.blas.split(",") for name in args.sets.split(",")}  # fmt: skip
    cols = sorted({c for r in rows.values() for c in r if c != "error"},
                  key=lambda c: (not c.startswith("matmul"), c))  # fmt: skip
    print(f"  {'set':26}" + "".join(f"{c:>22}" for c in cols))
    for name, r in rows.items():
        if "error" in r:
            print(f"  {name:26}  error: {r['error']}")
            continue
        cells = [r.get(c, "") for c in cols]
        print(f"  {name:26}" + "".join(f"{v:22.2f}" if isinstance(v, float) else f"{v!s:>22}"
                                      for v in cells))  # fmt: skip


if __name__ == "__main__":
    main()
