"""flow.device: device objects, tensor and module devices, programs following their tensors'
device, and clear errors for devices this machine does not have (frontend/_device.py)."""

from __future__ import annotations

import numpy as np
import pytest

import flow
from flow.targets import RuntimeUnavailableError, available, cache_stats
from flow.targets.runtime import reset_transfer_stats, transfer_stats

needs_vulkan = pytest.mark.skipif(
    "vulkan" not in available(),
    reason="no Vulkan device here (Mesa lavapipe: apt-get install mesa-vulkan-drivers libvulkan1)",
)
no_cuda = pytest.mark.skipif("cuda" in available(), reason="this machine has a CUDA device")


# --------------------------------------------------------------------------- device objects


@pytest.mark.parametrize(("spec", "type_", "index", "text", "target"), [
    ("cpu", "cpu", None, "device(type='cpu')", "cpu"),
    ("cuda:0", "cuda", 0, "device(type='cuda', index=0)", "cuda"),
    ("rocm:1", "rocm", 1, "device(type='rocm', index=1)", "rocm"),
    ("hip", "rocm", None, "device(type='rocm')", "rocm"),
    ("vulkan", "vulkan", None, "device(type='vulkan')", "vulkan"),
])  # fmt: skip
def test_device_parses_like_torch(spec, type_, index, text, target):
    d = flow.device(spec)
    assert (d.type, d.index, repr(d), d.target) == (type_, index, text, target)
    assert str(d) == (type_ if index is None else f"{type_}:{index}")
    assert d == flow.device(type_, index) == str(d) and hash(d) == hash(flow.device(str(d)))
    assert flow.device(d) == d


def test_device_equality_and_bad_names():
    assert flow.device("cuda") != flow.device("cuda:0")
    assert flow.device("cpu") != "tpu"
    with pytest.raises(ValueError, match="unknown device type 'tpu'; expected one of: cpu, cuda"):
        flow.device("tpu:0")
    with pytest.raises(ValueError, match="invalid device index"):
        flow.device("cuda:x")
    with pytest.raises(ValueError, match="already has an index"):
        flow.device("cuda:0", 1)


def test_tensors_and_modules_start_on_the_cpu():
    x = flow.ones(2, 3)
    assert x.device == "cpu" and x.device == flow.device("cpu") and str(x.device) == "cpu"
    assert x.to("cpu") is x and x.cpu() is x
    net = flow.nn.Linear(3, 2)
    assert net.to("cpu") is net and net.weight.device == "cpu"


def test_placement_types_name_targets():
    assert flow.placement("vulkan", [0]).type == "vulkan"
    assert flow.placement(type="rocm", ranks=[0]).type == "rocm"
    with pytest.raises(ValueError, match="type must be one of cpu, cuda, rocm, hip, vulkan"):
        flow.placement("tpu", [0])


# --------------------------------------------------------------------------- missing devices


@no_cuda
def test_moving_to_a_missing_device_says_what_is_here():
    with pytest.raises(RuntimeUnavailableError) as info:
        flow.ones(2).to("cuda:0")
    msg = str(info.value)
    assert msg.startswith("no CUDA device: target 'cuda' needs the IREE runtime driver 'cuda'")
    assert f"targets usable here: {', '.join(available())}" in msg
    with pytest.raises(RuntimeUnavailableError, match="no CUDA device"):
        flow.nn.Linear(2, 2).to(flow.device("cuda", 0))
    with pytest.raises(RuntimeUnavailableError, match="no CUDA device"):
        flow.ones(2).cuda()


@no_cuda
@pytest.mark.skipif("rocm" in available(), reason="this machine has a ROCm device")
def test_running_on_a_missing_target_fails_before_compiling():
    """The error comes at the call, before any lowering or IREE work (no cache lookup)."""
    before = cache_stats()
    with pytest.raises(RuntimeUnavailableError, match="no CUDA device.*targets usable here: cpu"):
        flow.jit(lambda a: a + 1, target="cuda")(np.ones(3, np.float32))

    class Step(flow.nn.Graph):
        def build(self, x):
            return x * 2

    with pytest.raises(RuntimeUnavailableError, match=r"no ROCm \(HIP\) device.*driver 'hip'"):
        Step(target="rocm")(flow.ones(2))
    after = cache_stats()
    assert (after.misses, after.hits) == (before.misses, before.hits)


def test_compiling_for_a_missing_device_still_works():
    lowered = flow.jit(lambda a: a + 1).lower(np.ones(3, np.float32))
    from flow.lowering import run_pipeline, to_iree_text
    from flow.targets import compile_mlir

    text = to_iree_text(run_pipeline(lowered.module.clone(), "flow-to-iree-input"))
    assert compile_mlir(text, "cuda")[:4] and compile_mlir(text, "rocm")[:4]


# --------------------------------------------------------------------------- on vulkan


@needs_vulkan
def test_tensor_to_vulkan_keeps_its_value_and_eager_ops_keep_the_device():
    x = flow.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    v = x.to("vulkan")
    assert v.device == flow.device("vulkan", 0) and x.device == "cpu"
    assert v.to(flow.device("vulkan:0")) is v
    np.testing.assert_array_equal(v.numpy(), x.numpy())
    y = (v * 2 + x).sum(1)  # cpu tensors combine with a device's tensors
    assert y.device == "vulkan:0" and "device='vulkan:0'" in repr(y)
    back = y.cpu()
    assert back.device == "cpu" and back.numpy().tolist() == [9.0, 36.0]
    assert v.to("vulkan", flow.float64).dtype is flow.float64


@needs_vulkan
def test_moving_to_a_device_is_differentiable():
    x = flow.ones(3).requires_grad_()
    (x.to("vulkan") * 2).sum().backward()
    assert x.grad.numpy().tolist() == [2.0, 2.0, 2.0]


@needs_vulkan
def test_tensors_of_two_devices_do_not_mix():
    v = flow.ones(2).to("vulkan")
    other = flow.ones(2)
    other._device = flow.device("cuda", 0)  # as if moved there: this machine may have none
    with pytest.raises(RuntimeError, match="expected all tensors on one device, got"):
        v + other
    with pytest.raises(RuntimeError, match="expected all tensors on one device"):
        flow.jit(lambda a, b: a + b)(v, other)


@needs_vulkan
def test_jit_runs_on_the_device_of_its_inputs():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = flow.jit(lambda a: (a * 2).sum(1))
    assert f.target is None
    reset_transfer_stats()
    on_cpu = f(flow.tensor(x))
    assert on_cpu.device == "cpu" and transfer_stats().read_backs == 0
    on_vulkan = f(flow.tensor(x).to("vulkan"))
    assert on_vulkan.device == "vulkan:0"
    assert transfer_stats().read_backs == 1  # results come back through a staging buffer
    np.testing.assert_array_equal(on_vulkan.numpy(), on_cpu.numpy())
    # a result passed back stays on the device: no upload
    g = flow.jit(lambda a: a + 1)
    reset_transfer_stats()
    g(on_vulkan)
    assert transfer_stats().resident_args == 1 and transfer_stats().uploads == 0


@needs_vulkan
def test_explicit_target_must_agree_with_the_tensors():
    v = flow.ones(2).to("vulkan")
    with pytest.raises(RuntimeError, match=r"target='cpu' but the tensors are on vulkan:0"):
        flow.jit(lambda a: a + 1, target="cpu")(v)
    out = flow.jit(lambda a: a + 1, target="vulkan")(flow.ones(2))  # cpu inputs go anywhere
    assert out.device == "vulkan:0"


@needs_vulkan
def test_module_to_vulkan_moves_parameters_and_programs_follow():
    net = flow.nn.Linear(3, 2)
    weight = net.weight
    assert net.to("vulkan") is net and net.weight is weight
    assert {str(p.device) for p in net.parameters()} == {"vulkan:0"}
    x = flow.ones(4, 3)
    out = flow.jit(lambda a: net(a))(x)  # the parameters are captured: they pick vulkan
    assert out.device == "vulkan:0"
    np.testing.assert_allclose(out.numpy(), net(x).numpy(), rtol=1e-6)
    assert net.to("cpu").weight.device == "cpu"


@needs_vulkan
def test_a_second_device_that_is_not_here_is_an_error():
    from flow.targets import device_names

    n = len(device_names("vulkan"))
    with pytest.raises(
        RuntimeUnavailableError, match=f"no vulkan device {n}: this machine has {n}"
    ):
        flow.ones(2).to(f"vulkan:{n}")


def test_ranks_of_a_node_spread_over_its_devices(monkeypatch):
    """Local rank r takes device r mod n of a driver with n devices (a node with several GPUs);
    local rank 0, and a driver with one device, take the driver's default device."""
    from flow.targets import runtime

    made = []

    class Driver:
        def query_available_devices(self):
            return [{"device_id": i, "name": f"gpu{i}"} for i in range(3)]

        def create_device(self, info):
            made.append(info["device_id"])
            return info["name"]

    monkeypatch.setattr(runtime.rt, "get_driver", lambda name: Driver())
    monkeypatch.setattr(runtime.rt, "get_device", lambda name, **_: "default")
    for rank, want in [(0, "default"), (1, "gpu1"), (4, "gpu1"), (5, "gpu2")]:
        monkeypatch.setattr(runtime, "_local_rank", rank)
        assert runtime._rank_device("cuda") == want
    assert made == [1, 1, 2]
