"""An 8-op elementwise chain on 16M floats: flow.jit against numpy eager and a plain copy.

    python benchmarks/elementwise.py [--rounds 7]

The chain reads 64 MiB and writes 64 MiB, as copying the array does, so the
copy's time over the chain's is the fraction of memory bandwidth the chain
reaches. flow runs it twice: on an input that is already in a device buffer
(the result of an earlier compiled call, as in a pipeline of jitted functions),
and on a numpy input, which is copied into IREE's memory on every call.
"""

from __future__ import annotations

import argparse

import numpy as np
from _bench import Goal, interleaved, optional, settle, table

N = 16 * 2**20


def chain(x, relu, absolute):
    """8 elementwise ops, written once for every framework."""
    y = x * 1.5
    y = y + 0.5
    y = relu(y)
    y = y * x
    y = y - 0.25
    y = y * 0.5
    y = y + 1.0
    return absolute(y)


def run(rounds: int = 7) -> list[Goal]:
    import flow
    from flow.targets import runtime

    torch = optional("torch")
    jax = optional("jax")
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    expected = chain(x, lambda v: np.maximum(v, 0), np.abs)

    f = flow.jit(lambda v: chain(v, flow.relu, flow.abs))
    copy = flow.jit(lambda v: v + 0.0)
    copy(x)
    settle(copy)
    on_device = copy(x)  # a device-resident copy of x
    f(on_device)
    settle(f)
    runtime.reset_transfer_stats()
    np.testing.assert_allclose(f(on_device).numpy(), expected, rtol=1e-6)
    if runtime.transfer_stats().uploads:
        print("  (warning: the device-resident input was uploaded again)")
    xt = flow.tensor(x)
    dst = np.empty_like(x)
    fns = {
        "flow.jit (device input)": lambda: f(on_device),
        "flow.jit (numpy input)": lambda: f(xt),
        "numpy eager": lambda: chain(x, lambda v: np.maximum(v, 0), np.abs),
        "memory copy (np.copyto)": lambda: np.copyto(dst, x),
    }
    if torch is not None:
        tx = torch.from_numpy(x)
        fns["torch eager"] = lambda: chain(tx, torch.relu, torch.abs)
    if jax is not None:
        jf = jax.jit(lambda v: chain(v, jax.nn.relu, jax.numpy.abs))
        jx = jax.numpy.asarray(x)
        fns["jax.jit"] = lambda: jf(jx).block_until_ready()
    secs = interleaved(fns, rounds=rounds, number=3, warmup=12)  # flow: past the driver trial
    ms = {name: t * 1e3 for name, t in secs.items()}
    table("8-op elementwise chain, 16M f32 (64 MiB in, 64 MiB out), cpu", ms, "ms",
          "numpy eager", higher_is_better=False)  # fmt: skip
    copy_gbs = 2 * x.nbytes / secs["memory copy (np.copyto)"] / 1e9
    dev = secs["flow.jit (device input)"]
    print(f"  copy bandwidth {copy_gbs:.1f} GB/s (read + write); flow.jit reaches "
          f"{2 * x.nbytes / dev / 1e9:.1f} GB/s")  # fmt: skip
    return [
        Goal(
            "elementwise", "numpy eager / flow time, device input", secs["numpy eager"] / dev, 4.0
        ),
        Goal(
            "elementwise",
            "fraction of copy bandwidth, device input",
            secs["memory copy (np.copyto)"] / dev,
            0.7,
        ),  # fmt: skip
        Goal(
            "elementwise",
            "numpy eager / flow time, numpy input (info)",
            secs["numpy eager"] / secs["flow.jit (numpy input)"],
            0.0,
        ),  # fmt: skip
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    run(parser.parse_args().rounds)


if __name__ == "__main__":
    main()
