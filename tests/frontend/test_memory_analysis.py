"""`compiled.memory_analysis()` and `graph.memory_analysis()`: byte counts against numpy, the
peak estimate against IREE's allocator.

The argument and output sizes equal the numpy `nbytes` of the arrays the program takes and
returns. The peak estimate is checked against the peak of IREE's device allocator on the
`local-sync` cpu driver (local-task's statistics leave out its transient buffers), in a fresh
process per program, since the peak cannot be reset: one call of the program. Measured (IREE
3.13, x86 with AVX-512; peak / estimate): a jit of two 512x512 products 1.00, the README MLP
step at batch 64 1.38 (1.06 with `FLOW_CPU_FLAGS=untiled`: data tiling packs matmul operands
into copies the estimate does not see), the digits LeNet step at batch 256 2.02 (IREE's
transient slab, 4.73 MB, is twice the temporary peak of the op order); since its convolutions
lower to products of patches, 2.39 on an AVX2 machine (6.75 MB estimated with the patches,
16.1 MB measured). Bounds: 0.95 to 2.5.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flow
import flow.nn as nn

LOW, HIGH = 0.95, 2.5  # allocator peak / estimate, from the measurements above

_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np, flow, flow.nn as nn
from flow.targets.runtime import device_config

case = sys.argv[2]
flow.manual_seed(0)
if case == "jit":
    def f(x, w):
        return flow.tanh(flow.relu(x @ w) @ w) + 1.0
    x, w = flow.randn(512, 512), flow.randn(512, 512)
    compiled = flow.jit(f).lower(x, w).compile()
    out = compiled(x, w)
    memory = compiled.memory_analysis()
    arguments = x.numpy().nbytes + w.numpy().nbytes
    outputs = out.numpy().nbytes
else:
    if case == "mlp":
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
        x, y = flow.randn(64, 784), flow.randint(0, 10, (64,))
    else:
        from train_digits import LeNet
        model = LeNet()
        x, y = flow.randn(256, 1, 8, 8), flow.randint(0, 10, (256,))
    optimizer = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    class TrainStep(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(optimizer)

        def build(self, x, y):
            loss = nn.CrossEntropyLoss()(self.model(x), y)
            loss.backward()
            return loss

    step = TrainStep()
    loss = step(x, y)
    memory = step.memory_analysis()
    params = sum(p.numpy().nbytes for p in model.parameters())
    state = sum(v.numpy().nbytes for s in optimizer.state.values() for v in s.values()
                if isinstance(v, flow.Tensor))
    lr = np.float32(0).nbytes  # the learning rate, a 0-d input of the step
    arguments = x.numpy().nbytes + y.numpy().nbytes + params + state + lr
    outputs = loss.numpy().nbytes + params + state  # the loss, the updated parameters and state
peak = device_config("cpu").device.allocator.statistics["device_bytes_peak"]
print("RESULT " + json.dumps({"memory": memory.__dict__, "peak": peak, "arguments": arguments,
                              "outputs": outputs}))
"""


def _measure(case: str) -> dict:
    examples = str(Path(__file__).resolve().parents[2] / "examples")
    env = {**os.environ, "FLOW_SYNC_COMPILE": "1", "FLOW_CPU_DRIVER": "local-sync",
           "FLOW_CHECK_INDICES": "0"}  # no index-check results among the outputs
    proc = subprocess.run([sys.executable, "-c", _CHILD, examples, case], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line.split(" ", 1)[1])


@pytest.mark.parametrize("case", ["jit", "mlp", "lenet"])
def test_the_estimate_against_the_allocator_peak(case):
    got = _measure(case)
    memory = got["memory"]
    assert memory["argument_size_in_bytes"] == got["arguments"]
    assert memory["output_size_in_bytes"] == got["outputs"]
    assert memory["alias_size_in_bytes"] == 0
    estimate = memory["peak_live_bytes"]
    assert estimate >= memory["argument_size_in_bytes"] + memory["output_size_in_bytes"]
    ratio = got["peak"] / estimate
    print(f"{case}: estimate {estimate} bytes, allocator peak {got['peak']} ({ratio:.2f}x)")
    assert LOW <= ratio <= HIGH, f"{case}: allocator peak / estimate = {ratio:.2f}"


def test_the_api_on_a_jit_program_and_a_graph_before_its_first_call():
    def f(x):
        return (x * 2 + 1).tanh()

    x = flow.randn(8, 16)
    lowered = flow.jit(f).lower(x)
    memory = lowered.memory_analysis()  # nothing compiled for it
    assert memory.argument_size_in_bytes == x.numpy().nbytes
    assert memory.output_size_in_bytes == x.numpy().nbytes
    assert memory.temp_size_in_bytes == 0  # one fused elementwise chain: no value in between
    assert "peak live" in str(memory)

    class Forward(nn.Graph):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(16, 4)

        def build(self, x):
            return self.linear(x)

    graph = Forward()
    with pytest.raises(RuntimeError, match="Forward.memory_analysis: not compiled yet"):
        graph.memory_analysis()
    out = graph(x)
    memory = graph.memory_analysis()
    params = sum(p.numpy().nbytes for p in graph.linear.parameters())
    assert memory.argument_size_in_bytes == x.numpy().nbytes + params
    assert memory.output_size_in_bytes == out.numpy().nbytes
