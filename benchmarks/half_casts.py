"""What the integer lowerings cost: bf16 casts (lowering/_half_casts.py) and the guarded
integer division (lowering/_elementwise.py), each next to a plain elementwise op over the
same data in flow.jit.

    python benchmarks/half_casts.py [--rounds 7]

Each row reads and writes the same bytes as its reference row, so the ratio is the price of
the extra integer arithmetic per element (1.0: as fast as the memory-bound reference).
"""

from __future__ import annotations

import argparse

import numpy as np
from _bench import interleaved, machine

N = 4 * 2**20


def run(rounds: int = 7) -> None:
    import flow

    rng = np.random.default_rng(0)
    x32 = flow.tensor(rng.standard_normal(N).astype(np.float32))
    x64 = flow.tensor(rng.standard_normal(N))
    i32 = flow.tensor(rng.integers(-1000, 1000, N).astype(np.int32))
    d32 = flow.tensor(rng.integers(-9, 9, N).astype(np.int32))
    i64 = flow.tensor(rng.integers(-(2**40), 2**40, N))
    bf, f32, f64 = flow.bfloat16, flow.float32, flow.float64
    cases = {
        "f32 * 2 (reference)": (flow.jit(lambda v: v * 2), x32),
        "f32 -> bf16 -> f32": (flow.jit(lambda v: v.to(bf).to(f32)), x32),
        "f64 * 2 (reference)": (flow.jit(lambda v: v * 2), x64),
        "f64 -> bf16 -> f64": (flow.jit(lambda v: v.to(bf).to(f64)), x64),
        "i64 -> f64 (reference)": (flow.jit(lambda v: v.to(f64)), i64),
        "i64 -> bf16 -> f64": (flow.jit(lambda v: v.to(bf).to(f64)), i64),
    }
    fns = {name: (lambda f=f, a=a: f(a).numpy()) for name, (f, a) in cases.items()}
    add = flow.jit(lambda a, b: a + b)
    div = flow.jit(lambda a, b: a // b)
    fns["i32 a + b (reference)"] = lambda: add(i32, d32).numpy()
    fns["i32 a // b"] = lambda: div(i32, d32).numpy()
    times = interleaved(fns, rounds=rounds)
    names = list(times)
    print(f"bf16/f16 casts vs a plain op on the same data [{machine()}]")
    print(f"{'case':24} {'ms':>8} {'x reference':>12}   ({N} elements, flow.jit on cpu)")
    for i in range(0, len(names), 2):
        ref, case = names[i], names[i + 1]
        for name in (ref, case):
            ratio = times[name] / times[ref]
            print(f"{name:24} {times[name] * 1e3:8.2f} {ratio:12.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    run(parser.parse_args().rounds)
