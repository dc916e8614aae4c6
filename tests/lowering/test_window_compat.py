"""What flow-lower-to-linalg emits for conv and reduce_window must be accepted by IREE 3.13,
and compute like numpy.

Modules are built with the dialect's `make` builders (as the tracer builds
them), lowered, printed in generic form and handed to IREE's parser and
verifier; a second module runs on the CPU against loop-based numpy references.
"""

from __future__ import annotations

import numpy as np
import pytest
from _lowering_build import function, module, tensor
from xdsl.dialects.builtin import BFloat16Type, Float16Type, f32, f64, i8, i32, i64

import flow.dialect as fd
from flow.lowering import run_pipeline, to_iree_text

ELEMENT_TYPES = (Float16Type(), BFloat16Type(), f32, f64, i8, i32, i64)
KINDS = ("sum", "max", "min", "prod")


def _conv(strides, dilations, padding, groups):
    return {"strides": strides, "dilations": dilations, "padding": padding, "groups": groups}


def _window(kind, window, strides, dilations, padding):
    return {"kind": kind, "window": window, "strides": strides, "dilations": dilations,
            "padding": padding}  # fmt: skip


def _every_form(name, el):
    """Convs of every rank (grouped or not, padded or not) and every reduce_window kind."""

    def build(b, x1, w1, x2, w2, x3, w3):
        out = [
            b(fd.ConvOp, x1, w1, **_conv([2], [1], [(1, 2)], 1)),
            b(fd.ConvOp, x2, w2, **_conv([1, 2], [2, 1], [(0, 0), (1, 1)], 2)),
            b(fd.ConvOp, x3, w3, **_conv([1, 1, 1], [1, 1, 1], [(0, 0)] * 3, 1)),
        ]
        for kind in KINDS:
            out.append(b(fd.ReduceWindowOp, x2, **_window(kind, [1, 1, 3, 2], [1, 1, 2, 1],
                                                          [1, 1, 1, 2],
                                                          [(0, 0), (0, 0), (1, 1), (0, 1)])))  # fmt: skip
        out.append(b(fd.ReduceWindowOp, x1, **_window("max", [1, 1, 1], [1, 2, 3], [1, 1, 1],
                                                      [(0, 0)] * 3)))  # fmt: skip
        return out

    args = [tensor(el, 2, 3, 9), tensor(el, 4, 3, 3), tensor(el, 1, 4, 7, 6),
            tensor(el, 6, 2, 3, 3), tensor(el, 1, 2, 3, 4, 5), tensor(el, 2, 2, 2, 2, 2)]  # fmt: skip
    return function(name, args, build)


@pytest.fixture(scope="module")
def lowered():
    m = module(*(_every_form(f"forms_{i}", el) for i, el in enumerate(ELEMENT_TYPES)))
    run_pipeline(m, "flow-to-iree-input", verify=True)
    return m, to_iree_text(m)


def test_every_emitted_op_parses_and_verifies_in_iree(lowered):
    from iree.compiler import ir

    m, text = lowered
    emitted = {op.name for op in m.walk()}
    assert not {n for n in emitted if n.startswith("flow.")}
    assert {"tensor.pad", "tensor.yield", "tensor.expand_shape", "tensor.collapse_shape",
            "tensor.empty", "linalg.fill", "linalg.generic"} <= emitted  # fmt: skip
    with ir.Context() as ctx:
        parsed = ir.Module.parse(text, ctx)
        assert parsed.operation.verify()
        names: set[str] = set()

        def collect(op):
            names.add(op.name)
            return ir.WalkResult.ADVANCE

        parsed.operation.walk(collect)
    assert emitted <= names, f"IREE lost ops: {sorted(emitted - names)}"


def test_compiles_for_cpu(lowered):
    from iree.compiler import tools

    _, text = lowered
    vmfb = tools.compile_str(text, target_backends=["llvm-cpu"],
                             extra_args=["--iree-llvmcpu-target-cpu=host"])  # fmt: skip
    assert len(vmfb) > 0


@pytest.mark.parametrize("target", ["cuda", "rocm", "vulkan"])
def test_compiles_for_gpu_targets_without_a_device(target):
    from flow.targets import compile_mlir

    m = module(_every_form("forms_f32", f32), _every_form("forms_i32", i32))
    run_pipeline(m, "flow-to-iree-input", verify=True)
    assert len(compile_mlir(to_iree_text(m), target)) > 0


# --------------------------------------------------------------------------- numerics


def ref_conv(x, w, strides, dilations, padding, groups):
    """Direct sum over output positions, channels and kernel taps (float64 / int64)."""
    n = x.ndim - 2
    acc = np.float64 if x.dtype.kind == "f" else np.int64
    xp = np.pad(x.astype(acc), [(0, 0), (0, 0), *padding])
    k = w.shape[2:]
    outs = [(xp.shape[2 + i] - dilations[i] * (k[i] - 1) - 1) // strides[i] + 1 for i in range(n)]
    out = np.zeros((x.shape[0], w.shape[0], *outs), acc)
    cg, og = x.shape[1] // groups, w.shape[0] // groups
    for b, oc, *pos in np.ndindex(*out.shape):
        g = oc // og
        for ic in range(cg):
            for tap in np.ndindex(*k):
                src = tuple(p * s + t * d for p, s, t, d in zip(pos, strides, tap, dilations))
                out[(b, oc, *pos)] += xp[(b, g * cg + ic, *src)] * w[(oc, ic, *tap)]
    return out.astype(x.dtype)


def ref_reduce_window(x, kind, window, strides, dilations, padding):
    """Every window gathered by index arithmetic; out-of-bounds taps are skipped."""
    combine = {"sum": sum, "max": max, "min": min, "prod": np.prod}[kind]
    outs = [(s + lo + hi - d * (w - 1) - 1) // st + 1
            for s, w, st, d, (lo, hi) in zip(x.shape, window, strides, dilations, padding)]  # fmt: skip
    out = np.zeros(outs, x.dtype)
    for pos in np.ndindex(*outs):
        vals = []
        for tap in np.ndindex(*window):
            src = [p * st + t * d - lo for p, st, t, d, (lo, _) in
                   zip(pos, strides, tap, dilations, padding)]  # fmt: skip
            if all(0 <= i < s for i, s in zip(src, x.shape)):
                vals.append(x[tuple(src)])
        out[pos] = combine(vals)
    return out


NUMERIC_CASES = {
    "conv2d_grouped": (f32, [(2, 4, 7, 6), (6, 2, 3, 2)], _conv([2, 1], [1, 2], [(1, 0), (2, 1)], 2)),
    "conv1d_int": (i32, [(2, 3, 9), (2, 3, 4)], _conv([3], [2], [(0, 1)], 1)),
    "conv3d_depthwise": (f32, [(1, 3, 4, 5, 3), (3, 1, 2, 2, 2)], _conv([1, 1, 1], [1, 1, 1],
                                                                       [(1, 1)] * 3, 3)),
    "max_padded": (f32, [(2, 5, 6)], _window("max", [1, 3, 2], [1, 2, 2], [1, 1, 1],
                                             [(0, 0), (1, 1), (1, 2)])),
    "sum_dilated": (f32, [(3, 9)], _window("sum", [2, 3], [1, 2], [1, 3], [(0, 1), (1, 1)])),
    "min_int": (i32, [(4, 7)], _window("min", [2, 2], [2, 3], [1, 1], [(1, 1), (0, 2)])),
    "prod_int": (i64, [(5,)], _window("prod", [3], [1], [1], [(1, 1)])),
    "strided_copy": (f32, [(5, 7)], _window("max", [1, 1], [2, 3], [1, 1], [(0, 0), (0, 0)])),
    # One output whose windows leave trailing elements unread (IREE folds the unit dim away).
    "conv_unit_out": (f32, [(1, 1, 3), (2, 1, 2)], _conv([3], [1], [(0, 0)], 1)),
    "max_unit_out": (f32, [(1, 1, 3)], _window("max", [1, 1, 2], [1, 1, 3], [1, 1, 1],
                                               [(0, 0)] * 3)),
}  # fmt: skip


def _numerics_module():
    funcs = []
    for name, (el, shapes, params) in NUMERIC_CASES.items():
        op = fd.ConvOp if len(shapes) == 2 else fd.ReduceWindowOp
        funcs.append(function(name, [tensor(el, *s) for s in shapes],
                              lambda b, *xs, op=op, params=params: [b(op, *xs, **params)]))  # fmt: skip
    return module(*funcs)


@pytest.fixture(scope="module")
def cpu_module():
    import iree.runtime as rt
    from iree.compiler import tools

    m = _numerics_module()
    run_pipeline(m, "flow-to-iree-input", verify=True)
    vmfb = tools.compile_str(to_iree_text(m), target_backends=["llvm-cpu"],
                             extra_args=["--iree-llvmcpu-target-cpu=host"])  # fmt: skip
    return rt.load_vm_flatbuffer(vmfb, driver="local-sync")


@pytest.mark.parametrize("name", list(NUMERIC_CASES))
def test_numerics(cpu_module, rng, name):
    el, shapes, params = NUMERIC_CASES[name]
    dt = {f32: np.float32, i32: np.int32, i64: np.int64}[el]
    args = [(rng.standard_normal(s) if dt == np.float32 else rng.integers(-4, 5, s)).astype(dt)
            for s in shapes]  # fmt: skip
    got = np.asarray(getattr(cpu_module, name)(*args))
    expected = ref_conv(*args, **params) if len(shapes) == 2 else ref_reduce_window(*args, **params)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
