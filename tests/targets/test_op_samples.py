"""Every public op's sample, compiled for a device target, gives what the eager (numpy) op gives.

The targets: `vulkan` always, and the target named by `FLOW_TEST_TARGET` when it is another
device (`cuda`, `rocm` or its alias `hip`); a target with no device here is a skip that says
so. `benchmarks/gpu_check.sh` runs the cuda batches on a GPU machine:

    FLOW_TEST_TARGET=cuda python -m pytest tests/targets/test_op_samples.py -k cuda

The samples (op_samples.py: the inputs docs/ops.md is generated from) run in batches: one
traced function per batch calls every sample of it, so a target compiles one module per
batch, not one per op (measured cold on lavapipe, all 198 ops: ~4 minutes one by one, under a
minute in one module). Random ops are compared too: compiled code draws the numbers eager
code draws from the same seed (frontend/_random.py). A batch that fails to compile or run is
compiled again op by op, and the failure names the ops that fail alone.

    FLOW_TEST_BATCHES=n   the number of batches per target (default 4)
    FLOW_TEST_SHARD=i/n   only the batches k with k % n == i (for n parallel processes)
"""

from __future__ import annotations

import os

import pytest
from op_samples import CASES, NO_VULKAN, OPS, SEED, _batch, _batched, _eager, _mismatches, _tensors

import flow
from flow.targets import available, get_target

BATCHES = int(os.environ.get("FLOW_TEST_BATCHES", "4"))
_SHARD, _, _SHARDS = os.environ.get("FLOW_TEST_SHARD", "0/1").partition("/")
SHARD, SHARDS = int(_SHARD), int(_SHARDS or 1)
if BATCHES < 1 or not 0 <= SHARD < SHARDS:
    raise ValueError(f"FLOW_TEST_BATCHES={BATCHES} must be >= 1 and FLOW_TEST_SHARD="
                     f"{SHARD}/{SHARDS} must be i/n with 0 <= i < n")  # fmt: skip


def _target_name(name: str) -> str:
    """`flow.targets.get_target`'s name for `name`; a device name (`hip`, `cuda:0`) counts as
    its type, as in `flow.device`."""
    try:
        name = flow.device(name).type
    except ValueError:
        pass
    return get_target(name).name


def _targets() -> list[str]:
    extra = os.environ.get("FLOW_TEST_TARGET", "").strip()
    name = _target_name(extra) if extra else "vulkan"
    return ["vulkan"] if name == "vulkan" or name.startswith("cpu") else ["vulkan", name]


TARGETS = _targets()


def _no_device(target: str) -> str | None:
    """Why `target` cannot run here, or None when it can."""
    if target in available():
        return None
    if target == "vulkan":
        return NO_VULKAN
    return f"no {target} device here (targets usable here: {', '.join(available())})"


def _params() -> list:
    params = []
    for target in TARGETS:
        reason = _no_device(target)
        for k in range(BATCHES):
            cases = _batch(k, BATCHES)
            if k % SHARDS != SHARD or not cases:
                continue
            params.append(
                pytest.param(
                    target, k, id=f"{target}-{k}-{cases[0][0]}-{cases[-1][0]}",
                    marks=pytest.mark.skipif(reason is not None, reason=reason or ""),
                )
            )  # fmt: skip
    return params


def test_samples_cover_every_public_op_and_batches_cover_every_sample():
    assert len(CASES) > 150
    assert sum(len(_batch(i, BATCHES)) for i in range(BATCHES)) == len(CASES)
    assert [c for i in range(BATCHES) for c in _batch(i, BATCHES)] == CASES
    returning_values = set(OPS) - {n for n, _ in CASES}
    assert returning_values <= {"numel", "is_floating_point", "is_nonzero", "is_complex"}


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def _failing_alone(cases, target: str) -> list[str]:
    """The ops of `cases` that fail on `target` compiled one by one, each with its error."""
    failing = []
    for name, arrays in cases:
        flow.manual_seed(SEED)
        try:
            flow.jit(_batched([(name, arrays)]), target=target)(*arrays)
        except Exception as err:
            failing.append(f"{name}: {_first_line(err)}")
    return failing


@pytest.mark.parametrize("target, batch", _params())
def test_public_ops_match_eager(target, batch):
    cases = _batch(batch, BATCHES)
    want = _eager(cases)
    flat = [a for _, arrays in cases for a in arrays]
    fn = flow.jit(_batched(cases), target=target)
    flow.manual_seed(SEED)
    try:
        got = fn(*flat)
    except Exception as err:
        alone = _failing_alone(cases, target)
        raise AssertionError(
            f"batch {batch} fails on {target} ({_first_line(err)}); ops that fail alone:\n  "
            + ("\n  ".join(alone) or "none")
        ) from err
    problems = _mismatches(cases, got, want, target)
    assert not problems, "\n".join(problems)
    outs = [t for out in got for t in _tensors(out)]
    assert {str(t.device) for t in outs} == {f"{target}:0"}
