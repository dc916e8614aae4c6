"""Every public op's sample (the inputs `flow.tools.opdocs` runs each op on) compiled for the
target named by `FLOW_TEST_TARGET`, against the same program compiled for the cpu:

    FLOW_TEST_TARGET=cuda python -m pytest tests/targets/test_gpu_ops.py

Skipped without the variable, and when the target has no device here (the cpu-only
machines the suite usually runs on); `benchmarks/gpu_check.sh` sets it on a GPU machine.
The numeric op tests of tests/frontend take the same variable (their `flow.jit` runs).
`FLOW_TEST_SHARD=i/n` keeps every n-th sample from the i-th (for parallel processes).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import flow
from flow.tools.opdocs import _arrays, _samples

TARGET = os.environ.get("FLOW_TEST_TARGET", "").strip()
if not TARGET:  # one skip for the module, not one per op
    pytest.skip("set FLOW_TEST_TARGET (e.g. cuda) to run the op samples on a device",
                allow_module_level=True)  # fmt: skip
SAMPLES = _samples()
_SHARD, _, _SHARDS = os.environ.get("FLOW_TEST_SHARD", "0/1").partition("/")
NAMES = sorted(SAMPLES)[int(_SHARD) :: int(_SHARDS or 1)]
# Device math (exp, tanh, erf, ... and reduction order) is not bit-equal to the cpu's.
RTOL, ATOL = 1e-4, 1e-5


def _leaves(out) -> list:
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _leaves(o)]
    return [out]


@pytest.fixture(scope="module")
def target() -> str:
    from flow.targets import available, get_target

    name = get_target(TARGET).name
    if name not in available():
        pytest.skip(f"no {name} device here (usable: {', '.join(available())})")
    return name


@pytest.mark.parametrize("name", NAMES)
def test_op_sample(name, target):
    call, specs = SAMPLES[name]
    arrays = _arrays(specs, np.random.default_rng(0))

    def fn(*ts):
        return call(*ts)

    if not isinstance(call(*(flow.tensor(a) for a in arrays)), (flow.Tensor, tuple, list)):
        pytest.skip(f"{name} returns a Python value")
    flow.manual_seed(0)  # random ops: the same key for both programs
    want = _leaves(flow.jit(fn, target="cpu")(*arrays))
    flow.manual_seed(0)
    got = _leaves(flow.jit(fn, target=target)(*arrays))
    assert len(got) == len(want), f"{name}: {len(got)} outputs on {target}, {len(want)} on cpu"
    for i, (g, w) in enumerate(zip(got, want)):
        where = f"{name} output {i} on {target} vs cpu"
        assert tuple(g.shape) == tuple(w.shape), f"{where}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != {w.dtype}"
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=RTOL, atol=ATOL, err_msg=where)
