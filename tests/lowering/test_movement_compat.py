"""The lowering of slice / pad / concat / gather is accepted by IREE 3.13 for every target,
and computes like numpy on the CPU.

Modules are built with the dialect's `make` builders (as the tracer builds them),
lowered, printed in generic form, parsed and verified by IREE's own parser and
compiled for cpu, cuda, rocm and vulkan (the compilers need no device). IREE's CUDA backend
rejects some lowerings the others accept (a negative-stride affine map), hence all four.
"""

from __future__ import annotations

import numpy as np
import pytest
from _lowering_build import function, module, tensor
from xdsl.dialects.builtin import BFloat16Type, FloatAttr, IntegerAttr, f32, f64, i1, i8, i32, i64

import flow.dialect as fd
from flow.lowering import run_pipeline, to_iree_text

ELEMENTS = (f32, f64, BFloat16Type(), i8, i32, i64, i1)
GPU_TARGETS = ("cuda", "rocm", "vulkan")


def _value(el, v):
    return FloatAttr(float(v), el) if el in (f32, f64) or isinstance(el, BFloat16Type) else (
        IntegerAttr(int(v) if el != i1 else 1, el))  # fmt: skip


def _slice(b, x, start, strides, sizes):
    return b(fd.SliceOp, x, start=start, strides=strides, sizes=sizes)


def _every_kind(name, el):
    """Each op in each of its lowering cases, on `el` elements."""

    def build(b, x, y, e, i64_idx, i32_idx, i8_idx):
        return [
            _slice(b, x, [1, 0, 0], [1, 2, 1], [2, 2, 4]),  # extract_slice
            _slice(b, x, [2, 2, 3], [-1, -2, -1], [3, 2, 4]),  # negative strides
            _slice(b, x, [0, 1, 0], [1, -1, 2], [3, 2, 2]),  # mixed signs
            _slice(b, x, [0, 0, 0], [1, 1, 1], [3, 3, 4]),  # identity
            _slice(b, x, [0, 0, 0], [1, 1, 1], [3, 0, 4]),  # empty result
            b(fd.PadOp, x, low=[1, 0, 2], high=[0, 3, 1], value=_value(el, 2)),
            b(fd.PadOp, e, low=[1, 1], high=[0, 2], value=_value(el, 1)),  # empty operand
            b(fd.ConcatOp, x, y, x, dim=1),
            b(fd.ConcatOp, e, e, dim=0),  # nothing to concatenate
            b(fd.ConcatOp, x, _slice(b, y, [0, 0, 0], [1, 1, 1], [3, 0, 4]), dim=1),
            b(fd.GatherOp, x, i64_idx, dim=0),
            b(fd.GatherOp, x, i32_idx, dim=1),
            b(fd.GatherOp, x, i8_idx, dim=2),
        ]

    args = [tensor(el, 3, 3, 4), tensor(el, 3, 2, 4), tensor(el, 2, 0),
            tensor(i64, 2, 3, 4), tensor(i32, 3, 5, 1), tensor(i8, 1, 1, 6)]  # fmt: skip
    return function(name, args, build)


def _lowered(elements):
    m = module(*(_every_kind(f"kinds_{i}", el) for i, el in enumerate(elements)))
    run_pipeline(m, "flow-to-iree-input", verify=True)
    return m, to_iree_text(m)


@pytest.fixture(scope="module")
def lowered():
    return _lowered(ELEMENTS)


def test_every_emitted_op_parses_and_verifies_in_iree(lowered):
    from iree.compiler import ir

    m, text = lowered
    emitted = {op.name for op in m.walk()}
    assert not {n for n in emitted if n.startswith("flow.")}
    with ir.Context() as ctx:
        parsed = ir.Module.parse(text, ctx)
        assert parsed.operation.verify()
    expected = {
        "tensor.extract_slice", "tensor.pad", "tensor.yield", "tensor.concat", "tensor.extract",
        "tensor.empty", "linalg.generic", "linalg.index", "linalg.fill", "arith.index_cast",
        "arith.maxsi", "arith.minsi", "arith.muli", "arith.addi",
    }  # fmt: skip
    assert expected <= emitted, sorted(expected - emitted)


def test_compiles_for_cpu(lowered):
    from flow.targets import compile_mlir

    assert len(compile_mlir(lowered[1], "cpu")) > 0


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_compiles_for_gpu_targets(target):
    """Every op kind (element types only change the copies) for each GPU compiler."""
    from flow.targets import compile_mlir

    _, text = _lowered((f32, i1))
    # int8 and bool tensors need 8-bit storage, which the portable Vulkan architecture lacks
    # (flow.targets.vulkan refuses them there): compile for one that has it.
    flags = ["--iree-vulkan-target=llvmpipe"] if target == "vulkan" else []
    assert len(compile_mlir(text, target, flags)) > 0


# --------------------------------------------------------------------------- numerics


def _numerics_module():
    t = tensor
    return module(
        function("slices", [t(f32, 5, 6)],
                 lambda b, x: [_slice(b, x, [1, 0], [2, 3], [2, 2]),
                               _slice(b, x, [4, 5], [-1, -2], [5, 3])]),
        function("pad", [t(f32, 2, 3), t(i32, 3)],
                 lambda b, x, y: [b(fd.PadOp, x, low=[1, 0], high=[2, 3], value=FloatAttr(-1.5, f32)),
                                  b(fd.PadOp, y, low=[2], high=[1], value=IntegerAttr(7, i32))]),
        function("concat3", [t(f32, 2, 1), t(f32, 2, 3), t(f32, 2, 2)],
                 lambda b, x, y, z: [b(fd.ConcatOp, x, y, z, dim=1)]),
        function("gathers", [t(f32, 3, 4, 2), t(i64, 2, 4, 2), t(i32, 3, 5, 1), t(i64, 1, 2, 3)],
                 lambda b, x, i, j, k: [b(fd.GatherOp, x, i, dim=0), b(fd.GatherOp, x, j, dim=1),
                                        b(fd.GatherOp, x, k, dim=2)]),
    )  # fmt: skip


@pytest.fixture(scope="module")
def cpu_module():
    from flow.targets import compile_mlir, load

    m = _numerics_module()
    run_pipeline(m, "flow-to-iree-input", verify=True)
    return load(compile_mlir(to_iree_text(m), "cpu"), "cpu")


def _call(mod, name, *args):
    out = mod[name](*args)
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else (out,))]


def test_slices_with_positive_and_negative_strides(cpu_module, rng):
    x = rng.standard_normal((5, 6)).astype(np.float32)
    a, b = _call(cpu_module, "slices", x)
    np.testing.assert_array_equal(a, x[1:4:2, 0:6:3])
    np.testing.assert_array_equal(b, x[4::-1, 5::-2])


def test_pad(cpu_module, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = np.array([1, 2, 3], np.int32)
    a, b = _call(cpu_module, "pad", x, y)
    np.testing.assert_array_equal(a, np.pad(x, [(1, 2), (0, 3)], constant_values=-1.5))
    np.testing.assert_array_equal(b, np.pad(y, [(2, 1)], constant_values=7))


def test_concat_of_three(cpu_module, rng):
    xs = [rng.standard_normal((2, n)).astype(np.float32) for n in (1, 3, 2)]
    (got,) = _call(cpu_module, "concat3", *xs)
    np.testing.assert_array_equal(got, np.concatenate(xs, 1))


def test_gather_along_each_dim_clamps_bad_indices(cpu_module, rng):
    x = rng.standard_normal((3, 4, 2)).astype(np.float32)
    i = rng.integers(0, 3, (2, 4, 2))
    j = rng.integers(0, 4, (3, 5, 1)).astype(np.int32)
    k = np.array([[[1, 0, 1], [0, 0, 1]]])
    i[0, 0, 0], j[1, 2, 0] = 17, -5  # out of range: compiled code clamps
    a, b, c = _call(cpu_module, "gathers", x, i, j, k)
    np.testing.assert_array_equal(a, np.take_along_axis(x, np.clip(i, 0, 2), 0))
    np.testing.assert_array_equal(b, np.take_along_axis(x[:, :, :1], np.clip(j, 0, 3), 1))
    np.testing.assert_array_equal(c, np.take_along_axis(x[:1, :2], k, 2))
