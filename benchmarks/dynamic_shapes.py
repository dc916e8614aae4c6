"""Batches of changing size: one dynamic program against a compile per shape.

    python benchmarks/dynamic_shapes.py [--quick]

The README's nn.Graph train step (MLP 784-256-10, cross-entropy, SGD lr 0.1 momentum 0.9)
runs a sequence of batches of sizes 64, 64, 48, 64, 32, 17, 64, 9 (five distinct sizes, as
a loader's last partial batch or an eval split gives), each call until its loss is a float,
from an empty compile cache:
  - flow with FLOW_SYNC_COMPILE=1 (each compile is waited for, so its cost shows): by
    default (the second size makes the batch dim dynamic), with `dynamic=0` (dynamic from the
    first call) and with `dynamic=False` (one program per shape);
  - flow by default (tiered: new programs run interpreted while they compile);
  - jax.jit of the same step (it traces and compiles every new shape);
  - torch.compile of the step (automatic dynamic shapes: it recompiles once, dynamic).
Then the steady step at batch 64 of the dynamic program against the static one (median of
interleaved calls): what dynamic dims cost IREE's codegen. Ratios, not a timed test; the
CPU model heads the table.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
from _bench import Goal, goals_table, interleaved, machine, optional, train_step

SIZES = (64, 64, 48, 64, 32, 17, 64, 9)
LR, MOMENTUM = 0.1, 0.9


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((max(SIZES), 784)).astype(np.float32)
    return x, rng.integers(0, 10, max(SIZES)).astype(np.int64)


def _fresh_cache() -> None:
    from flow.targets import cache

    os.environ["FLOW_CACHE_DIR"] = tempfile.mkdtemp(prefix="flow-dynamic-")
    cache.clear_memory()


def _flow_graph(dynamic, sync: bool):
    import flow
    import flow.nn as nn

    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = flow.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    return train_step(model, opt, nn.CrossEntropyLoss(), sync_compile=sync, dynamic=dynamic)


def bench_flow(dynamic, sync: bool) -> tuple[float, int]:
    """Seconds for the whole sequence, and the distinct compiled modules it made."""
    import flow

    _fresh_cache()
    x, y = _data()
    graph = _flow_graph(dynamic, sync)
    t0 = time.perf_counter()
    for n in SIZES:
        float(graph(flow.tensor(x[:n]), flow.tensor(y[:n])).numpy())
    total = time.perf_counter() - t0
    modules = {id(p.vmfb) if p.vmfb is not None else None for p in graph._compiled.values()}
    return total, len(modules - {None})


def bench_jax() -> float | None:
    jax = optional("jax")
    if jax is None:
        return None
    jnp = jax.numpy
    x, y = _data()
    rng = np.random.default_rng(1)
    params = [jnp.asarray(rng.standard_normal(s).astype(np.float32) * 0.05)
              for s in ((784, 256), (256,), (256, 10), (10,))]  # fmt: skip
    velocity = [jnp.zeros_like(p) for p in params]

    def loss_fn(params, xb, yb):
        w1, b1, w2, b2 = params
        logits = jax.nn.relu(xb @ w1 + b1) @ w2 + b2
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), yb[:, None], 1))

    @jax.jit
    def step(params, velocity, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(params, xb, yb)
        velocity = [MOMENTUM * v + g for v, g in zip(velocity, grads)]
        return loss, [p - LR * v for p, v in zip(params, velocity)], velocity

    t0 = time.perf_counter()
    for n in SIZES:
        loss, params, velocity = step(params, velocity, jnp.asarray(x[:n]), jnp.asarray(y[:n]))
        float(loss)
    return time.perf_counter() - t0


def bench_torch() -> float | None:
    torch = optional("torch")
    if torch is None:
        return None
    x, y = _data()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

    def step(xb, yb):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    try:
        compiled = torch.compile(step)
        t0 = time.perf_counter()
        for n in SIZES:
            float(compiled(torch.from_numpy(x[:n]), torch.from_numpy(y[:n])))
        return time.perf_counter() - t0
    except Exception as err:  # noqa: BLE001 - a peer that cannot compile here is reported
        print(f"  (torch.compile unavailable: {type(err).__name__}: {str(err)[:80]})")
        return None


def steady(rounds: int) -> tuple[float, float]:
    """ms per step at batch 64: the static program, the dynamic one."""
    import flow

    x, y = _data()
    xb, yb = flow.tensor(x[:64]), flow.tensor(y[:64])
    graphs = {"static": _flow_graph(False, True), "dynamic": _flow_graph(0, True)}
    for g in graphs.values():
        g(xb, yb)
    times = interleaved({k: (lambda g=g: float(g(xb, yb).numpy())) for k, g in graphs.items()},
                        rounds=rounds, number=10, warmup=5)  # fmt: skip
    return times["static"] * 1e3, times["dynamic"] * 1e3


def run(quick: bool = False) -> list[Goal]:
    print(f"batches of sizes {list(SIZES)}, README MLP step, empty cache [{machine()}]")
    rows = {}
    for label, dynamic, sync in (("flow (sync compile)", None, True),
                                 ("flow dynamic=0 (sync compile)", 0, True),
                                 ("flow dynamic=False (sync compile)", False, True),
                                 ("flow default (tiered)", None, False)):  # fmt: skip
        seconds, modules = bench_flow(dynamic, sync)
        rows[label] = (seconds, modules)
    rows["jax.jit"] = (bench_jax(), None)
    if not quick:
        rows["torch.compile"] = (bench_torch(), None)
    base = rows["flow (sync compile)"][0]
    print(f"{'':36} {'total s':>8} {'programs':>9} {'/ flow sync':>11}")
    for label, (seconds, modules) in rows.items():
        if seconds is None:
            print(f"{label:36} {'n/a':>8}")
            continue
        print(f"{label:36} {seconds:8.2f} {modules if modules is not None else '':>9} "
              f"{seconds / base:11.2f}")  # fmt: skip
    static_ms, dynamic_ms = steady(rounds=3 if quick else 7)
    print(f"steady step at batch 64: static {static_ms:.2f} ms, dynamic {dynamic_ms:.2f} ms "
          f"({static_ms / dynamic_ms:.2f}x)")  # fmt: skip
    goals = [Goal("dynamic", "static / dynamic program ms per step (64)",
                  static_ms / dynamic_ms, 0.8)]  # fmt: skip
    if rows["jax.jit"][0] is not None:
        goals.append(Goal("dynamic", "jax.jit / flow time over changing batches",
                          rows["jax.jit"][0] / base, 1.0))  # fmt: skip
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip torch.compile, fewer samples")
    goals_table(run(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
