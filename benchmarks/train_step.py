"""One MLP training step (batch 256, 784→1024→1024→10, ReLU, cross-entropy, SGD), side by side.

    python benchmarks/train_step.py [--steps 30] [--target cpu|cuda|rocm|vulkan]

flow runs it as an nn.Graph (forward + backward + SGD update compiled into one
IREE module), eagerly, and eagerly under `flow.lazy()` (the same loop recorded
and compiled per step, cached from the second step on); the peers — PyTorch
eager, torch.compile and jax.jit — run in the same process when installed
(`pip install torch jax`; they are never dependencies of flow). Prints the
median step time of each and its ratio to flow's nn.Graph. With `--target` other than
cpu, only flow's nn.Graph runs, compiled for that target (eager modes and peers run on
the host).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _bench import Goal, optional, settle, step_goals, table, train_step

BATCH, SIZES, LR = 256, (784, 1024, 1024, 10), 0.01


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)
    weights = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / np.sqrt(fan_in)
        weights.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32))
        weights.append(rng.uniform(-bound, bound, fan_out).astype(np.float32))
    return x, y, weights


def _time(step, steps: int) -> float:
    for _ in range(3):  # warm-up (compiles)
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def model_and_opt(weights):
    """The MLP in flow with the given weights, and its SGD optimizer."""
    import flow
    import flow.nn as nn

    layers = []
    for i in range(len(SIZES) - 1):
        lin = nn.Linear(SIZES[i], SIZES[i + 1])
        lin.weight.copy_(flow.tensor(weights[2 * i]))
        lin.bias.copy_(flow.tensor(weights[2 * i + 1]))
        layers += [lin, nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    return model, flow.optim.SGD(model.parameters(), lr=LR)


def bench_flow(steps: int, target: str = "cpu") -> dict[str, float]:
    import flow
    import flow.nn as nn

    x, y, weights = _data()

    model, opt = model_and_opt(weights)
    loss_fn = nn.CrossEntropyLoss()

    graph = train_step(model, opt, loss_fn, target=target)
    xt, yt = flow.tensor(x), flow.tensor(y)
    t0 = time.perf_counter()
    graph(xt, yt)
    first = time.perf_counter() - t0
    settle(graph)
    for _ in range(11):  # past the first calls, where a cpu program picks its driver
        graph(xt, yt)
    out = {"flow nn.Graph": _time(lambda: graph(xt, yt), steps)}
    print(f"  (flow nn.Graph first call, trace + compile: {first:.2f} s)")
    if target != "cpu":
        return out

    eager_model, eager_opt = model_and_opt(weights)

    def eager_step():
        eager_opt.zero_grad()
        loss_fn(eager_model(xt), yt).backward()
        eager_opt.step()

    out["flow eager (numpy)"] = _time(eager_step, max(3, steps // 5))

    lazy_model, lazy_opt = model_and_opt(weights)

    def lazy_step():  # the eager loop, recorded and compiled per step (flow.lazy)
        with flow.lazy():
            lazy_opt.zero_grad()
            loss = loss_fn(lazy_model(xt), yt)
            loss.backward()
            lazy_opt.step()
            loss.item()

    flow.lazy_stats(reset=True)
    out["flow lazy eager"] = _time(lazy_step, steps)
    print(f"  (flow lazy eager: {flow.lazy_stats()})")
    return out


def bench_torch(steps: int) -> dict[str, float]:
    torch = optional("torch")
    if torch is None:
        return {}
    x, y, weights = _data()
    torch.manual_seed(0)
    layers = []
    for i in range(len(SIZES) - 1):
        lin = torch.nn.Linear(SIZES[i], SIZES[i + 1])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(weights[2 * i]))
            lin.bias.copy_(torch.from_numpy(weights[2 * i + 1]))
        layers += [lin, torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()

    out = {"torch eager": _time(step, steps)}
    try:
        compiled = torch.compile(step)
        out["torch.compile"] = _time(compiled, steps)
    except Exception as err:  # noqa: BLE001 - a peer that cannot compile here is reported
        print(f"  (torch.compile unavailable: {type(err).__name__}: {str(err)[:80]})")
    return out


def bench_jax(steps: int) -> dict[str, float]:
    jax = optional("jax")
    if jax is None:
        return {}
    jnp = jax.numpy
    x, y, weights = _data()
    params = [jnp.asarray(w) for w in weights]

    def loss_fn(params, xb, yb):
        h = xb
        for i in range(0, len(params), 2):
            h = h @ params[i].T + params[i + 1]
            if i + 2 < len(params):
                h = jnp.maximum(h, 0)
        logp = jax.nn.log_softmax(h)
        return -jnp.mean(jnp.take_along_axis(logp, yb[:, None], 1))

    @jax.jit
    def step(params, xb, yb):
        grads = jax.grad(loss_fn)(params, xb, yb)
        return [p - LR * g for p, g in zip(params, grads)]

    state = {"p": params}
    xb, yb = jnp.asarray(x), jnp.asarray(y)

    def run():
        state["p"] = step(state["p"], xb, yb)
        jax.block_until_ready(state["p"])

    return {"jax.jit": _time(run, steps)}


BENCHES = [bench_flow, bench_torch, bench_jax]  # each returns {row name: seconds per step}


def run(steps: int = 30, target: str = "cpu") -> list[Goal]:
    results: dict[str, float] = bench_flow(steps, target)
    if target == "cpu":
        for bench in BENCHES:
            if bench is not bench_flow:
                results.update(bench(steps))
    ms = {name: t * 1e3 for name, t in results.items()}
    table(f"MLP training step, batch 256, 784-1024-1024-10, f32, SGD, {target}", ms, "ms/step",
          "flow nn.Graph", higher_is_better=False)  # fmt: skip
    return step_goals("mlp step", results, 1 / 0.9)  # nn.Graph within 0.9x of jax's time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--target", default="cpu", help="where flow's nn.Graph step runs")
    args = parser.parse_args()
    run(args.steps, args.target)


if __name__ == "__main__":
    main()
