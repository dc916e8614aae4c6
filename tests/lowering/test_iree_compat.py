"""Everything flow-to-iree-input emits must be accepted by IREE 3.13, and compute like numpy.

The module is built with the dialect's `make` builders (as the tracer builds it),
lowered, printed in generic form and handed to IREE's own parser and verifier;
a second module runs representative ops on the CPU against numpy.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from _lowering_build import function, module, tensor
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    FloatAttr,
    IntegerAttr,
    f32,
    f64,
    i1,
    i8,
    i32,
    i64,
)

import flow.dialect as fd
from flow.lowering import run_pipeline, to_iree_text

FLOATS = (Float16Type(), BFloat16Type(), f32, f64)
INTS = (i8, i32, i64)
CAST_TYPES = (*FLOATS, i1, *INTS)
UNARY_FLOAT = (fd.NegOp, fd.AbsOp, fd.ExpOp, fd.LogOp, fd.SqrtOp, fd.RsqrtOp, fd.TanhOp,
               fd.FloorOp, fd.CeilOp, fd.RoundOp, fd.TruncOp, fd.Log1pOp, fd.Expm1Op, fd.Log2Op,
               fd.Log10Op, fd.SinhOp, fd.CoshOp)  # fmt: skip
# No f64 kernels on the cpu backend (the frontend refuses them in compiled code).
UNARY_F32_ONLY = (fd.SinOp, fd.CosOp, fd.TanOp, fd.AsinOp, fd.AcosOp, fd.AtanOp, fd.ErfOp)
UNARY_INT = (fd.NegOp, fd.AbsOp)
BINARY = (fd.AddOp, fd.SubOp, fd.MulOp, fd.DivOp, fd.MaximumOp, fd.MinimumOp)
DIRECTIONS = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCE_KINDS = ("sum", "max", "min", "prod")


def _zero(el):
    return FloatAttr(0.0, el) if el in FLOATS else IntegerAttr(0, el)


def _numeric(name, el):
    """Every op kind that takes `el` elements."""
    is_float = el in FLOATS

    def build(b, x, y, p, m, n):
        out = [b(op, x) for op in (UNARY_FLOAT if is_float else UNARY_INT)]
        out += [b(op, x, y) for op in BINARY]
        if is_float:
            out.append(b(fd.PowOp, x, y))
            if el != f64:
                out += [b(op, x) for op in UNARY_F32_ONLY]
                out += [b(fd.RemOp, x, y), b(fd.Atan2Op, x, y)]
        else:
            out += [b(op, x, y) for op in (fd.RemOp, fd.AndOp, fd.OrOp, fd.XorOp)]
        out.append(b(fd.IotaOp, dim=1, shape=[2, 3], element_type=el))
        out += [b(fd.CompareOp, x, y, direction=d) for d in DIRECTIONS]
        out.append(b(fd.SelectOp, p, x, y))
        out.append(b(fd.MatmulOp, m, n))
        out += [b(fd.ReduceOp, m, kind=k, dims=d) for k in REDUCE_KINDS for d in ([0], [1, 2])]
        out.append(b(fd.ReduceOp, m, kind="sum", dims=[0, 1, 2]))
        out.append(b(fd.TransposeOp, m, permutation=[2, 0, 1]))
        out.append(b(fd.BroadcastInDimOp, x, dims=[1, 2], shape=[5, 2, 3]))
        out.append(b(fd.ReshapeOp, m, shape=[3, 8]))
        out.append(b(fd.FullOp, value=_zero(el), shape=[2, 3]))
        out.append(b(fd.OptimizationBarrierOp, x, m))
        values = [1.5, -2.0] if is_float else [3, -4]
        out.append(
            b(fd.ConstantOp, value=DenseIntOrFPElementsAttr.from_list(tensor(el, 2), values))
        )
        return out

    args = [tensor(el, 2, 3), tensor(el, 2, 3), tensor(i1, 2, 3), tensor(el, 4, 2, 3),
            tensor(el, 4, 3, 2)]  # fmt: skip
    return function(name, args, build)


def _bool(name):
    def build(b, p, q, s, t):
        out = [b(fd.CompareOp, p, q, direction=d) for d in DIRECTIONS]
        out.append(b(fd.SelectOp, p, p, q))
        out += [b(op, p, q) for op in (fd.AndOp, fd.OrOp, fd.XorOp)]
        out.append(b(fd.FullOp, value=IntegerAttr(1, i1), shape=[2, 3]))
        out.append(b(fd.TransposeOp, p, permutation=[1, 0]))
        out.append(b(fd.ReshapeOp, p, shape=[6]))
        out.append(b(fd.ReshapeOp, s, shape=[1, 1]))  # rank 0 -> all-ones shape
        out.append(b(fd.ReshapeOp, t, shape=[]))  # all-ones shape -> rank 0
        out.append(b(fd.BroadcastInDimOp, s, dims=[], shape=[2, 3]))
        out.append(b(fd.BroadcastInDimOp, t, dims=[0, 1], shape=[4, 5]))
        return out

    return function(name, [tensor(i1, 2, 3), tensor(i1, 2, 3), tensor(i1), tensor(i1, 1, 1)],
                    build)  # fmt: skip


def _casts(name):
    def build(b, *xs):
        return [b(fd.CastOp, x, element_type=dst) for x, dst in
                itertools.product(xs, CAST_TYPES)]  # fmt: skip

    return function(name, [tensor(t, 4) for t in CAST_TYPES], build)


def _compat_module():
    funcs = [_numeric(f"numeric_{i}", el) for i, el in enumerate((*FLOATS, *INTS))]
    return module(*funcs, _bool("booleans"), _casts("casts"))


@pytest.fixture(scope="module")
def lowered():
    m = _compat_module()
    run_pipeline(m, "flow-to-iree-input", verify=True)
    return m, to_iree_text(m)


def test_every_emitted_op_parses_and_verifies_in_iree(lowered):
    from iree.compiler import ir

    m, text = lowered
    emitted = {op.name for op in m.walk()}
    assert not {n for n in emitted if n.startswith("flow.")}
    with ir.Context() as ctx:
        parsed_module = ir.Module.parse(text, ctx)
        assert parsed_module.operation.verify()
        parsed: set[str] = set()

        def collect(op):
            parsed.add(op.name)
            return ir.WalkResult.ADVANCE

        parsed_module.operation.walk(collect)
    assert emitted <= parsed, f"IREE lost ops: {sorted(emitted - parsed)}"
    # The op kinds the lowering is documented to emit all occur in this module.
    expected = {
        "linalg.generic", "linalg.fill", "linalg.yield", "tensor.empty", "tensor.collapse_shape",
        "tensor.expand_shape", "arith.constant", "arith.addf", "arith.addi", "arith.subf",
        "arith.subi", "arith.mulf", "arith.muli", "arith.divf", "arith.divsi", "arith.maximumf",
        "arith.minimumf", "arith.maxsi", "arith.minsi", "arith.negf", "arith.cmpf", "arith.cmpi",
        "arith.select", "arith.extf", "arith.truncf", "arith.sitofp", "arith.fptosi",
        "arith.uitofp", "arith.extsi", "arith.extui", "arith.trunci", "math.absf", "math.absi",
        "math.exp", "math.log", "math.sqrt", "math.rsqrt", "math.tanh", "math.powf",
        "math.floor", "math.ceil", "math.roundeven", "math.trunc", "math.log1p", "math.expm1",
        "math.sinh", "math.cosh", "math.sin", "math.cos", "math.tan", "math.asin", "math.acos",
        "math.atan", "math.erf", "math.atan2", "arith.remf", "arith.andi",
        "arith.ori", "arith.xori", "linalg.index", "arith.index_cast",
    }  # fmt: skip
    assert expected <= emitted, sorted(expected - emitted)


def test_compiles_for_cpu(lowered):
    from iree.compiler import tools

    _, text = lowered
    vmfb = tools.compile_str(text, target_backends=["llvm-cpu"],
                             extra_args=["--iree-llvmcpu-target-cpu=host"])  # fmt: skip
    assert len(vmfb) > 0


def test_half_precision_compiles_for_a_cpu_without_bf16():
    """The host is not the only kind of CPU: x86-64-v3 (AVX2 + FMA, e.g. AMD Zen 3) has no bf16
    instructions, where LLVM's own bf16 conversions call `__truncsfbf2`, which IREE's linker
    does not resolve. The f16 / bf16 functions and every cast compile for it too."""
    from iree.compiler import tools

    m = module(_numeric("numeric_f16", Float16Type()), _numeric("numeric_bf16", BFloat16Type()),
               _casts("casts"))  # fmt: skip
    run_pipeline(m, "flow-to-iree-input", verify=True)
    vmfb = tools.compile_str(to_iree_text(m), target_backends=["llvm-cpu"],
                             extra_args=["--iree-llvmcpu-target-cpu=x86-64-v3",
                                         "--iree-llvmcpu-target-triple=x86_64-unknown-linux-gnu"])
    assert b"__truncsfbf2" not in vmfb and len(vmfb) > 0


# --------------------------------------------------------------------------- numerics


def _numerics_module():
    t = tensor
    return module(
        function("matmul_batch", [t(f32, 2, 3, 4), t(f32, 2, 4, 5)],
                 lambda b, x, y: [b(fd.MatmulOp, x, y)]),
        function("reduce_max_sum", [t(f32, 3, 4)],
                 lambda b, x: [b(fd.ReduceOp, x, kind="max", dims=[1]),
                               b(fd.ReduceOp, x, kind="sum", dims=[0])]),
        function("broadcast_size1", [t(f32, 1, 3)],
                 lambda b, x: [b(fd.BroadcastInDimOp, x, dims=[1, 2], shape=[2, 4, 3])]),
        function("reshape", [t(f32, 2, 3, 4)],
                 lambda b, x: [b(fd.ReshapeOp, x, shape=[4, 6])]),
        function("transpose", [t(f32, 2, 3, 4)],
                 lambda b, x: [b(fd.TransposeOp, x, permutation=[2, 0, 1])]),
        function("where_less", [t(f32, 5), t(f32, 5)],
                 lambda b, x, y: [b(fd.SelectOp, b(fd.CompareOp, x, y, direction="lt"), x, y)]),
        function("casts", [t(f32, 6), t(f32, 6)],
                 lambda b, x, y: [b(fd.CastOp, x, element_type=i32),
                                  b(fd.CastOp, b(fd.CompareOp, x, y, direction="gt"),
                                    element_type=f32)]),
        function("max_min", [t(f32, 4), t(f32, 4)],
                 lambda b, x, y: [b(fd.MaximumOp, x, y), b(fd.MinimumOp, x, y)]),
    )  # fmt: skip


@pytest.fixture(scope="module")
def cpu_module():
    import iree.runtime as rt
    from iree.compiler import tools

    m = _numerics_module()
    run_pipeline(m, "flow-to-iree-input", verify=True)
    vmfb = tools.compile_str(to_iree_text(m), target_backends=["llvm-cpu"],
                             extra_args=["--iree-llvmcpu-target-cpu=host"])  # fmt: skip
    return rt.load_vm_flatbuffer(vmfb, driver="local-sync")


def _call(mod, name, *args):
    out = getattr(mod, name)(*args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [np.asarray(o) for o in outs]


def _assert_equal(got, expected, rtol=1e-5):
    assert got.shape == expected.shape and got.dtype == expected.dtype, (
        f"got {got.dtype}{list(got.shape)}, expected {expected.dtype}{list(expected.shape)}"
    )
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-6)


def test_matmul_with_batch(cpu_module, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = rng.standard_normal((2, 4, 5)).astype(np.float32)
    (got,) = _call(cpu_module, "matmul_batch", x, y)
    _assert_equal(got, x @ y, rtol=1e-4)


def test_reduce_max_and_sum(cpu_module, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    mx, sm = _call(cpu_module, "reduce_max_sum", x)
    _assert_equal(mx, x.max(axis=1))
    _assert_equal(sm, x.sum(axis=0))


def test_broadcast_in_dim_with_size1_dim(cpu_module, rng):
    x = rng.standard_normal((1, 3)).astype(np.float32)
    (got,) = _call(cpu_module, "broadcast_size1", x)
    _assert_equal(got, np.broadcast_to(x[None], (2, 4, 3)))


def test_reshape(cpu_module, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (got,) = _call(cpu_module, "reshape", x)
    _assert_equal(got, x.reshape(4, 6))


def test_transpose(cpu_module, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (got,) = _call(cpu_module, "transpose", x)
    _assert_equal(got, x.transpose(2, 0, 1))


def test_compare_and_select(cpu_module, rng):
    x, y = (rng.standard_normal(5).astype(np.float32) for _ in range(2))
    (got,) = _call(cpu_module, "where_less", x, y)
    _assert_equal(got, np.where(x < y, x, y))


def test_casts_truncate_toward_zero_and_bools_are_0_1(cpu_module):
    x = np.array([-2.7, -0.5, 0.0, 0.5, 1.9, 3.0], np.float32)
    y = np.zeros(6, np.float32)
    to_int, from_bool = _call(cpu_module, "casts", x, y)
    _assert_equal(to_int, x.astype(np.int32))
    _assert_equal(from_bool, (x > y).astype(np.float32))


def test_maximum_and_minimum_propagate_nan(cpu_module):
    x = np.array([np.nan, 1.0, -1.0, np.nan], np.float32)
    y = np.array([0.0, np.nan, 2.0, np.nan], np.float32)
    mx, mn = _call(cpu_module, "max_min", x, y)
    np.testing.assert_array_equal(mx, np.maximum(x, y))
    np.testing.assert_array_equal(mn, np.minimum(x, y))
