"""What a Vulkan architecture can run, and which one to compile for on this machine's device.

IREE compiles SPIR-V for one Vulkan *architecture* (``--iree-vulkan-target``). Its default,
``vp_android_baseline_2022``, is portable: it runs on any Vulkan device, but it has no 64-bit
floats and no 8/16-bit storage. Measured with IREE 3.13 on Mesa lavapipe:

* ``float64`` is demoted to ``float32`` (the compiled function then expects f32 arguments and
  fails when called with f64); with the demotion off it does not compile;
* ``float16``, ``int8`` and ``bool`` tensors in function arguments or results come back wrong
  (the emulated narrow stores lose elements);
* 64-bit integer division and remainder do not compile ("failed to legalize arith.divsi"),
  which is every integer random op (``randint``, ``randn``, ``normal``).

An architecture with those capabilities has none of these problems: on lavapipe the
``llvmpipe`` architecture runs every public op of flow like the cpu target, and ``float64``
too, except exp, log, tanh, erf and the functions built on them (softmax, sigmoid, the
losses): Vulkan's math instructions (GLSL.std.450) exist for 16/32-bit floats only. So programs compiled to *run here* (``flow.jit``, ``nn.Graph``) are compiled for the
architecture of the local device (:func:`execution_target`), and :func:`check_supported`
refuses, before IREE sees it, what the chosen architecture cannot do; ``flow-compile --target
vulkan`` keeps the portable default, since its module may run on another machine.
``FLOW_VULKAN_TARGET=<arch>`` overrides the architecture (a name of :data:`ARCHS`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .table import Target, get_target

__all__ = [
    "ARCHS",
    "DEFAULT_ARCH",
    "Arch",
    "UnsupportedError",
    "arch_of_flags",
    "check_supported",
    "device_arch",
    "execution_target",
]

DEFAULT_ARCH = "vp_android_baseline_2022"
_FLAG = "--iree-vulkan-target="


@dataclass(frozen=True)
class Arch:
    """What IREE's SPIR-V code for one architecture computes with and keeps in buffers
    (IREE's ``#iree_gpu.target`` ``compute`` and ``storage`` fields for it)."""

    compute: frozenset[str]
    storage: frozenset[str]

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The flow dtypes a program may hold in tensors on this architecture."""
        out = ["float32", "int32", "int64", "bfloat16"]
        if "fp16" in self.compute and "b16" in self.storage:
            out.insert(1, "float16")
        if "fp64" in self.compute:
            out.insert(0, "float64 (no exp/log/tanh/erf)")
        if "b8" in self.storage:
            out += ["int8", "bool"]
        return tuple(out)


def _arch(compute: str, storage: str) -> Arch:
    return Arch(frozenset(compute.split("|")), frozenset(storage.split("|")))


_FULL = _arch("fp64|fp32|fp16|int64|int32|int16|int8", "b64|b32|b16|b8")
_MALI = _arch("fp32|fp16|int32|int16|int8", "b64|b32|b16|b8")

# The names IREE 3.13 accepts for --iree-vulkan-target that were checked here (each compiled,
# and its capabilities read back from the compiled IR). An unknown name crashes the compiler
# inside this process (a segmentation fault), so no other name is passed on.
ARCHS: dict[str, Arch] = {
    DEFAULT_ARCH: _arch("fp32|int32", "b32"),
    "llvmpipe": _FULL,  # Mesa lavapipe (the CPU)
    **dict.fromkeys(("rdna1", "rdna2", "rdna3", "rdna4", "cdna1", "cdna2", "cdna3", "gfx1030",
                     "gfx1100", "gfx942", "rx7900xtx", "rx7900xt"), _FULL),  # AMD
    **dict.fromkeys(("pascal", "volta", "turing", "ampere", "ada", "sm_75", "sm_80", "sm_86",
                     "sm_89", "a100", "rtx3070", "rtx3080", "rtx3090", "rtx4080", "rtx4090"),
                    _FULL),  # NVIDIA
    **dict.fromkeys(("valhall", "valhall1", "valhall2", "valhall3", "valhall4", "mali-g710",
                     "mali-g715"), _MALI),  # ARM
    "adreno": _arch("fp32|fp16|int32|int16|int8", "b64|b32|b16"),  # Qualcomm
}  # fmt: skip


class UnsupportedError(ValueError):
    """A program uses what its target cannot run (e.g. float64 on a Vulkan architecture with
    no 64-bit floats); raised before IREE compiles it. ``target`` names the target."""

    def __init__(self, message: str, *, target: str):
        super().__init__(message)
        self.target = target


def device_arch(device_name: str) -> str | None:
    """The :data:`ARCHS` name for a Vulkan device's name, or None when it is not recognized
    (``llvmpipe (LLVM 15.0.6, 256 bits)`` -> ``llvmpipe``; ``NVIDIA GeForce RTX 4090`` ->
    ``rtx4090``; ``AMD Radeon RX 7900 XTX`` -> ``rx7900xtx``)."""
    name = device_name.lower()
    if "llvmpipe" in name:
        return "llvmpipe"
    for pattern in (r"\b(rtx)\s*(\d{4})\b", r"\b(rx)\s*(\d{4})\s*(xtx|xt)?\b", r"\b(a100)\b"):
        m = re.search(pattern, name)
        if m:
            candidate = "".join(g for g in m.groups() if g)
            return candidate if candidate in ARCHS else None
    return None


def _env_arch() -> str | None:
    value = os.environ.get("FLOW_VULKAN_TARGET", "").strip()
    if not value:
        return None
    if value not in ARCHS:
        raise UnsupportedError(
            f"FLOW_VULKAN_TARGET={value!r} is not a Vulkan architecture flow knows; expected one "
            f"of: {', '.join(ARCHS)}",
            target="vulkan",
        )
    return value


def execution_target(target: str | Target) -> Target:
    """The target to compile a program for that runs on this machine's device: for vulkan, the
    architecture of the local Vulkan device (``FLOW_VULKAN_TARGET`` first; the portable
    default for a device not recognized), keeping float64 where the architecture has it.
    Other targets are returned unchanged."""
    tgt = get_target(target)
    if tgt.name != "vulkan":
        return tgt
    arch = _env_arch()
    if arch is None:
        from .runtime import device_names

        names = device_names("vulkan")
        arch = device_arch(names[0]) if names else None
    if arch is None or arch == arch_of_flags(tgt.device_flags):
        return tgt
    flags = [f for f in tgt.device_flags if not f.startswith(_FLAG)]
    flags.append(_FLAG + arch)
    if "fp64" in ARCHS[arch].compute:
        flags.append("--iree-input-demote-f64-to-f32=false")
    return replace(tgt, device_flags=tuple(flags))


def arch_of_flags(flags: Sequence[str]) -> str:
    """The Vulkan architecture a flag list compiles for (the last ``--iree-vulkan-target``)."""
    arch = DEFAULT_ARCH
    for f in flags:
        if f.startswith(_FLAG):
            arch = f[len(_FLAG) :]
    return arch


# Tensor element types in the IR (`tensor<2x3xf64>`, `tensor<f16>`), and 64-bit integer
# division (`arith.divsi ... : i64`, generic or custom form).
_ELEMENT = re.compile(r"tensor<(?:[0-9?]+x)*(f64|f16|i8|i1)>")
_SCALAR_F64 = re.compile(r"(?::|->|\()\s*f64\b")
_DIV64 = re.compile(r"arith\.(?:ceildiv|floordiv|div|rem)[su]i\b[^\n]*\bi64\b")
# Math functions that Vulkan's GLSL.std.450 instruction set has only for 16/32-bit floats (IREE
# 3.13: "'spirv.GL.Exp' op operand #0 must be 16/32-bit float"; erf does not legalize).
_MATH_F64 = re.compile(
    r"math\.(exp|exp2|expm1|log|log2|log10|log1p|powf|tanh|sinh|cosh|sin|"
    r"cos|tan|asin|acos|atan|atan2|asinh|acosh|atanh|erf|erfc|cbrt)\b"
    r"[^\n]*\bf64\b"
)
_FUNC_LINE = re.compile(r"^\s*(?:\"func\.func\"|func\.func\b).*$", re.MULTILINE)

_NAMES = {"f64": "float64", "f16": "float16", "i8": "int8", "i1": "bool"}


def check_supported(target: Target, flags: Sequence[str], source: str) -> None:
    """Refuse a program that the Vulkan architecture of ``flags`` cannot run (see the module
    doc), naming what is missing and what is available; other targets pass. Also refuses an
    architecture name that IREE does not know (it would crash the compiler)."""
    if target.name != "vulkan":
        return
    arch_name = arch_of_flags(flags)
    arch = ARCHS.get(arch_name)
    if arch is None:
        raise UnsupportedError(
            f"target 'vulkan': unknown Vulkan architecture {arch_name!r} "
            f"(--iree-vulkan-target); expected one of: {', '.join(ARCHS)}",
            target="vulkan",
        )
    problems: list[tuple[str, str, int]] = []  # (what, why, line)

    def first(pattern: re.Pattern, text: str, offset: int = 0, group: str | None = None):
        for m in pattern.finditer(text):
            if group is None or m.group(1) == group:
                return source.count("\n", 0, offset + m.start()) + 1
        return None

    if "fp64" not in arch.compute:
        line = first(_ELEMENT, source, group="f64") or first(_SCALAR_F64, source)
        if line:
            problems.append(("float64", "no 64-bit floats", line))
    else:
        line = first(_MATH_F64, source)
        if line:
            problems.append(("float64 exp, log, tanh, erf and the like (softmax, sigmoid, "
                             "losses...)", "Vulkan's math functions have no 64-bit versions",
                             line))  # fmt: skip
    if "b16" not in arch.storage:
        line = first(_ELEMENT, source, group="f16")
        if line:
            problems.append(("float16", "no 16-bit storage", line))
    if "b8" not in arch.storage:
        line = first(_ELEMENT, source, group="i8")
        if line:
            problems.append(("int8", "no 8-bit storage", line))
        for m in _FUNC_LINE.finditer(source):  # bool tensors passed in or out
            line = first(_ELEMENT, m.group(0), m.start(), group="i1")
            if line:
                problems.append(("bool arguments and results", "no 8-bit storage", line))
                break
    if "int64" not in arch.compute:
        line = first(_DIV64, source)
        if line:
            problems.append(("int64 division and remainder (integer random ops: randint, "
                             "randn, normal...)", "no 64-bit integers", line))  # fmt: skip
    if not problems:
        return
    lines = source.splitlines()
    what = "; ".join(f"{w} ({why}; first at IR line {n}: {lines[n - 1].strip()[:120]})"
                     for w, why, n in problems)  # fmt: skip
    from .runtime import available

    hint = (
        "compile for an architecture that has it (FLOW_VULKAN_TARGET=<arch> for flow.jit and "
        "nn.Graph, --iree-flag=--iree-vulkan-target=<arch> for flow-compile; e.g. llvmpipe "
        "for Mesa lavapipe, rdna3, ampere)"
        if arch_name == DEFAULT_ARCH
        else "use another dtype or another target"
    )
    raise UnsupportedError(
        f"target 'vulkan' (architecture {arch_name}) cannot run this program: {what}. "
        f"Dtypes it supports: {', '.join(arch.dtypes)}. To run it, {hint}; targets usable "
        f"here: {', '.join(available())}",
        target="vulkan",
    )
