"""One LeNet training step on 1x8x8 digit-sized images (batch 32, SGD momentum 0.9), side by side.

    python benchmarks/lenet_step.py [--steps 50]

The model of examples/train_digits.py: conv(1→8) → relu → pool → conv(8→16) → relu
→ pool → fc(64→64) → relu → fc(64→10), cross-entropy. flow runs it as an nn.Graph
and eagerly; PyTorch eager, torch.compile and jax.jit run in the same process
when installed. A step this small measures per-step overhead more than arithmetic.
The pairs whose ratios are goals (nn.Graph and jax.jit, flow eager and torch eager) are
timed in alternating rounds, so that the machine's load hits both alike.
"""

from __future__ import annotations

import argparse

import numpy as np
from _bench import Goal, interleaved, median_time, optional, settle, step_goals, table, train_step

BATCH, LR, MOMENTUM = 32, 0.05, 0.9
# (name, shape) of every parameter, in PyTorch's layout.
SHAPES = [("c1.w", (8, 1, 3, 3)), ("c1.b", (8,)), ("c2.w", (16, 8, 3, 3)), ("c2.b", (16,)),
          ("f1.w", (64, 64)), ("f1.b", (64,)), ("f2.w", (10, 64)), ("f2.b", (10,))]  # fmt: skip


def _data():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (BATCH, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int64)
    params = [(rng.standard_normal(s) * 0.2).astype(np.float32) for _, s in SHAPES]
    return x, y, params


def _flow_model_and_opt():
    import flow
    import flow.nn as nn

    model = nn.Sequential(
        nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip
    for p, value in zip(model.parameters(), _data()[2]):
        p.copy_(flow.tensor(value))
    return model, flow.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def _flow_graph_step():
    import flow
    import flow.nn as nn

    x, y, _ = _data()
    model, opt = _flow_model_and_opt()
    graph = train_step(model, opt, nn.CrossEntropyLoss())
    xt, yt = flow.tensor(x), flow.tensor(y)
    graph(xt, yt)
    settle(graph)
    for _ in range(12):  # past the first calls, where a cpu program picks its driver
        graph(xt, yt)
    return lambda: graph(xt, yt)


def bench_compiled(steps: int) -> dict[str, float]:
    """flow's nn.Graph step and jax.jit's, in alternating rounds of 5 steps each (as
    `bench_eager`): their ratio is a goal."""
    steps_by_name = {"flow nn.Graph": _flow_graph_step()}
    jax = optional("jax")
    if jax is not None:
        steps_by_name["jax.jit"] = _jax_step(jax)
    return interleaved(steps_by_name, rounds=max(5, steps // 5), number=5, warmup=5)


def _flow_eager_step():
    import flow
    import flow.nn as nn

    x, y, _ = _data()
    model, opt = _flow_model_and_opt()
    loss_fn, xt, yt = nn.CrossEntropyLoss(), flow.tensor(x), flow.tensor(y)

    def step():
        opt.zero_grad()
        loss_fn(model(xt), yt).backward()
        opt.step()

    return step


def _torch_eager_step(torch):
    x, y, params = _data()
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip
    with torch.no_grad():
        for p, value in zip(model.parameters(), params):
            p.copy_(torch.from_numpy(value))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()

    return step


def bench_eager(steps: int) -> dict[str, float]:
    """flow's eager step and PyTorch's, in alternating rounds of 5 steps each: steps of a few
    milliseconds drift with the machine's load, and their ratio is a goal."""
    steps_by_name = {"flow eager (numpy)": _flow_eager_step()}
    torch = optional("torch")
    if torch is not None:
        steps_by_name["torch eager"] = _torch_eager_step(torch)
    return interleaved(steps_by_name, rounds=max(5, steps // 5), number=5, warmup=5)


def bench_torch(steps: int) -> dict[str, float]:
    torch = optional("torch")
    if torch is None:
        return {}
    try:
        compiled = torch.compile(_torch_eager_step(torch))
        return {"torch.compile": median_time(compiled, repeat=steps, warmup=3)}
    except Exception as err:  # noqa: BLE001 - a peer that cannot compile here is reported
        print(f"  (torch.compile unavailable: {type(err).__name__}: {str(err)[:80]})")
        return {}


def _jax_step(jax):
    jnp, lax = jax.numpy, jax.lax
    x, y, params = _data()

    def conv(h, w, b):
        dims = ("NCHW", "OIHW", "NCHW")
        out = lax.conv_general_dilated(h, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=dims)
        return out + b[None, :, None, None]

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def loss_fn(p, xb, yb):
        h = pool(jax.nn.relu(conv(xb, p[0], p[1])))
        h = pool(jax.nn.relu(conv(h, p[2], p[3])))
        h = h.reshape(h.shape[0], -1)
        h = jax.nn.relu(h @ p[4].T + p[5])
        logp = jax.nn.log_softmax(h @ p[6].T + p[7])
        return -jnp.mean(jnp.take_along_axis(logp, yb[:, None], 1))

    @jax.jit
    def step(p, v, xb, yb):
        g = jax.grad(loss_fn)(p, xb, yb)
        v = [MOMENTUM * vi + gi for vi, gi in zip(v, g)]
        return [pi - LR * vi for pi, vi in zip(p, v)], v

    state = {"p": [jnp.asarray(a) for a in params]}
    state["v"] = [jnp.zeros_like(a) for a in state["p"]]
    xb, yb = jnp.asarray(x), jnp.asarray(y)

    def run():
        state["p"], state["v"] = step(state["p"], state["v"], xb, yb)
        jax.block_until_ready(state["p"])

    return run


BENCHES = [bench_compiled, bench_eager, bench_torch]  # each: {row name: seconds per step}
ROWS = ["flow nn.Graph", "flow eager (numpy)", "torch eager", "torch.compile", "jax.jit"]


def run(steps: int = 50) -> list[Goal]:
    results: dict[str, float] = {}
    for bench in BENCHES:
        results.update(bench(steps))
    ms = {name: results[name] * 1e3 for name in ROWS if name in results}
    table(f"LeNet training step, batch {BATCH}, 1x8x8 images, SGD momentum, cpu", ms,
          "ms/step", "flow nn.Graph", higher_is_better=False)  # fmt: skip
    return step_goals("lenet step", results, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    run(parser.parse_args().steps)


if __name__ == "__main__":
    main()
