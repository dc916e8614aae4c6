"""f32 matmul GFLOP/s at 1024³ and 2048³: flow.jit against numpy (and torch, jax.jit).

    python benchmarks/matmul.py [--rounds 7]

Inputs are numpy arrays, as a user would pass them; flow's time includes copying
them into IREE's buffers on each call (~2 x 4 MiB at 1024³, 2 x 16 MiB at 2048³).
"""

from __future__ import annotations

import argparse

import numpy as np
from _bench import Goal, interleaved, optional, settle, table


def bench_size(n: int, rounds: int, torch, jax) -> dict[str, float]:
    """GFLOP/s of each framework on one n x n x n matmul."""
    import flow

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    mm = flow.jit(lambda x, y: x @ y)
    mm(a, b)
    settle(mm)
    np.testing.assert_allclose(mm(a, b).numpy(), a @ b, rtol=1e-3, atol=1e-2 * np.sqrt(n))
    fns = {"flow.jit": lambda: mm(a, b), "numpy": lambda: a @ b}
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        fns["torch"] = lambda: ta @ tb
    if jax is not None:
        jmm = jax.jit(lambda x, y: x @ y)
        ja, jb = jax.numpy.asarray(a), jax.numpy.asarray(b)
        fns["jax.jit"] = lambda: jmm(ja, jb).block_until_ready()
    secs = interleaved(fns, rounds=rounds, number=3 if n <= 1024 else 1, warmup=12)
    return {name: 2 * n**3 / t / 1e9 for name, t in secs.items()}


def run(rounds: int = 7) -> list[Goal]:
    torch = optional("torch")
    jax = optional("jax")
    goals = []
    for n in (1024, 2048):
        gflops = bench_size(n, rounds, torch, jax)
        table(f"f32 matmul {n}x{n}x{n}, cpu", gflops, "GFLOP/s", "numpy", higher_is_better=True)
        ratio = gflops["flow.jit"] / gflops["numpy"]
        goals.append(Goal("matmul", f"flow / numpy GFLOP/s, {n}^3", ratio, 0.9))
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    run(parser.parse_args().rounds)


if __name__ == "__main__":
    main()
