"""flow.jit: staging, per-signature caching, pytrees, targets and error reporting."""

from __future__ import annotations

import re

import numpy as np
import pytest

import flow
from flow import targets


def mlp(x, w1, b1, w2, b2):
    return flow.relu(x @ w1 + b1) @ w2 + b2


def _params(rng, batch=4):
    shapes = [(batch, 8), (8, 16), (16,), (16, 3), (3,)]
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _np_mlp(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def test_staged_lower_compile_call(rng):
    args = _params(rng)
    lowered = flow.jit(mlp).lower(*args)
    text = lowered.as_text()
    assert "func.func @mlp(%x: tensor<4x8xf32>" in text
    assert text.count("flow.matmul") == 2
    compiled = lowered.compile(target="cpu")
    assert compiled.target == "cpu" and b"module.fb" in compiled.vmfb[:128]  # a .vmfb archive
    np.testing.assert_allclose(compiled(*args).numpy(), _np_mlp(*args), rtol=1e-5, atol=1e-5)


def test_compiles_once_per_signature(rng):
    calls = []

    def f(x, y):
        calls.append(1)  # runs only while tracing
        return x * y + 1

    jf = flow.jit(f)
    a, b = (
        rng.standard_normal((2, 3)).astype(np.float32),
        rng.standard_normal((2, 3)).astype(np.float32),
    )
    for _ in range(3):
        np.testing.assert_allclose(jf(a, b).numpy(), a * b + 1, rtol=1e-6)
    assert len(calls) == 1
    jf(a[:1], b[:1])  # new shape: traced again
    jf(a.astype(np.float64), b.astype(np.float64))  # new dtype: traced again
    assert len(calls) == 3


def test_tensor_and_numpy_arguments_share_a_signature(rng):
    calls = []

    def f(x):
        calls.append(1)
        return x + x

    jf = flow.jit(f)
    a = rng.standard_normal(5).astype(np.float32)
    jf(a)
    jf(flow.tensor(a))
    assert len(calls) == 1


def test_pytree_inputs_and_outputs(rng):
    @flow.jit
    def f(params, x, scale):
        h = x @ params["w"] + params["b"]
        return {"out": h * scale, "parts": (h, flow.sum(h))}

    p = {"w": rng.standard_normal((3, 2)).astype(np.float32), "b": np.ones(2, np.float32)}
    x = rng.standard_normal((4, 3)).astype(np.float32)
    out = f(p, x, 2.0)
    h = x @ p["w"] + p["b"]
    np.testing.assert_allclose(out["out"].numpy(), 2 * h, rtol=1e-5)
    np.testing.assert_allclose(out["parts"][0].numpy(), h, rtol=1e-5)
    np.testing.assert_allclose(out["parts"][1].numpy(), h.sum(), rtol=1e-5)
    assert f(p, x, 3.0)["out"].numpy() == pytest.approx(3 * h, rel=1e-5)  # static arg retraces


def test_namedtuple_results_keep_their_type(rng):
    x = rng.standard_normal((2, 5)).astype(np.float32)
    out = flow.jit(lambda a: flow.topk(a, 2))(x)
    want = flow.topk(flow.tensor(x), 2)
    assert type(out) is type(want) and out._fields == ("values", "indices")
    np.testing.assert_array_equal(out.indices.numpy(), want.indices.numpy())


def test_compiled_rejects_a_different_signature(rng):
    args = _params(rng)
    compiled = flow.jit(mlp).lower(*args).compile()
    with pytest.raises(TypeError, match=r"compiled for arguments .*float32\[4, 8\].* called with"):
        compiled(args[0][:2], *args[1:])


def test_shape_error_names_op_shapes_and_user_line(rng):
    def bad(x, w):
        return flow.matmul(x, w)  # the offending line

    with pytest.raises(ValueError) as info:
        flow.jit(bad).lower(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    msg = str(info.value)
    assert msg.startswith("matmul:")
    assert "[2, 3]" in msg and "[4, 5]" in msg
    assert "test_jit.py" in msg and "the offending line" in msg


def test_broadcast_error_in_trace(rng):
    with pytest.raises(ValueError, match=r"add: shapes \[2, 3\] and \[4\] are not broadcastable"):
        flow.jit(lambda a, b: a + b).lower(np.ones((2, 3), np.float32), np.ones(4, np.float32))


def test_eager_and_jit_raise_the_same_error():
    a, b = np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)
    msgs = []
    for run in (
        lambda: flow.matmul(flow.tensor(a), flow.tensor(b)),
        lambda: flow.jit(flow.matmul).lower(a, b),
    ):
        with pytest.raises(ValueError) as info:
            run()
        msgs.append(str(info.value).splitlines()[0])
    assert msgs[0] == msgs[1]


def test_numpy_inside_trace_is_a_clear_error():
    def f(x):
        return x.numpy()

    with pytest.raises(RuntimeError, match="being traced inside flow.jit"):
        flow.jit(f).lower(np.ones(2, np.float32))


def test_non_tensor_output_is_a_clear_error():
    with pytest.raises(TypeError, match="must return tensors"):
        flow.jit(lambda x: 3).lower(np.ones(2, np.float32))


def test_unknown_target_lists_targets():
    with pytest.raises(ValueError, match="expected one of: cpu, cuda, rocm, vulkan"):
        flow.jit(mlp, target="tpu")


def test_returning_an_input_and_a_captured_tensor(rng):
    w = flow.tensor(rng.standard_normal(3).astype(np.float32))
    x = rng.standard_normal(3).astype(np.float32)
    a, b = flow.jit(lambda x: (x, w))(x)
    np.testing.assert_array_equal(a.numpy(), x)
    np.testing.assert_array_equal(b.numpy(), w.numpy())


@pytest.mark.skipif(
    "vulkan" not in targets.available(),
    reason="no Vulkan device here (install mesa-vulkan-drivers for lavapipe)",
)
def test_mlp_on_vulkan_matches_cpu(rng):
    args = _params(rng)
    cpu = flow.jit(mlp)(*args).numpy()
    vk = flow.jit(mlp, target="vulkan")(*args).numpy()
    np.testing.assert_allclose(vk, cpu, rtol=1e-4, atol=1e-5)


def test_weight_gradient_update_compiles_and_matches_eager(rng):
    """(x.T @ g).T feeding an elementwise update: the shape of every Linear's weight step.

    With IREE's default data-tiling path this failed to compile ("large vector sizes"); the
    cpu target takes the global-optimization path and flow-fold-transposes removes the
    transposes around the matmul.
    """

    def update(x, g, w, buf):
        grad = flow.matmul(x.T, g).T
        new_buf = buf * 0.9 + grad
        return w - new_buf * 0.1, new_buf

    args = [rng.standard_normal(s).astype(np.float32) for s in [(64, 784), (64, 256), (256, 784),
                                                                 (256, 784)]]  # fmt: skip
    eager = update(*[flow.tensor(a) for a in args])
    compiled = flow.jit(update)(*args)
    for e, c in zip(eager, compiled):
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(4, 8, 16), (2, 3, 5, 16)])
def test_linear_on_batched_tokens_trains_as_numpy(rng, shape):
    """A Linear on (batch..., tokens, features) in a compiled train step: its products become
    2-D ones over the rows (flow-fold-batch-matmuls), and the step's loss and updated
    parameters equal numpy's analytic gradient step."""
    from flow import nn
    from flow.lowering import run_pipeline

    lin = nn.Linear(16, 24)
    w0, b0 = lin.weight.numpy().copy(), lin.bias.numpy().copy()
    opt = flow.optim.SGD(lin.parameters(), lr=0.5)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = lin
            self.add_optimizer(opt)

        def build(self, x):
            loss = (self.lin(x) ** 2).mean()
            loss.backward()
            return loss

    x = rng.standard_normal(shape).astype(np.float32)
    step = Step()
    loss = float(step(flow.tensor(x)))
    y = x @ w0.T + b0
    dy = 2 * y / y.size
    rows, drows = x.reshape(-1, 16), dy.reshape(-1, 24)
    np.testing.assert_allclose(loss, (y**2).mean(), rtol=1e-5)
    np.testing.assert_allclose(lin.weight.numpy(), w0 - 0.5 * drows.T @ rows, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(lin.bias.numpy(), b0 - 0.5 * drows.sum(0), rtol=1e-4, atol=1e-6)

    module = step._engine.last_lowered.module.clone()
    before = str(module)
    assert f"tensor<{'x'.join(map(str, shape[:-2]))}x16x24xf32>" in before  # the broadcast
    after = str(run_pipeline(module, "flow-fold-batch-matmuls,flow-fold-transposes,dce"))
    products = [re.findall(r"tensor<([^>]*)>", line)
                for line in after.splitlines() if "flow.matmul" in line]  # fmt: skip
    assert len(products) == 2, after
    assert all(t.count("x") == 2 for types in products for t in types), after  # MxNxf32


def _warm(fn, *args):
    """`fn` past its first calls (the cpu driver trial, the check of its results' memory)."""
    for _ in range(14):
        fn(*args)
    return fn


def test_results_of_a_warm_program_stay_in_their_buffers_until_read():
    from flow.targets import runtime

    x_np = np.arange(6, dtype=np.float32)
    x = flow.tensor(x_np)
    f = _warm(flow.jit(lambda v: v * 2.0 + 1.0, sync_compile=True), x)
    g = _warm(flow.jit(lambda v: v - 1.0, sync_compile=True), x)
    y = f(x)
    assert type(y._buf).__name__ == "DeviceValue" and (y.shape, y.dtype) == ((6,), flow.float32)
    runtime.reset_transfer_stats()
    z = g(y)  # the buffer goes on to the next program, mapped by neither
    stats = runtime.transfer_stats()
    assert stats.uploads == 0 and stats.resident_args == 1 and stats.resident_bytes == 24
    assert type(y._buf).__name__ == "DeviceValue"
    np.testing.assert_array_equal(z.numpy(), x_np * 2.0)
    # read: mapped once; a detached tensor shares that memory, a clone does not
    d, c = y.detach(), y.clone()
    d.add_(1.0)
    np.testing.assert_array_equal(y.numpy(), x_np * 2.0 + 2.0)
    np.testing.assert_array_equal(c.numpy(), x_np * 2.0 + 1.0)
    # in place: into a deferred result, and from one into a tensor
    w = f(x)
    w.mul_(2.0)
    np.testing.assert_array_equal(w.numpy(), x_np * 4.0 + 2.0)
    p = flow.zeros(6)
    alias = p.detach()
    p.copy_(f(x))
    np.testing.assert_array_equal(alias.numpy(), x_np * 2.0 + 1.0)  # written through
    q = f(x)
    shared = q.detach()
    q.copy_(flow.ones(6))
    np.testing.assert_array_equal(shared.numpy(), np.ones(6))
    # eager ops, autograd, indexing and flow.lazy read it like any tensor
    r = f(x).requires_grad_()
    (r * r).sum().backward()
    np.testing.assert_array_equal(r.grad.numpy(), 2 * (x_np * 2.0 + 1.0))
    np.testing.assert_array_equal(f(x)[1:3].numpy(), x_np[1:3] * 2.0 + 1.0)
    with flow.lazy():
        s = f(x) * 3.0
    np.testing.assert_array_equal(s.numpy(), (x_np * 2.0 + 1.0) * 3.0)


def test_a_deferred_index_is_checked_under_lazy_as_eagerly():
    shift = _warm(flow.jit(lambda i: i + 2, sync_compile=True), flow.tensor([[0, 0]]))
    a = flow.tensor(np.ones((2, 3), np.float32))
    idx = shift(flow.tensor([[0, 1]]))  # [[2, 3]]: 3 is out of range
    assert type(idx._buf).__name__ == "DeviceValue"
    with flow.lazy(), pytest.raises(IndexError, match="gather: index 3 is out of bounds"):
        a.gather(1, idx)


def test_a_program_returning_its_argument_never_hands_back_its_buffer():
    x_np = np.arange(4, dtype=np.float32)
    same = _warm(flow.jit(lambda v: v, sync_compile=True), flow.tensor(x_np))
    outs = [same(flow.tensor(x_np + k)) for k in range(3)]
    for k, out in enumerate(outs):  # copies: later calls leave earlier results alone
        assert out._buf.__class__ is np.ndarray
        np.testing.assert_array_equal(out.numpy(), x_np + k)
