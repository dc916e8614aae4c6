"""Toolchain speed: flow-opt on a long elementwise chain, compile time cold and cached, and
the per-call overhead of a tiny compiled function.

    python benchmarks/toolchain.py [--ops 5000]

Measures, in one run:
  * `flow-opt -p flow-to-iree-input` on an N-op elementwise chain (whole CLI process,
    and the in-process parse / pipeline / generic print split);
  * a jitted MLP forward: first call in a fresh process with an empty compile cache
    (cold compile), first call in a fresh process with a warm on-disk cache (cached
    compile: trace, lowering, cache hit, module load and the call), and the
    steady-state call, beside numpy (and jax.jit / torch if installed) on the same MLP;
  * the per-call overhead of a tiny jitted function (4 floats, one add) on the
    default driver and on local-sync, beside numpy, jax.jit and torch eager; with the
    result left on the device (flow maps it when read, as jax copies it), and read.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from _bench import Goal, interleaved, machine, optional, settle

HERE = os.path.dirname(os.path.abspath(__file__))


def chain_ir(n: int) -> str:
    ops = ["add", "mul", "sub", "maximum"]
    lines = [
        "func.func @chain(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {"
    ]
    prev = "%a"
    for i in range(n):
        lines.append(f"  %v{i} = flow.{ops[i % 4]} {prev}, %b : tensor<64x64xf32>")
        prev = f"%v{i}"
    lines += [f"  func.return {prev} : tensor<64x64xf32>", "}"]
    return "\n".join(lines) + "\n"


def bench_flow_opt(n: int) -> None:
    from xdsl.parser import Parser

    from flow.dialect import make_context
    from flow.lowering import run_pipeline, to_iree_text

    text = chain_ir(n)
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(text)
    t0 = time.perf_counter()
    subprocess.run(["flow-opt", f.name, "-p", "flow-to-iree-input", "-o", os.devnull], check=True)
    cli = time.perf_counter() - t0
    os.unlink(f.name)

    t0 = time.perf_counter()
    module = Parser(make_context(), text).parse_module()
    t1 = time.perf_counter()
    module = run_pipeline(module, "flow-to-iree-input")
    t2 = time.perf_counter()
    out = to_iree_text(module)
    t3 = time.perf_counter()
    print(f"flow-opt -p flow-to-iree-input, {n}-op elementwise chain:")
    print(f"  CLI process total      {cli:8.2f} s")
    print(f"  in-process parse       {t1 - t0:8.2f} s")
    print(f"  in-process pipeline    {t2 - t1:8.2f} s")
    print(f"  generic print          {t3 - t2:8.2f} s   ({len(out) / 1e6:.1f} MB of IR)")


MLP_CHILD = r"""
import time, numpy as np
t0 = time.perf_counter()
import flow
def mlp(x, w1, b1, w2, b2):
    return flow.relu(x @ w1 + b1) @ w2 + b2
rng = np.random.default_rng(0)
p = [rng.standard_normal(s).astype(np.float32) for s in [(64, 784), (784, 256), (256,), (256, 10), (10,)]]
t1 = time.perf_counter()
f = flow.jit(mlp)
f(*p)
t2 = time.perf_counter()
print(f"{t1 - t0} {t2 - t1}")
"""


def bench_mlp(repeats: int = 200) -> float:
    """Print the MLP forward's compile and call times; return the cached-compile seconds."""
    import flow

    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, FLOW_CACHE_DIR=cache)
        runs = []
        for _ in range(2):  # empty cache, then warm on-disk cache
            out = subprocess.run(
                [sys.executable, "-c", MLP_CHILD],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            runs.append((float(out[0]), float(out[1])))

    rng = np.random.default_rng(0)
    p = [
        rng.standard_normal(s).astype(np.float32)
        for s in [(64, 784), (784, 256), (256,), (256, 10), (10,)]
    ]
    f = flow.jit(lambda x, w1, b1, w2, b2: flow.relu(x @ w1 + b1) @ w2 + b2)
    f(*p)
    settle(f)
    tensors = [flow.tensor(a) for a in p]

    def timeit(fn) -> float:
        fn()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(repeats // 5):
                fn()
            best = min(best, (time.perf_counter() - t0) / (repeats // 5))
        return best

    flow_call = timeit(lambda: f(*tensors))
    np_call = timeit(lambda: np.maximum(p[0] @ p[1] + p[2], 0) @ p[3] + p[4])
    print("jitted MLP forward (64x784 -> 256 -> 10, f32, cpu):")
    print(f"  import flow                       {runs[0][0] * 1e3:8.1f} ms")
    print(f"  first call, empty compile cache   {runs[0][1] * 1e3:8.1f} ms")
    print(f"  first call, warm on-disk cache    {runs[1][1] * 1e3:8.1f} ms")
    print(f"  cached call (steady state)        {flow_call * 1e3:8.3f} ms")
    print(
        f"  numpy eager, same MLP             {np_call * 1e3:8.3f} ms   "
        f"(flow/numpy = {flow_call / np_call:.2f}x)"
    )
    jax = optional("jax")
    if jax is not None:
        jnp = jax.numpy
        jf = jax.jit(lambda x, w1, b1, w2, b2: jnp.maximum(x @ w1 + b1, 0) @ w2 + b2)
        t0 = time.perf_counter()
        jf(*p).block_until_ready()
        jfirst = time.perf_counter() - t0
        jcall = timeit(lambda: jf(*p).block_until_ready())
        print(f"  jax.jit first call                {jfirst * 1e3:8.1f} ms")
        print(
            f"  jax.jit cached call               {jcall * 1e3:8.3f} ms   "
            f"(flow/jax = {flow_call / jcall:.2f}x)"
        )
    return runs[1][1]


def bench_call_overhead() -> dict[str, float]:
    """Seconds per call of a tiny function (4 floats, x + 1), flow and peers."""
    import flow
    from flow.targets import load

    x = np.arange(4, dtype=np.float32)
    f = flow.jit(lambda v: v + 1.0)
    xt = flow.tensor(x)
    f(xt)
    settle(f)
    (program,) = f._cache.values()
    compiled = getattr(program, "compiled", program)  # of a Tiered program: its compiled tier
    for _ in range(12):  # past the driver trial of the first calls
        f(xt)
    fns = {f"flow.jit (chose {compiled._fn.module.driver})": lambda: f(xt),
           "  and read (.numpy())": lambda: f(xt).numpy()}  # fmt: skip
    for driver in ("local-task", "local-sync"):
        module = load(compiled.vmfb, "cpu", driver=driver)
        fns[f"  IREE call alone ({driver})"] = functools.partial(module[module.names[0]], x)
    fns["numpy"] = lambda: x + 1.0
    torch = optional("torch")
    if torch is not None:
        tx = torch.from_numpy(x)
        fns["torch eager"] = lambda: tx + 1.0
    jax = optional("jax")
    if jax is not None:
        jf = jax.jit(lambda v: v + 1.0)
        jx = jax.numpy.asarray(x)
        fns["jax.jit"] = lambda: jf(jx).block_until_ready()
        fns["  and read (np.asarray)"] = lambda: np.asarray(jf(jx))
    secs = interleaved(fns, rounds=7, number=500)
    print("per-call overhead, tiny function (4 f32, x + 1):")
    for name, t in secs.items():
        print(f"  {name:36} {t * 1e6:8.1f} us")
    return secs


def run(ops: int = 5000) -> list[Goal]:
    print(f"toolchain [{machine()}]")
    bench_flow_opt(ops)
    cached = bench_mlp()
    secs = bench_call_overhead()
    goals = [
        Goal("toolchain", "50 ms / cached compile (first call, warm cache)", 0.05 / cached, 1.0)
    ]
    if "jax.jit" in secs:
        flow_call = next(t for name, t in secs.items() if name.startswith("flow.jit"))
        goals.append(Goal("toolchain", "jax.jit / flow.jit tiny-call time (within 3x)",
                          secs["jax.jit"] / flow_call, 1 / 3))  # fmt: skip
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=5000)
    run(parser.parse_args().ops)


if __name__ == "__main__":
    main()
