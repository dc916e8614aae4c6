"""Creation ops take OneFlow's keyword set: dtype, device, placement, sbp, requires_grad (and
generator for the random ones, pin_memory where OneFlow takes it).

Each case is written once with OneFlow's spelling and called on `flow` and, for the cross-checks,
on `torch`, which spells these ops the same way. Fixed-value ops are compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import flow
from flow.targets import RuntimeUnavailableError, available

X = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -4.0]], np.float32)
"""The input of the `*_like` ops."""


def like(m):
    return m.tensor(X)


# name -> (call on a module taking the keywords, numpy reference of the values or None for
# random or unspecified values). Every result here has a floating-point dtype.
FLOAT_CASES = {
    "randn": (lambda m, **kw: m.randn(2, 3, **kw), None),
    "rand": (lambda m, **kw: m.rand(2, 3, **kw), None),
    "normal": (lambda m, **kw: m.normal(0.0, 1.0, (2, 3), **kw), None),
    "randint": (lambda m, **kw: m.randint(0, 5, (2, 3), **kw), None),
    "randperm": (lambda m, **kw: m.randperm(6, **kw), None),
    "zeros": (lambda m, **kw: m.zeros(2, 3, **kw), np.zeros((2, 3))),
    "zeros_tuple": (lambda m, **kw: m.zeros((2, 3), **kw), np.zeros((2, 3))),
    "ones": (lambda m, **kw: m.ones(2, 3, **kw), np.ones((2, 3))),
    "full": (lambda m, **kw: m.full((2, 3), 1.5, **kw), np.full((2, 3), 1.5)),
    "empty": (lambda m, **kw: m.empty(2, 3, **kw), None),
    "arange": (lambda m, **kw: m.arange(0.0, 3.0, 0.5, **kw), np.arange(0.0, 3.0, 0.5)),
    "linspace": (lambda m, **kw: m.linspace(0, 1, 5, **kw), np.linspace(0, 1, 5)),
    "logspace": (lambda m, **kw: m.logspace(0, 2, 5, **kw), np.logspace(0, 2, 5)),
    "eye": (lambda m, **kw: m.eye(3, 2, **kw), np.eye(3, 2)),
    "tensor": (lambda m, **kw: m.tensor([1.0, 2.0], **kw), np.array([1.0, 2.0])),
    "zeros_like": (lambda m, **kw: m.zeros_like(like(m), **kw), np.zeros_like(X)),
    "ones_like": (lambda m, **kw: m.ones_like(like(m), **kw), np.ones_like(X)),
    "full_like": (lambda m, **kw: m.full_like(like(m), 2.5, **kw), np.full_like(X, 2.5)),
    "empty_like": (lambda m, **kw: m.empty_like(like(m), **kw), None),
    "randn_like": (lambda m, **kw: m.randn_like(like(m), **kw), None),
    "rand_like": (lambda m, **kw: m.rand_like(like(m), **kw), None),
    "randint_like": (lambda m, **kw: m.randint_like(like(m), 0, 5, **kw), None),
}
RANDOM = {"randn", "rand", "normal", "randint", "randperm", "randn_like", "rand_like",
          "randint_like"}  # fmt: skip
LIKE = {name for name in FLOAT_CASES if name.endswith("_like")}
INT64_DEFAULT = {"randint", "randperm"}
"""Ops whose default int64 cannot require grad: the cases give them a float dtype."""


def make(name, **kw):
    if name in INT64_DEFAULT and "dtype" not in kw:
        kw["dtype"] = flow.float32
    return FLOAT_CASES[name][0](flow, **kw)


def check_values(name, out, dtype):
    ref = FLOAT_CASES[name][1]
    if ref is not None:
        np.testing.assert_allclose(out.numpy(), ref.astype(dtype.np_dtype), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_requires_grad_makes_a_leaf_that_receives_its_gradient(name):
    out = make(name, requires_grad=True)
    assert out.requires_grad and out.is_leaf and out.grad is None
    assert not make(name).requires_grad
    check_values(name, out, out.dtype)
    w = np.random.default_rng(0).standard_normal(tuple(out.shape)).astype(out.dtype.np_dtype)
    (out * flow.tensor(w)).sum().backward()
    assert out.grad is not None and out.grad.dtype is out.dtype
    np.testing.assert_allclose(out.grad.numpy(), w)


@pytest.mark.parametrize("device", ["cpu", flow.device("cpu")], ids=["str", "flow.device"])
@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_device_and_dtype(name, device):
    out = make(name, device=device, dtype=flow.float64)
    assert out.dtype is flow.float64 and out.device == flow.device("cpu")
    assert out.device == flow.zeros(1).to(device).device and out.is_local
    check_values(name, out, flow.float64)


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_keywords_do_not_change_the_draw(name):
    flow.manual_seed(7)
    plain = make(name, dtype=flow.float64)
    flow.manual_seed(7)
    keyed = make(name, dtype=flow.float64, device="cpu", requires_grad=True)
    np.testing.assert_array_equal(keyed.numpy(), plain.numpy())
    gen = flow.Generator().manual_seed(7)
    np.testing.assert_array_equal(make(name, generator=gen, requires_grad=True).numpy(),
                                  make(name, generator=flow.Generator().manual_seed(7)).numpy())
    assert not np.array_equal(make(name, generator=gen).numpy(),
                              make(name, generator=flow.Generator().manual_seed(7)).numpy())


@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    kw = {"dtype": torch.float64} if name in INT64_DEFAULT else {}
    want = FLOAT_CASES[name][0](torch, requires_grad=True, device="cpu", **kw)
    got = make(name, requires_grad=True, device="cpu", **({"dtype": flow.float64} if kw else {}))
    assert tuple(got.shape) == tuple(want.shape)
    assert got.dtype.np_dtype == np.dtype(str(want.dtype).removeprefix("torch."))
    assert (got.requires_grad, got.is_leaf) == (want.requires_grad, want.is_leaf)
    if FLOAT_CASES[name][1] is not None:
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-6)


def test_like_ops_keep_the_input_dtype_unless_given():
    x = flow.tensor(X, dtype=flow.float64)
    for op in (flow.zeros_like, flow.ones_like, flow.empty_like, flow.randn_like, flow.rand_like,
               lambda x, **kw: flow.full_like(x, 1.0, **kw),
               lambda x, **kw: flow.randint_like(x, 5, **kw)):  # fmt: skip
        assert op(x).dtype is flow.float64
        assert op(x, dtype=flow.float16).dtype is flow.float16
    assert flow.randint_like(flow.tensor([[1, 2]], dtype=flow.int32), 5).dtype is flow.int32


INT_CASES = {
    "zeros": lambda m: m.zeros(2, dtype=m.int64, requires_grad=True),
    "ones_bool": lambda m: m.ones(2, dtype=m.bool, requires_grad=True),
    "full": lambda m: m.full((2,), 3, requires_grad=True),
    "arange": lambda m: m.arange(5, requires_grad=True),
    "eye": lambda m: m.eye(2, dtype=m.int32, requires_grad=True),
    "tensor": lambda m: m.tensor([1, 2], requires_grad=True),
    "randint": lambda m: m.randint(0, 5, (2,), requires_grad=True),
    "randperm": lambda m: m.randperm(3, requires_grad=True),
    "zeros_like": lambda m: m.zeros_like(m.tensor([1, 2]), requires_grad=True),
    "full_like": lambda m: m.full_like(m.tensor([1.0]), 2, dtype=m.int32, requires_grad=True),
    "randint_like": lambda m: m.randint_like(m.tensor([1, 2]), 5, requires_grad=True),
}


@pytest.mark.parametrize("name", sorted(INT_CASES))
def test_requires_grad_with_an_integer_dtype_is_an_error(name):
    with pytest.raises(RuntimeError, match=f"^{name.split('_bool')[0]}: Only Tensors of floating "
                                           "point dtype can require gradients, got flow"):
        INT_CASES[name](flow)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        INT_CASES[name](torch)


@pytest.mark.skipif("cuda" in available(), reason="this machine has a CUDA device")
@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_cuda_without_a_gpu_gives_the_error_to_gives(name):
    with pytest.raises(RuntimeUnavailableError) as want:
        flow.zeros(1).to("cuda")
    with pytest.raises(RuntimeUnavailableError) as got:
        make(name, device="cuda")
    assert str(got.value) == str(want.value)


# the non-cpu devices usable here: on a CUDA machine the placement is checked on cuda too
DEVICES = [d for d in ("cuda", "vulkan") if d in available()]


@pytest.mark.skipif(not DEVICES, reason="no cuda or Vulkan device here")
@pytest.mark.parametrize("device", DEVICES)
def test_a_device_places_the_result_like_to_does(device):
    vk = flow.zeros(1).to(device).device
    for name in sorted(FLOAT_CASES):
        out = make(name, device=device, requires_grad=True)
        assert out.device == vk and out.is_leaf, name
    x = flow.tensor(X).to(device)
    assert flow.zeros_like(x).device == vk and flow.randn_like(x).device == vk
    assert flow.full_like(x, 1.0, device="cpu").device == flow.device("cpu")


def test_randperm_is_a_permutation_drawn_from_the_generator():
    for n in (0, 1, 2, 7, 50):
        assert sorted(flow.randperm(n).tolist()) == list(range(n))
    assert flow.randperm(4).dtype is flow.int64
    def draw():
        return flow.randperm(20, generator=flow.Generator().manual_seed(5)).tolist()

    assert draw() == draw() and draw() != list(range(20))
    with pytest.raises(ValueError, match="^randperm: expected n >= 0, got -1"):
        flow.randperm(-1)


def test_logspace_matches_torch():
    torch = pytest.importorskip("torch")
    for args, kw in (((0, 3, 4), {}), ((-2, 2, 5), {"base": 2}), ((1, 2, 3), {"dtype": "f8"}),
                     ((0, 1, 0), {}), ((0, 2, 3), {"dtype": "i8"})):  # fmt: skip
        dt = {"f8": (flow.float64, torch.float64), "i8": (flow.int64, torch.int64)}
        fk, tk = dict(kw), dict(kw)
        if "dtype" in kw:
            fk["dtype"], tk["dtype"] = dt[kw["dtype"]]
        got, want = flow.logspace(*args, **fk), torch.logspace(*args, **tk)
        assert got.dtype.np_dtype == want.numpy().dtype
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_as_tensor_shares_memory_and_takes_dtype_and_device():
    a = np.arange(4.0)
    t = flow.as_tensor(a)
    assert t.dtype is flow.float64 and np.shares_memory(t.numpy(), a)
    assert flow.as_tensor(t) is t and flow.as_tensor(t, device="cpu") is t
    c = flow.as_tensor(a, dtype=flow.float32, device=flow.device("cpu"))
    assert c.dtype is flow.float32 and not np.shares_memory(c.numpy(), a)
    np.testing.assert_array_equal(flow.as_tensor([1, 2], dtype=flow.float64).numpy(), [1.0, 2.0])
    if "cuda" not in available():
        with pytest.raises(RuntimeUnavailableError, match="no CUDA device"):
            flow.as_tensor([1.0], device="cuda")


NEW_CASES = {
    "new_zeros": (lambda x, **kw: x.new_zeros(2, 3, **kw), np.zeros((2, 3))),
    "new_zeros_tuple": (lambda x, **kw: x.new_zeros((2, 3), **kw), np.zeros((2, 3))),
    "new_ones": (lambda x, **kw: x.new_ones([3], **kw), np.ones(3)),
    "new_empty": (lambda x, **kw: x.new_empty(2, **kw), None),
    "new_full": (lambda x, **kw: x.new_full((2, 2), 3, **kw), np.full((2, 2), 3.0)),
    "new_tensor": (lambda x, **kw: x.new_tensor([1, 2], **kw), np.array([1.0, 2.0])),
}


@pytest.mark.parametrize("name", sorted(NEW_CASES))
def test_new_methods_take_the_tensor_dtype_and_device_unless_given(name):
    call, ref = NEW_CASES[name]
    x = flow.tensor(X, dtype=flow.float64)
    out = call(x, requires_grad=True)
    assert out.dtype is flow.float64 and out.requires_grad and out.is_leaf
    if ref is not None:
        np.testing.assert_array_equal(out.numpy(), ref)
    assert call(x, dtype=flow.float16, device="cpu").dtype is flow.float16
    p = flow.placement("cpu", ranks=[0])
    g = call(x.to_global(p, flow.sbp.broadcast))
    assert g.is_global and g.placement == p and g.sbp == (flow.sbp.broadcast,)
    if "vulkan" in available():
        assert call(x.to("vulkan")).device == flow.zeros(1).to("vulkan").device
    torch = pytest.importorskip("torch")
    want = call(torch.tensor(X, dtype=torch.float64), requires_grad=True)
    assert tuple(out.shape) == tuple(want.shape) and want.dtype == torch.float64
    if ref is not None:
        np.testing.assert_array_equal(out.numpy(), want.detach().numpy())


def test_tensor_constructor_takes_a_device_or_a_placement():
    assert flow.Tensor(2, 3, device="cpu").device == flow.device("cpu")
    p = flow.placement("cpu", ranks=[0])
    g = flow.Tensor([1.0, 2.0], placement=p, sbp=flow.sbp.broadcast)
    assert g.is_global and g.dtype is flow.float32
    np.testing.assert_array_equal(g.numpy(), [1.0, 2.0])


def test_pin_memory_is_accepted():
    for out in (flow.empty(2, pin_memory=True), flow.tensor([1.0], pin_memory=True),
                flow.zeros(2, pin_memory=True), flow.randn(2, pin_memory=True)):  # fmt: skip
        assert out.is_local and out.device == "cpu"


def test_device_and_placement_together_is_an_error():
    p = flow.placement("cpu", ranks=[0])
    with pytest.raises(ValueError, match="^zeros: got device='cpu' and a placement"):
        flow.zeros(2, device="cpu", placement=p, sbp=flow.sbp.broadcast)


GLOBAL_CASES = ["randn", "rand", "zeros", "ones", "full", "arange", "linspace", "logspace", "eye",
                "tensor", "normal", "randperm"]  # fmt: skip


@pytest.mark.parametrize("sbp", [flow.sbp.broadcast, flow.sbp.split(0)], ids=["B", "S0"])
@pytest.mark.parametrize("name", GLOBAL_CASES)
def test_global_creation_with_requires_grad_on_one_rank(name, sbp):
    p = flow.placement("cpu", ranks=[0])
    flow.manual_seed(3)
    local = make(name)
    flow.manual_seed(3)
    out = make(name, placement=p, sbp=sbp, requires_grad=True)
    assert out.is_global and out.placement == p and out.sbp == (sbp,)
    assert out.requires_grad and out.is_leaf
    np.testing.assert_array_equal(out.numpy(), local.numpy())
    w = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(np.float32)
    (out * flow.tensor(w).to_global(p, flow.sbp.broadcast)).sum().backward()
    assert out.grad.is_global and out.grad.placement == p
    np.testing.assert_allclose(out.grad.numpy(), w)


@pytest.mark.parametrize("name", sorted(LIKE))
def test_like_ops_keep_a_global_input_placement_and_sbp(name):
    p = flow.placement("cpu", ranks=[0])
    x = flow.tensor(X).to_global(p, flow.sbp.split(1))
    call = {"zeros_like": lambda **kw: flow.zeros_like(x, **kw),
            "ones_like": lambda **kw: flow.ones_like(x, **kw),
            "full_like": lambda **kw: flow.full_like(x, 2.5, **kw),
            "empty_like": lambda **kw: flow.empty_like(x, **kw),
            "randn_like": lambda **kw: flow.randn_like(x, **kw),
            "rand_like": lambda **kw: flow.rand_like(x, **kw),
            "randint_like": lambda **kw: flow.randint_like(x, 0, 5, **kw)}[name]  # fmt: skip
    out = call(requires_grad=True)
    assert out.is_global and out.placement == p and out.sbp == (flow.sbp.split(1),)
    assert out.requires_grad and out.is_leaf and tuple(out.shape) == X.shape
    assert call(sbp=flow.sbp.broadcast).sbp == (flow.sbp.broadcast,)
    local = call(device="cpu")
    assert local.is_local and tuple(local.shape) == X.shape


def test_inside_jit_requires_grad_and_device_follow_the_trace():
    @flow.jit
    def step(a):
        x = flow.ones(3, device="cpu", requires_grad=True)
        w = flow.zeros_like(a, requires_grad=True)
        ((x + w) * a * a).sum().backward()
        return x.grad, w.grad, flow.arange(3, dtype=flow.float32, device="cpu")

    a = np.array([1.0, 2.0, 3.0], np.float32)
    gx, gw, r = step(flow.tensor(a))
    np.testing.assert_allclose(gx.numpy(), a * a)
    np.testing.assert_allclose(gw.numpy(), a * a)
    np.testing.assert_array_equal(r.numpy(), np.arange(3, dtype=np.float32))

    @flow.jit
    def bad(a):
        return flow.zeros_like(a, dtype=flow.int64, requires_grad=True)

    with pytest.raises(RuntimeError, match="^zeros_like: Only Tensors of floating point"):
        bad(flow.tensor(a))


def test_inside_graph_build():
    class Model(flow.nn.Graph):
        def build(self, a):
            return flow.ones_like(a, device="cpu") + flow.full((3,), 2.0, requires_grad=True) * a

    a = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_allclose(Model()(flow.tensor(a)).numpy(), 1 + 2 * a)


def test_under_lazy_the_keywords_apply_to_pending_values():
    with flow.lazy():
        x = flow.randn(2, 3, device="cpu", requires_grad=True)
        z = flow.zeros_like(x)
        (x * 3.0).sum().backward()
        assert x.is_leaf and not z.requires_grad
        np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 3.0, np.float32))
        np.testing.assert_array_equal(z.numpy(), np.zeros((2, 3), np.float32))
