"""A small MLP forward pass compiled with `flow.jit` on cpu, checked against numpy.

python examples/mlp_jit.py [--target cpu|vulkan] [--show-ir]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import flow


def mlp(x, w1, b1, w2, b2):
    h = flow.relu(x @ w1 + b1)
    return h @ w2 + b2


def numpy_mlp(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--show-ir", action="store_true", help="print the traced flow IR")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    shapes = [(64, 784), (784, 256), (256,), (256, 10), (10,)]
    params = [(rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32) for s in shapes]

    f = flow.jit(mlp, target=args.target)
    if args.show_ir:
        print(f.lower(*params).as_text())
    t0 = time.perf_counter()
    out = f(*params)
    t1 = time.perf_counter()
    out = f(*params)
    t2 = time.perf_counter()

    expected = numpy_mlp(*params)
    err = float(np.max(np.abs(out.numpy() - expected)))
    print(f"output {tuple(out.shape)} {out.dtype} on {args.target}")
    print(out.numpy()[:2])
    print(
        f"first call (trace + compile + run): {(t1 - t0) * 1e3:.1f} ms; "
        f"cached call: {(t2 - t1) * 1e3:.2f} ms"
    )
    print(f"max abs error vs numpy: {err:.3e}")
    if not err < 1e-3:
        raise SystemExit(f"mismatch against numpy: max abs error {err}")


if __name__ == "__main__":
    main()
