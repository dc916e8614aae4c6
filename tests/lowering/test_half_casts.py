"""bf16 and f16 casts in compiled code are bit-exact with ml_dtypes / numpy on every CPU.

Edge values (signed zeros, infinities, quiet NaNs with payloads, subnormals of every format,
rounding ties, overflow boundaries, values that round differently when rounded twice) and
seeded random bit patterns go through one module of casts: to bf16 and f16 from f32, f64,
int8, int32, int64 and bool (read back widened to f32, which is exact), and from bf16 and f16
to every dtype. The module is compiled for the host and for each CPU architecture flow
cross-compiles for (x86-64-v3 and generic arm64 have no bf16 instructions: LLVM's bf16
conversions would call `__truncsfbf2`, which IREE cannot link); a module of this machine's
architecture runs here. Signaling NaNs are left out: the f16 hardware conversions quiet
them, numpy does not.
"""

from __future__ import annotations

import math
import platform
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from _lowering_build import function, module, tensor
from xdsl.dialects.builtin import BFloat16Type, Float16Type, f32, f64, i1, i8, i32, i64

import flow
import flow.dialect as fd
from flow.lowering import run_pipeline, to_iree_text
from flow.targets import (
    UnsupportedError,
    available,
    compile_mlir,
    execution_target,
    get_target,
    load,
)
from flow.targets.table import CPU_ARCHS
from flow.targets.vulkan import arch_of_flags

BF = ml_dtypes.bfloat16
BF_IR, F16_IR = BFloat16Type(), Float16Type()


def _quiet(x: np.ndarray, quiet_bit: int) -> np.ndarray:
    """`x` without signaling NaNs."""
    bits = x.view(f"u{x.itemsize}")
    return x[~(np.isnan(x.astype(np.float32)) & ((bits & quiet_bit) == 0))]


def _values():
    rng = np.random.default_rng(0)
    special32 = np.array([
        0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFE00001,
        1, 0x807FFFFF, 0x00800000, 0x00018000, 0x00008000, 0x80008000,  # subnormals, ties
        0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF,  # bf16 ties to even, just above/below
        0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000,  # bf16 overflow boundary
    ], np.uint32).view(np.float32)  # fmt: skip
    f16_edges = np.array([65504, 65519, 65520, -65520, 2**-24, 2**-25, 1.5 * 2**-25, 2**-14,
                          1 + 2**-11, 1 + 2**-11 + 2**-23], np.float32)  # fmt: skip
    rand32 = rng.integers(0, 2**32, 96, dtype=np.uint64).astype(np.uint32).view(np.float32)
    v32 = _quiet(np.concatenate([special32, f16_edges, rand32]), 0x00400000)
    twice = [1 + 2**-8 + 2**-30, -(1 + 2**-8 + 2**-30), 1 + 2**-11 + 2**-40, 1e39, -1e39,
             2**-130 * (1 + 2**-20), 1.5 * 2**-133, 2**-134 * (1 + 2**-40), 2**-134, 2**-150,
             2**-25 * (1 + 2**-40), 5e-324, 3.4028235677973366e38, 65519.99]  # fmt: skip
    rand64 = np.ldexp(rng.uniform(1, 2, 96) * rng.choice([-1, 1], 96), rng.integers(-140, 140, 96))
    v64 = np.concatenate([v32.astype(np.float64), twice, rand64])
    ints = [0, 1, -1, 127, -128, 65519, 65520, -65520, 2**24 + 1, 2**25 + 2**17 + 1, 2**25 + 2**17,
            2**31 - 1, -(2**31)]  # fmt: skip
    v_i32 = np.concatenate([ints, rng.integers(-(2**31), 2**31, 48)]).astype(np.int32)
    big = [2**63 - 1, -(2**63), 2**62 + 2**54 + 1, 2**62 + 2**54, -(2**62 + 2**54 + 1), 2**53 + 1]
    v_i64 = np.concatenate([v_i32, big, rng.integers(-(2**63), 2**63 - 1, 48, dtype=np.int64)])
    rand16 = rng.integers(0, 2**16, 128).astype(np.uint16)
    v_bf = _quiet(np.concatenate([v32.astype(BF), rand16.view(BF)]), 0x40)
    with np.errstate(over="ignore"):
        v_f16 = _quiet(np.concatenate([v32.astype(np.float16), rand16.view(np.float16)]), 0x200)
    sources = [(f32, v32), (f64, v64), (i8, np.arange(-128, 128).astype(np.int8)),
               (i32, v_i32), (i64, v_i64), (i1, np.array([False, True]))]  # fmt: skip
    return sources, v_bf, v_f16


SOURCES, V_BF, V_F16 = _values()
TO = (f32, f64, i8, i32, i64, i1)
NP = {f32: np.float32, f64: np.float64, i8: np.int8, i32: np.int32, i64: np.int64, i1: np.bool_}


def _module():
    def to_half(b, *xs):
        return [b(fd.CastOp, b(fd.CastOp, x, element_type=h), element_type=f32)
                for x in xs for h in (BF_IR, F16_IR)]  # fmt: skip

    def from_half(b, *xs):
        out = []
        for x in xs:
            out += [b(fd.CastOp, x, element_type=d) for d in TO]
            other = F16_IR if x.type.element_type == BF_IR else BF_IR
            out.append(b(fd.CastOp, b(fd.CastOp, x, element_type=other), element_type=f32))
        return out

    m = module(
        function("to_half", [tensor(t, v.size) for t, v in SOURCES], to_half),
        function("from_half", [tensor(BF_IR, V_BF.size), tensor(F16_IR, V_F16.size)], from_half),
    )
    run_pipeline(m, "flow-to-iree-input", verify=True)
    return to_iree_text(m)


def _bf16_exact(values: np.ndarray) -> np.ndarray:
    """bfloat16 values of `values` rounded once, to nearest with ties to even, in exact
    rational arithmetic (as float32: exact), independently of ml_dtypes (whose versions
    before 0.7 round float64 and wide integers through float32, twice)."""
    out = []
    top = (2 - Fraction(1, 2**7)) * Fraction(2) ** 127  # the largest bfloat16
    for x in values.tolist():
        if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
            out.append(x)  # (NaN sources are floats: their bf16 bits come from the f32 path)
            continue
        f = Fraction(x)
        a = abs(f)
        if a == 0:
            out.append(math.copysign(0.0, x) if isinstance(x, float) else 0.0)
            continue
        e = max(a.numerator.bit_length() - a.denominator.bit_length(), -125)
        while Fraction(2) ** e > a and e > -126:
            e -= 1
        while Fraction(2) ** (e + 1) <= a:
            e += 1
        ulp = Fraction(2) ** (max(e, -126) - 7)
        q, r = divmod(a, ulp)
        if 2 * r > ulp or (2 * r == ulp and q % 2 == 1):
            q += 1
        m = q * ulp
        val = math.inf if m > top else float(m)
        out.append(-val if f < 0 else val)
    return np.array(out, np.float32)


def _expected():
    """(name, source values, expected result, which lanes to compare) for each result."""
    out = []
    with np.errstate(all="ignore"):
        for t, v in SOURCES:
            for h in (BF, np.float16):
                if h is BF and v.dtype.kind == "f":  # NaN payloads: as float32 -> bf16 keeps them
                    want = np.where(np.isnan(v), v.astype(np.float32).astype(BF)
                                    .astype(np.float32), _bf16_exact(v))  # fmt: skip
                elif h is BF:
                    want = _bf16_exact(v)
                else:
                    want = v.astype(h).astype(np.float32)
                out.append((f"{t} -> {np.dtype(h)}", v, want, None))
        for name, v, other in (("bf16", V_BF, np.float16), ("f16", V_F16, BF)):
            f = v.astype(np.float32)
            for d in TO:
                np_d = NP[d]
                if np_d is np.bool_:
                    out.append((f"{name} -> bool", v, v != 0, None))
                elif np.dtype(np_d).kind == "i":  # toward zero; out of range is undefined
                    info = np.iinfo(np_d)
                    ok = np.isfinite(f) & (np.trunc(f) >= info.min) & (np.trunc(f) <= info.max)
                    out.append((f"{name} -> {np.dtype(np_d)}", v, np.trunc(f).astype(np_d), ok))
                else:
                    out.append((f"{name} -> {np.dtype(np_d)}", v, v.astype(np_d), None))
            out.append((f"{name} -> {np.dtype(other)}", v, v.astype(other).astype(np.float32),
                        None))  # fmt: skip
    return out


def _check(results, where: str, f16_nan_payloads: bool = True) -> None:
    """Bit-exact, except (without `f16_nan_payloads`) which NaN a conversion to f16 gives:
    then only NaN-ness and sign (a driver's own f32 -> f16 conversion)."""
    expected = _expected()
    assert len(results) == len(expected)
    problems = []
    for got, (name, src, want, ok) in zip(results, expected):
        got = np.asarray(got)
        assert got.dtype == want.dtype, f"{where} {name}: got {got.dtype}, expected {want.dtype}"
        if not f16_nan_payloads and name.endswith("-> float16"):
            nan = np.isnan(want)
            assert (np.isnan(got) == nan).all(), f"{where} {name}: NaNs differ"
            assert (np.signbit(got[nan]) == np.signbit(want[nan])).all(), f"{where} {name}"
            ok = ~nan if ok is None else ok & ~nan
        if ok is not None:
            got, want, src = got[ok], want[ok], src[ok]
        g, w = (a.view(np.uint8).reshape(a.size, -1) for a in (got, want))
        bad = np.flatnonzero((g != w).any(axis=1))
        if bad.size:
            i = bad[0]
            problems.append(f"{name}: {bad.size} differ, e.g. {src[i]!r} gave {got[i]!r} "
                            f"(bits {g[i][::-1].tobytes().hex()}), expected {want[i]!r} "
                            f"(bits {w[i][::-1].tobytes().hex()})")  # fmt: skip
    assert not problems, f"{where}:\n" + "\n".join(problems)


def _run(vmfb: bytes, target) -> list[np.ndarray]:
    """Both functions of the module, their results in order."""
    mod = load(vmfb, target)
    return [*mod["to_half"](*[v for _, v in SOURCES]), *mod["from_half"](V_BF, V_F16)]


@pytest.fixture(scope="module")
def text() -> str:
    return _module()


def test_host_cpu_is_bit_exact(text):
    _check(_run(compile_mlir(text, "cpu"), "cpu"), "cpu (host)")


_MACHINE = {"x86_64": "x86-64", "amd64": "x86-64", "aarch64": "arm64", "arm64": "arm64"}
_ELF = {"x86-64": 62, "arm64": 183}  # ELF e_machine: EM_X86_64, EM_AARCH64


def _elf_machine(vmfb: bytes) -> int:
    """The `e_machine` of the (64-bit) ELF image embedded in a module."""
    at = vmfb.find(b"\x7fELF")
    assert at >= 0 and vmfb[at + 4] == 2, "no 64-bit ELF image in the module"
    return int.from_bytes(vmfb[at + 18 : at + 20], "little")


@pytest.mark.parametrize("arch", sorted(CPU_ARCHS))
def test_cross_compiled_cpu_is_bit_exact(text, arch):
    """Every architecture's module links (no bf16 instructions there); the one of this
    machine's architecture also runs here, a CPU with everything its target CPU has."""
    target = get_target("cpu", cpu_arch=arch)
    vmfb = compile_mlir(text, target)
    assert _elf_machine(vmfb) == _ELF[arch]
    if _MACHINE.get(platform.machine().lower()) != arch:
        pytest.skip(f"compiled and linked for {arch}; this machine ({platform.machine()}) "
                    "cannot run it")
    _check(_run(vmfb, target), f"cpu ({target.description})")


def test_jit_casts_match_eager():
    """flow.jit's own fused code (casts chained with arithmetic) equals eager bit for bit,
    and a bf16 result comes back as a bf16 tensor.
    (No subnormals into the multiply: IREE's CPU runtime flushes them, FTZ/DAZ.)"""
    x32 = SOURCES[0][1]
    x32 = x32[np.isfinite(x32) & ((np.abs(x32) >= 2**-126) | (x32 == 0))]
    x64 = SOURCES[1][1]
    n = SOURCES[4][1]

    def f(a, b, c):
        bf, f16 = flow.bfloat16, flow.float16
        return (a.to(bf).to(flow.float32) * 2, b.to(bf).to(flow.float64),
                b.to(f16).to(flow.float32), c.to(bf).to(flow.float32), b.to(bf))  # fmt: skip

    args = [flow.tensor(x) for x in (x32, x64, n)]
    with np.errstate(all="ignore"):
        want = [t.numpy() for t in f(*args)]
    got = [t.numpy() for t in flow.jit(f)(*args)]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.view(f"u{g.itemsize}"), w.view(f"u{w.itemsize}"))


def test_graph_casts_match_eager():
    """nn.Graph compiles bf16 / f16 casts like flow.jit."""

    class Casts(flow.nn.Module):
        def forward(self, x):
            return x.to(flow.bfloat16).to(flow.float32), x.to(flow.float16).to(flow.float32)

    class G(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = Casts()

        def build(self, x):
            return self.m(x)

    x = flow.tensor(SOURCES[1][1][:64])
    with np.errstate(all="ignore"):
        want = [t.numpy() for t in Casts()(x)]
    got = [t.numpy() for t in G()(x)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32))


def test_vulkan_is_bit_exact(text):
    """The same integer code on the local Vulkan device's architecture (lavapipe's has f64,
    f16 and int8); a driver's own f32 -> f16 conversion may keep other NaN payload bits."""
    if "vulkan" not in available():
        pytest.skip("no Vulkan device here (install mesa-vulkan-drivers for lavapipe)")
    target = execution_target("vulkan")
    try:
        vmfb = compile_mlir(text, target)
    except UnsupportedError as err:
        pytest.skip(f"this Vulkan device's architecture lacks a dtype of the test: {err}")
    _check(_run(vmfb, target), f"vulkan ({arch_of_flags(target.device_flags)})",
           f16_nan_payloads=False)  # fmt: skip


def test_eager_casts_to_bf16_round_once():
    """Eager `.to(flow.bfloat16)` and `flow.tensor(..., dtype=flow.bfloat16)` round as the
    compiled casts do (once, to nearest even), from every source, whichever ml_dtypes."""
    for t, v in SOURCES:
        keep = ~np.isnan(v) if v.dtype.kind == "f" else np.ones(v.shape, bool)
        want = _bf16_exact(v[keep]).view(np.uint32)
        for how, got in (("cast", flow.tensor(v).to(flow.bfloat16)),
                         ("tensor", flow.tensor(v, dtype=flow.bfloat16))):  # fmt: skip
            got = got.float().numpy()[keep].view(np.uint32)
            bad = np.flatnonzero(got != want)
            assert not bad.size, f"{t} -> bf16 ({how}): {v[keep][bad[:3]]} gave {got[bad[:3]]:}"
