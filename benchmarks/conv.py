"""f32 conv2d GFLOP/s, forward and with both gradients: flow.jit against torch and jax.jit.

    python benchmarks/conv.py [--rounds 7] [--lowerings]

Shapes run from LeNet's tiny layers to ResNet-sized ones. `--lowerings` also times flow's two
lowerings of an ungrouped convolution against each other on the same shapes: the product of
patches it compiles by default (im2col) and the loop nest that reads the input in place,
which it keeps for patches over `IM2COL_MAX_BYTES` (flow/lowering/_window.py); forward only,
since the loop nest of some weight gradients (64 channels at 32x32) does not compile.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _bench import interleaved, machine, optional, settle

# (N, C_in, H = W, C_out, kernel, stride, padding)
SHAPES = [
    (32, 1, 8, 8, 3, 1, 1),  # LeNet's first layer on digits
    (32, 8, 4, 16, 3, 1, 1),  # and its second
    (8, 16, 32, 32, 3, 1, 1),
    (8, 64, 32, 64, 3, 1, 1),
    (4, 128, 28, 128, 3, 1, 1),
    (16, 256, 14, 256, 3, 1, 1),
    (4, 3, 112, 64, 7, 2, 3),  # a stem
    (8, 64, 32, 128, 1, 1, 0),  # a 1x1 projection
]


def _flops(shape) -> float:
    n, c, h, o, k, s, p = shape
    out = (h + 2 * p - k) // s + 1
    return 2.0 * n * o * out * out * c * k * k


def _data(shape):
    n, c, h, o, k, _, _ = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, h)).astype(np.float32)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    return x, w


def flow_fns(shape, *, backward: bool = True) -> dict:
    """flow.jit's forward and (`backward`) its forward + both gradients of one shape."""
    import flow
    import flow.nn.functional as F

    _, _, _, _, _, s, p = shape
    x, w = _data(shape)

    def fwd(a, b):
        return F.conv2d(a, b, stride=s, padding=p)

    def grads(a, b):
        a, b = a.requires_grad_(), b.requires_grad_()
        out = F.conv2d(a, b, stride=s, padding=p)
        ga, gb = flow.autograd.grad(out.sum(), [a, b])
        return out, ga, gb

    xt, wt = flow.tensor(x), flow.tensor(w)
    fns = {}
    for name, fn in (("fwd", fwd), ("fwd+bwd", grads))[: 2 if backward else 1]:
        staged = flow.jit(fn, sync_compile=True)
        staged(xt, wt)
        settle(staged)
        fns[name] = lambda staged=staged: staged(xt, wt)
    return fns


def torch_fns(torch, shape) -> dict:
    _, _, _, _, _, s, p = shape
    x, w = _data(shape)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    conv = torch.nn.functional.conv2d

    def grads():
        a, b = tx.clone().requires_grad_(), tw.clone().requires_grad_()
        out = conv(a, b, stride=s, padding=p)
        return torch.autograd.grad(out.sum(), [a, b])

    return {"fwd": lambda: conv(tx, tw, stride=s, padding=p), "fwd+bwd": grads}


def jax_fns(jax, shape) -> dict:
    _, _, _, _, _, s, p = shape
    x, w = _data(shape)
    lax = jax.lax

    def fwd(a, b):
        return lax.conv_general_dilated(a, b, (s, s), ((p, p), (p, p)),
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))  # fmt: skip

    jf = jax.jit(fwd)
    jg = jax.jit(jax.grad(lambda a, b: fwd(a, b).sum(), argnums=(0, 1)))
    jx, jw = jax.numpy.asarray(x), jax.numpy.asarray(w)
    return {"fwd": lambda: jf(jx, jw).block_until_ready(),
            "fwd+bwd": lambda: jax.block_until_ready(jg(jx, jw))}  # fmt: skip


def run(rounds: int = 7, lowerings: bool = False) -> None:
    torch = optional("torch")
    jax = optional("jax")
    print(f"f32 conv2d, GFLOP/s of the forward's flops (fwd+bwd: 3x them), cpu [{machine()}]")
    cols = ["flow.jit"] + (["torch"] if torch else []) + (["jax.jit"] if jax else [])
    print(f"  {'N, C_in, H, C_out, k, s, p':30} {'pass':8}" + "".join(f"{c:>10}" for c in cols)
          + ("  flow / best peer" if len(cols) > 1 else ""))  # fmt: skip
    for shape in SHAPES:
        fns = {"flow.jit": flow_fns(shape)}
        if torch:
            fns["torch"] = torch_fns(torch, shape)
        if jax:
            fns["jax.jit"] = jax_fns(jax, shape)
        for which, factor in (("fwd", 1), ("fwd+bwd", 3)):
            secs = interleaved({name: f[which] for name, f in fns.items()}, rounds=rounds,
                               warmup=3)  # fmt: skip
            gf = {name: factor * _flops(shape) / t / 1e9 for name, t in secs.items()}
            line = f"  {str(shape)[1:-1]:30} {which:8}" + "".join(f"{gf[c]:10.1f}" for c in cols)
            if len(cols) > 1:
                line += f"  {gf['flow.jit'] / max(gf[c] for c in cols[1:]):10.2f}x"
            print(line, flush=True)
    if lowerings:
        compare_lowerings(rounds)


def compare_lowerings(rounds: int) -> None:
    """The forward through patches and a product against the in-place loop nest."""
    import flow.lowering._window as lowering

    print(f"\nflow's conv lowerings, forward ms (fresh compiles) [{machine()}]")
    head = f"  {'N, C_in, H, C_out, k, s, p':30} {'im2col':>10} {'direct':>10}"
    print(f"{head} {'direct/im2col':>14}")
    limit = lowering.IM2COL_MAX_BYTES
    os.environ["FLOW_NO_CACHE"] = "1"  # the limit is not part of the compile-cache key
    try:
        for shape in SHAPES:
            fns = {}
            for name, bound in (("im2col", limit), ("direct", 0)):
                lowering.IM2COL_MAX_BYTES = bound
                fns[name] = flow_fns(shape, backward=False)["fwd"]
            secs = interleaved(fns, rounds=rounds, warmup=3)
            im2col, direct = secs["im2col"], secs["direct"]
            print(f"  {str(shape)[1:-1]:30} {im2col * 1e3:10.3f} {direct * 1e3:10.3f} "
                  f"{direct / im2col:13.2f}x")  # fmt: skip
    finally:
        lowering.IM2COL_MAX_BYTES = limit
        os.environ.pop("FLOW_NO_CACHE", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--lowerings",
        action="store_true",
        help="also time the im2col and direct lowerings against each other",
    )
    args = parser.parse_args()
    run(args.rounds, args.lowerings)


if __name__ == "__main__":
    main()
