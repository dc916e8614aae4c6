"""Time to first result: import, the README step's first call, the main job, dispatches per step.

    python benchmarks/first_step.py [--quick]

Every measurement runs in a fresh interpreter (a cold process) with its own compile cache:
a new empty `FLOW_CACHE_DIR` for "cold", the one a cold run filled for "warm".
  1. `import flow` beside `import torch` and `import jax` (the import's wall time, in-process).
  2. The README's nn.Graph train step (MLP 784-256-10, cross-entropy, SGD lr 0.1 momentum
     0.9, batch 64): its first call until the loss is a Python float, import excluded, with
     the default execution and with `FLOW_SYNC_COMPILE=1` (compile before running); the
     step at which a compiled program takes over where the graph's programs say (`tier`);
     and the steady step. Beside the same step under jax.jit (value_and_grad and the
     momentum update, first call including its compile) and torch.compile (forward,
     backward and optimizer.step in one compiled function).
  3. The main job, `examples/train_digits.py --graph`, as a whole process (import included),
     cold and warm, beside flow eager (no --graph) and the same LeNet training in PyTorch
     eager (benchmarks/_torch_digits.py). Checkpoints go to a temp dir.
  4. Per train step (README MLP, LeNet, a transformer block), compiled with
     `FLOW_SYNC_COMPILE=1` into an empty cache: the programs the graph made, the seconds of
     each call that compiled one, and each program's dispatches (`flow.targets.
     dispatch_count`, "n/a" where that does not exist).
  5. The goals: first call ≤ 2x jax.jit's, cold main job ≤ torch eager's, import flow ≤
     import jax, one compiled program per step. Printed, not asserted.
Peers that are not installed print "n/a". `--quick` repeats once and skips the main job.
Cheap measurements (imports, first calls) are the median of 3 processes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _bench import Goal, goals_table, machine

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MARK = "RESULT "  # a child's last line: MARK + a JSON object

IMPORT_CHILD = r"""
import json, time
t0 = time.perf_counter()
import {module}
print("RESULT " + json.dumps({{"s": time.perf_counter() - t0}}))
"""

# The README step. `tier` / `interpreted_calls` exist on programs of tiered execution only.
FLOW_FIRST_CHILD = r"""
import json, statistics, time
import flow
import flow.nn as nn

model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
loss_fn = nn.CrossEntropyLoss()
optimizer = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

class TrainStep(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = model
        self.add_optimizer(optimizer)

    def build(self, x, y):
        loss = loss_fn(self.model(x), y)
        loss.backward()
        return loss

step = TrainStep()
x, y = flow.randn(64, 784), flow.randint(0, 10, (64,))
t0 = time.perf_counter()
float(step(x, y))
first = time.perf_counter() - t0

def tiered():
    return [p for p in step._engine.programs.values() if hasattr(p, "tier")]

takeover = None  # the first call that ran compiled, where programs say which tier runs
calls = 1
while time.perf_counter() - t0 < 300:
    if tiered() and all(p.tier == "compiled" for p in tiered()):
        takeover = {{"call": calls, "s": time.perf_counter() - t0}}
        break
    if not tiered() and calls >= 3:  # the steady step exists by now: no program has tiers
        break
    float(step(x, y))
    calls += 1
for _ in range(12):  # past the first calls, where a cpu program picks its driver
    float(step(x, y))
times = []
for _ in range({steps}):
    t1 = time.perf_counter()
    float(step(x, y))
    times.append(time.perf_counter() - t1)
print("RESULT " + json.dumps({{"first": first, "steady": statistics.median(times),
                              "takeover": takeover, "programs": len(step._engine.programs)}}))
"""

JAX_FIRST_CHILD = r"""
import json, statistics, time
import jax
import jax.numpy as jnp

def init(key, fan_in, fan_out):
    kw, kb = jax.random.split(key)
    bound = 1 / fan_in ** 0.5
    return (jax.random.uniform(kw, (fan_in, fan_out), minval=-bound, maxval=bound),
            jax.random.uniform(kb, (fan_out,), minval=-bound, maxval=bound))

k1, k2, kx, ky = jax.random.split(jax.random.PRNGKey(0), 4)
params = [init(k1, 784, 256), init(k2, 256, 10)]
velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
x = jax.random.normal(kx, (64, 784))
y = jax.random.randint(ky, (64,), 0, 10)

def loss_fn(params, x, y):
    (w1, b1), (w2, b2) = params
    logits = jax.nn.relu(x @ w1 + b1) @ w2 + b2
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

@jax.jit
def step(params, velocity, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    velocity = jax.tree_util.tree_map(lambda v, g: 0.9 * v + g, velocity, grads)
    params = jax.tree_util.tree_map(lambda p, v: p - 0.1 * v, params, velocity)
    return params, velocity, loss

def run():
    global params, velocity
    params, velocity, loss = step(params, velocity, x, y)
    jax.block_until_ready(params)
    return float(loss)

t0 = time.perf_counter()
run()
first = time.perf_counter() - t0
for _ in range(3):
    run()
times = []
for _ in range({steps}):
    t1 = time.perf_counter()
    run()
    times.append(time.perf_counter() - t1)
print("RESULT " + json.dumps({{"first": first, "steady": statistics.median(times)}}))
"""

TORCH_FIRST_CHILD = r"""
import json, statistics, time
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))

@torch.compile
def step(x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss

t0 = time.perf_counter()
step(x, y).item()
first = time.perf_counter() - t0
for _ in range(3):
    step(x, y).item()
times = []
for _ in range({steps}):
    t1 = time.perf_counter()
    step(x, y).item()
    times.append(time.perf_counter() - t1)
print("RESULT " + json.dumps({{"first": first, "steady": statistics.median(times)}}))
"""

# One train step per case, compiled before it runs (FLOW_SYNC_COMPILE=1, empty cache).
DISPATCH_CHILD = r"""
import json, math, sys, time
import flow
import flow.nn as nn
import flow.targets
sys.path.insert(0, {examples!r})
sys.path.insert(0, {benchmarks!r})
import train_digits
from _bench import train_step

class Block(nn.Module):
    # pre-norm transformer block: x + attention(ln(x)), then + mlp(ln(x))
    def __init__(self, embed, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(embed), nn.LayerNorm(embed)
        self.qkv, self.proj = nn.Linear(embed, 3 * embed), nn.Linear(embed, embed)
        self.mlp = nn.Sequential(nn.Linear(embed, 4 * embed), nn.GELU(),
                                 nn.Linear(4 * embed, embed))

    def forward(self, x):
        b, s, e = x.shape
        d = e // self.heads
        qkv = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = flow.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, s, e))
        return x + self.mlp(self.ln2(x))

case = {case!r}
if case == "mlp":
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = train_step(model, optimizer, nn.CrossEntropyLoss())
    batch = (flow.randn(64, 784), flow.randint(0, 10, (64,)))
elif case == "lenet":
    model = train_digits.LeNet()
    optimizer = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = flow.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=1000)
    step = train_digits.TrainGraph(model, nn.CrossEntropyLoss(), optimizer, scheduler)
    batch = (flow.rand(32, 1, 8, 8), flow.randint(0, 10, (32,)))
else:
    model = Block(64, 4)
    optimizer = flow.optim.AdamW(model.parameters(), lr=1e-3)
    step = train_step(model, optimizer, nn.MSELoss())
    batch = (flow.randn(8, 32, 64), flow.randn(8, 32, 64))

compile_s = []  # the wall time of each call that made a new program
for _ in range(3):
    before = len(step._engine.programs)
    t0 = time.perf_counter()
    float(step(*batch))
    if len(step._engine.programs) > before:
        compile_s.append(time.perf_counter() - t0)
count = getattr(flow.targets, "dispatch_count", None)
dispatches = []
for program in step._engine.programs.values():
    if getattr(program, "tier", "compiled") != "compiled":
        program = program.wait()
    vmfb = getattr(program, "vmfb", None)
    dispatches.append(count(vmfb) if count is not None and vmfb is not None else None)
print("RESULT " + json.dumps({{"programs": len(step._engine.programs), "compile_s": compile_s,
                              "dispatches": dispatches}}))
"""

DISPATCH_CASES = {"mlp": "MLP 784-256-10 (README)", "lenet": "LeNet (train_digits)",
                  "block": "transformer block"}  # fmt: skip


def _env(cache: str, scratch: str, **extra: str) -> dict[str, str]:
    """This process's environment for a cold child: `cache` as flow's compile cache, an
    empty torch.compile cache under `scratch` (inductor keeps one across processes), and
    FLOW_SYNC_COMPILE unset (the default execution) unless `extra` sets it."""
    env = {k: v for k, v in os.environ.items() if k != "FLOW_SYNC_COMPILE"}
    inductor = os.path.join(scratch, "inductor")
    return {**env, "FLOW_CACHE_DIR": cache, "TORCHINDUCTOR_CACHE_DIR": inductor, **extra}


def child(code: str, **env: str) -> dict | None:
    """Run `code` in a fresh interpreter with empty compile caches and return the JSON of
    its RESULT line, or None (with its error printed) if it failed."""
    with tempfile.TemporaryDirectory(prefix="flow-first-step-") as tmp:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=_env(tmp, tmp, **env), cwd=ROOT, timeout=900)  # fmt: skip
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(MARK)]
    if out.returncode != 0 or not lines:
        last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"  (child failed, exit {out.returncode}: {last[:160]})")
        return None
    return json.loads(lines[-1][len(MARK):])


def median_of(repeat: int, run) -> dict | None:
    """The per-key median of `repeat` results of `run()` (numbers only; other keys: the
    first result's), or None if any run failed."""
    results = [run() for _ in range(repeat)]
    if any(r is None for r in results):
        return None
    out = dict(results[0])
    for key, value in out.items():
        if isinstance(value, (int, float)):
            out[key] = statistics.median(r[key] for r in results)
    return out


def available(module: str) -> bool:
    """Whether a peer is installed (found, not imported: its import is timed in a child)."""
    return importlib.util.find_spec(module) is not None


def _fmt(value: float | None, spec: str = "10.3f") -> str:
    return format(value, spec) if value is not None else format("n/a", ">" + spec.split(".")[0])


def _ratio(flow_value: float | None, peer: float | None) -> str:
    """flow / peer (below 1: flow is faster), or n/a."""
    if flow_value is None or not peer:
        return f"{'n/a':>12}"
    return f"{flow_value / peer:11.2f}x"


def bench_imports(repeat: int) -> dict[str, float | None]:
    out = {}
    for module in ("flow", "torch", "jax"):
        if module != "flow" and not available(module):
            out[module] = None
            continue
        r = median_of(repeat, lambda m=module: child(IMPORT_CHILD.format(module=m)))
        out[module] = r["s"] if r else None
    print(f"\nimport in a fresh interpreter, median of {repeat} [{machine()}]")
    print(f"  {'':16} {'s':>10} {'flow / it':>12}")
    for module, s in out.items():
        print(f"  import {module:9} {_fmt(s)} {_ratio(out['flow'], s)}")
    return out


def bench_first_call(repeat: int, steps: int) -> dict[str, dict | None]:
    flow_code = FLOW_FIRST_CHILD.format(steps=steps)
    rows: dict[str, dict | None] = {
        "flow nn.Graph": median_of(repeat, lambda: child(flow_code)),
        "flow nn.Graph, SYNC_COMPILE=1": median_of(
            repeat, lambda: child(flow_code, FLOW_SYNC_COMPILE="1")),
    }  # fmt: skip
    peers = {"jax.jit": ("jax", JAX_FIRST_CHILD),
             "torch.compile (fwd+bwd+step)": ("torch", TORCH_FIRST_CHILD)}  # fmt: skip
    for name, (module, code) in peers.items():
        rows[name] = (median_of(repeat, lambda c=code: child(c.format(steps=steps)))
                      if available(module) else None)  # fmt: skip
    jax_r, torch_r = rows["jax.jit"], rows["torch.compile (fwd+bwd+step)"]
    print(f"\nREADME train step (MLP 784-256-10, batch 64, SGD momentum): first call until the "
          f"loss is a float, import excluded, empty cache, median of {repeat} processes; "
          f"steady: median of {steps} steps [{machine()}]")  # fmt: skip
    print(f"  {'':30} {'first s':>10} {'flow/jax':>12} {'flow/t.comp':>12} "
          f"{'steady ms':>10} {'flow/jax':>12} {'flow/t.comp':>12}")  # fmt: skip
    for name, r in rows.items():
        first = r["first"] if r else None
        steady = r["steady"] * 1e3 if r else None
        if name.startswith("flow"):  # ratios: this flow row against each peer
            ratios = [_ratio(first, jax_r and jax_r["first"]),
                      _ratio(first, torch_r and torch_r["first"])]  # fmt: skip
            steady_ratios = [_ratio(steady, jax_r and jax_r["steady"] * 1e3),
                             _ratio(steady, torch_r and torch_r["steady"] * 1e3)]  # fmt: skip
        else:
            ratios = steady_ratios = [f"{'':12}", f"{'':12}"]
        print(f"  {name:30} {_fmt(first)} {' '.join(ratios)} {_fmt(steady)} "
              f"{' '.join(steady_ratios)}")
    flow_r = rows["flow nn.Graph"]
    takeover = flow_r and flow_r.get("takeover")
    if takeover:
        print(f"  (flow default: the compiled program takes over at call {takeover['call']}, "
              f"{takeover['s']:.2f} s after the first call began)")  # fmt: skip
    else:
        print("  (flow default: the call at which the compiled program takes over: n/a, no "
              "program of the graph says which tier runs)")  # fmt: skip
    return rows


def bench_main_job() -> dict[str, float | None]:
    script = os.path.join(ROOT, "examples", "train_digits.py")
    runs = {  # name: (argv, whether it uses the cache the cold run filled)
        "flow nn.Graph, cold cache": ([script, "--graph"], True),
        "flow nn.Graph, warm cache": ([script, "--graph"], True),
        "flow eager": ([script], False),
        "torch eager": ([os.path.join(HERE, "_torch_digits.py")], False),
    }
    out: dict[str, float | None] = {}
    accuracy: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="flow-first-step-job-") as tmp:
        for i, (name, (argv, shared)) in enumerate(runs.items()):
            if name.startswith("torch") and not available("torch"):
                out[name] = None
                continue
            run_dir = os.path.join(tmp, str(i))
            cache = os.path.join(tmp, "cache") if shared else os.path.join(run_dir, "cache")
            os.makedirs(run_dir)
            os.makedirs(cache, exist_ok=True)
            ck = os.path.join(run_dir, "ck.pt" if name.startswith("torch") else "ck.safetensors")
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, *argv, "--checkpoint", ck],
                                  capture_output=True, text=True, env=_env(cache, run_dir),
                                  cwd=ROOT, timeout=900)  # fmt: skip
            out[name] = time.perf_counter() - t0 if proc.returncode == 0 else None
            tail = [ln for ln in proc.stdout.splitlines() if ln.startswith("test accuracy")]
            accuracy[name] = tail[-1].rsplit(" ", 1)[-1] if tail else "?"
            if proc.returncode != 0:
                print(f"  ({name} failed, exit {proc.returncode}: {proc.stderr.strip()[-160:]})")
    ref = out["torch eager"]
    print(f"\nmain job (examples/train_digits.py, LeNet, 12 epochs, batch 32), whole process "
          f"with import, one run each [{machine()}]")  # fmt: skip
    print(f"  {'':28} {'s':>10} {'/ torch eager':>15} {'test acc':>9}")
    for name, s in out.items():
        print(f"  {name:28} {_fmt(s)} {_ratio(s, ref):>15} {accuracy.get(name, '?'):>9}")
    return out


def bench_dispatches() -> dict[str, dict | None]:
    examples = os.path.join(ROOT, "examples")
    benchmarks = os.path.join(ROOT, "benchmarks")
    out = {case: child(DISPATCH_CHILD.format(examples=examples, benchmarks=benchmarks, case=case),
                       FLOW_SYNC_COMPILE="1") for case in DISPATCH_CASES}  # fmt: skip
    print(f"\nnn.Graph train steps compiled first (FLOW_SYNC_COMPILE=1), empty cache: programs "
          f"per graph, seconds of each call that made one, dispatches per program [{machine()}]")
    print(f"  {'step':26} {'programs':>8}  {'compile s':22} dispatches")
    for case, r in out.items():
        if r is None:
            print(f"  {DISPATCH_CASES[case]:26} {'n/a':>8}")
            continue
        secs = " + ".join(f"{s:.2f}" for s in r["compile_s"])
        disp = " / ".join("n/a" if d is None else str(d) for d in r["dispatches"])
        print(f"  {DISPATCH_CASES[case]:26} {r['programs']:8d}  {secs:22} {disp}")
    return out


def run(quick: bool = False) -> list[Goal]:
    repeat = 1 if quick else 3
    imports = bench_imports(repeat)
    first = bench_first_call(repeat, steps=10 if quick else 30)
    job = {} if quick else bench_main_job()
    dispatches = bench_dispatches()
    goals = []
    flow_first, jax_first = first["flow nn.Graph"], first["jax.jit"]
    if flow_first and jax_first:
        goals.append(Goal("first step", "jax.jit / flow first call of the README step",
                          jax_first["first"] / flow_first["first"], 0.5))  # fmt: skip
    if job.get("flow nn.Graph, cold cache") and job.get("torch eager"):
        goals.append(Goal("main job", "torch eager / flow --graph cold, whole process",
                          job["torch eager"] / job["flow nn.Graph, cold cache"], 1.0))  # fmt: skip
    if imports["flow"] and imports["jax"]:
        goals.append(Goal("import", "import jax / import flow time",
                          imports["jax"] / imports["flow"], 1.0))  # fmt: skip
    for case, r in dispatches.items():
        if r is not None:
            goals.append(Goal("programs", f"1 / compiled programs of the {case} step",
                              1 / r["programs"], 1.0))  # fmt: skip
    print()
    goals_table(goals)
    return goals


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # each table as it is done, into a log too
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="one process per measurement, fewer steps, no main job")  # fmt: skip
    run(parser.parse_args().quick)


if __name__ == "__main__":
    main()
