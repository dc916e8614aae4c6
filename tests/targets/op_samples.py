"""Every public op's sample, in batches: shared by test_op_samples.py and test_vulkan_ops.py.

The samples are the ones docs/ops.md is generated from (flow.tools.opdocs: every public op of
`flow` and `flow.nn.functional` on a small input). `_batched` makes one function that calls
every sample of a batch, so that a device target compiles one module per batch instead of one
per op (~1 s each, and a device compiles each dispatch again on its first call).
"""

from __future__ import annotations

import numpy as np

import flow
from flow.tools import opdocs

SAMPLES = opdocs._samples()
OPS = [name for name, _ in opdocs._public_ops() if name in SAMPLES]
SEED = 1234
NO_VULKAN = "no Vulkan device here (Mesa lavapipe: apt-get install mesa-vulkan-drivers libvulkan1)"
# Device math (exp, tanh, erf, ... and reduction order) is not bit-equal to numpy's.
RTOL, ATOL = 1e-4, 1e-5


def _results(out) -> list[np.ndarray]:
    return [t.numpy() for t in _tensors(out)]


def _tensors(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _cases() -> list[tuple[str, list[np.ndarray]]]:
    """(op, sample inputs) for every op whose sample returns tensors (not a Python value)."""
    cases = []
    for name in OPS:
        call, specs = SAMPLES[name]
        arrays = opdocs._arrays(specs, np.random.default_rng(0))
        if isinstance(call(*(flow.tensor(a) for a in arrays)), (flow.Tensor, tuple, list)):
            cases.append((name, arrays))
    return cases


CASES = _cases()


def _batch(i: int, batches: int) -> list[tuple[str, list[np.ndarray]]]:
    """The i-th of `batches` consecutive slices of CASES (the last ones may be shorter)."""
    size = -(-len(CASES) // batches)
    return CASES[i * size : (i + 1) * size]


def _eager(cases) -> list[list[np.ndarray]]:
    flow.manual_seed(SEED)
    return [_results(SAMPLES[n][0](*(flow.tensor(a) for a in arrays))) for n, arrays in cases]


def _batched(cases):
    """One function calling every sample of `cases` in order, on the flat list of inputs."""

    def run(*flat):
        out, i = [], 0
        for name, arrays in cases:
            out.append(SAMPLES[name][0](*flat[i : i + len(arrays)]))
            i += len(arrays)
        return out

    return run


def _mismatches(cases, got, want, target: str) -> list[str]:
    """What differs between `got` (the batch's results on `target`) and eager's `want`."""
    problems = []
    for (name, _), outs, refs in zip(cases, got, want):
        outs = _results(outs)
        for k, (o, r) in enumerate(zip(outs, refs)):
            where = f"{name} (output {k})"
            if o.dtype != r.dtype or o.shape != r.shape:
                problems.append(f"{where}: {o.dtype}{list(o.shape)} vs eager "
                                f"{r.dtype}{list(r.shape)}")  # fmt: skip
            elif not np.allclose(o.astype(np.float64), r.astype(np.float64), rtol=RTOL,
                                 atol=ATOL, equal_nan=True):  # fmt: skip
                err = np.nanmax(np.abs(o.astype(np.float64) - r.astype(np.float64)))
                w = max(len(target), len("eager"))
                problems.append(f"{where}: max |{target} - eager| = {err:.3g}\n  "
                                f"{target:<{w}} {o.ravel()[:6]}\n  {'eager':<{w}} "
                                f"{r.ravel()[:6]}")  # fmt: skip
        if len(outs) != len(refs):
            problems.append(f"{name}: {len(outs)} outputs vs eager {len(refs)}")
    return problems
