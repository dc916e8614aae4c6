"""Eager optimizer steps on the MLP benchmark's parameters (1.86M floats), flow against PyTorch.

    python benchmarks/optimizers.py [--rounds 7]

Each optimizer updates the six parameters of benchmarks/train_step.py's MLP (784-1024-1024-10)
from fixed gradients, eagerly: flow's update written into the parameter and state arrays,
PyTorch's default (foreach) implementation. The two alternate, a few steps a round, so that
load on the machine hits both alike. Prints each step's time and the ratio; no goal.
"""

from __future__ import annotations

import argparse

import numpy as np
from _bench import Goal, interleaved, optional, table

SHAPES = [(1024, 784), (1024,), (1024, 1024), (1024,), (10, 1024), (10,)]
CASES = [
    ("SGD", dict(lr=0.01)),
    ("SGD", dict(lr=0.01, momentum=0.9)),
    ("Adam", dict(lr=1e-3)),
    ("AdamW", dict(lr=1e-3)),
    ("RMSprop", dict(lr=1e-3)),
]


def _arrays(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def _flow_step(name: str, kwargs: dict):
    import flow

    params = [flow.nn.Parameter(flow.tensor(a)) for a in _arrays(0)]
    for p, g in zip(params, _arrays(1)):
        p.grad = flow.tensor(g)
    return getattr(flow.optim, name)(params, **kwargs).step


def _torch_step(torch, name: str, kwargs: dict):
    params = [torch.nn.Parameter(torch.from_numpy(a)) for a in _arrays(0)]
    for p, g in zip(params, _arrays(1)):
        p.grad = torch.from_numpy(g)
    return getattr(torch.optim, name)(params, **kwargs).step


def run(rounds: int = 7) -> list[Goal]:
    torch = optional("torch")
    goals = []
    for name, kwargs in CASES:
        label = name + "".join(f", {k}={v}" for k, v in kwargs.items() if k != "lr")
        steps = {"flow eager": _flow_step(name, kwargs)}
        if torch is not None:
            steps["torch eager"] = _torch_step(torch, name, kwargs)
        ms = {k: v * 1e3 for k, v in interleaved(steps, rounds=rounds, number=3).items()}
        table(f"eager {label} step, {sum(int(np.prod(s)) for s in SHAPES)} f32 parameters",
              ms, "ms/step", "flow eager", higher_is_better=False)  # fmt: skip
        if torch is not None:
            goals.append(Goal("optimizer", f"torch / flow eager time, {label} (info)",
                              ms["torch eager"] / ms["flow eager"], 0.0))  # fmt: skip
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    run(parser.parse_args().rounds)


if __name__ == "__main__":
    main()
