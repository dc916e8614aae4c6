"""Training steps and compiled modules on the vulkan target give what the cpu gives.

nn.Graph steps of a small MLP (Adam: optimizer state made by the first step, so two programs)
and of the LeNet of examples/train_digits.py (SGD and a learning-rate schedule) with the model
moved to vulkan (no target=: the graph follows its parameters' device), against the same steps
run eagerly on the cpu from the same weights (the op tests' reference too; it saves compiling
every step twice); and `flow-run` of a module compiled for vulkan.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow.targets import available, compile_mlir
from flow.targets.runtime import reset_transfer_stats, transfer_stats

pytestmark = pytest.mark.skipif(
    "vulkan" not in available(),
    reason="no Vulkan device here (Mesa lavapipe: apt-get install mesa-vulkan-drivers libvulkan1)",
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Step(nn.Graph):
    def __init__(self, model, optimizer, scheduler=None):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(optimizer, lr_sch=scheduler)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


def _train(model, make_optimizer, batches, device):
    """The losses of one step per batch: an nn.Graph on `device`, eager on the cpu (None)."""
    model = copy.deepcopy(model).to(device or "cpu")
    optimizer = make_optimizer(model)
    scheduler = flow.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
    step = Step(model, optimizer, scheduler)
    losses = []
    for x, y in batches:
        if device is None:
            optimizer.zero_grad()
            losses.append(float(step.build(x.cpu(), y)))
            optimizer.step()
            scheduler.step()
        else:
            losses.append(float(step(x, y)))
    return losses, model


def _compare(model, make_optimizer, batches):
    cpu_losses, cpu_model = _train(model, make_optimizer, batches, None)
    reset_transfer_stats()
    vk_losses, vk_model = _train(model, make_optimizer, batches, "vulkan")
    np.testing.assert_allclose(vk_losses, cpu_losses, rtol=1e-4, atol=1e-6)
    for (name, p), (_, q) in zip(vk_model.named_parameters(), cpu_model.named_parameters()):
        assert p.device == "vulkan:0", name
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    return transfer_stats()


def _batches(shape, classes, n, seed=0):
    rng = np.random.default_rng(seed)
    return [(flow.tensor(rng.standard_normal(shape).astype(np.float32)),
             flow.tensor(rng.integers(0, classes, shape[0]).astype(np.int64)))
            for _ in range(n)]  # fmt: skip


def test_mlp_training_on_vulkan_matches_cpu():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))
    stats = _compare(model, lambda m: flow.optim.Adam(m.parameters(), lr=0.01),
                     _batches((8, 12), 5, 3))  # fmt: skip
    # from the second step on, parameters and Adam's state are passed back as device buffers
    assert stats.resident_args >= 4 + 8


def test_lenet_of_the_digits_example_trains_on_vulkan_like_cpu():
    pytest.importorskip("sklearn", reason="the digits example: pip install -e '.[examples]'")
    pytest.importorskip("tqdm", reason="the digits example: pip install -e '.[examples]'")
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLES / "train_digits.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    flow.manual_seed(0)
    model = example.LeNet()
    batches = [(x.to("vulkan"), y) for x, y in _batches((16, 1, 8, 8), 10, 2)]
    # no momentum: its state would take a second program (covered by the MLP's Adam), which
    # doubles the cold compile time of the test (2 x ~10 s)
    _compare(model, lambda m: flow.optim.SGD(m.parameters(), lr=0.05), batches)


MODULE = """\
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
                       affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.mulf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def test_flow_run_executes_a_vulkan_module(tmp_path, capsys):
    from flow.tools.run import main

    path = tmp_path / "mul.vmfb"
    path.write_bytes(compile_mlir(MODULE, "vulkan"))
    out = tmp_path / "out.npy"
    rc = main([str(path), "--target", "vulkan", "--input", "4xf32=1,2,3,4",
               "--input", "4xf32=2", "--output", str(out)])  # fmt: skip
    assert rc == 0
    assert "result[0]: 4xf32" in capsys.readouterr().out
    assert np.load(out).tolist() == [2.0, 4.0, 6.0, 8.0]


def test_an_int64_index_shared_by_two_gathers():
    """One `j.to(int64)` indexing twice, with negative entries. IREE used to keep the widened
    index in workgroup memory, where lavapipe read it back zero-extended (wrong rows for
    negative indices); flow-fuse-elementwise now redoes a shared cast in each consumer (so
    with FLOW_FUSION=0 lavapipe still gets this wrong)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    j = np.array([3, -4], np.int32)

    def f(t, j):
        k = j.to(flow.int64)
        return t[:, k], t[:, 1, k], t[k // 2, 2, :]

    got = flow.jit(f, target="vulkan")(x, j)
    for g, want in zip(got, (x[:, j], x[:, 1, j], x[j // 2, 2, :])):
        np.testing.assert_array_equal(g.numpy(), want)
