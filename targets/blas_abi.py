"""The ABI of the ``blas`` runtime module: matrix products a compiled cpu program hands to
the host's BLAS, by name.

IREE's CPU code generation stays well below a tuned BLAS on large GEMMs on some CPUs (on an
AVX2 EPYC, 0.4-0.9x of the OpenBLAS numpy ships, see ``blas_calibration``). A cpu program
calls such a product as an import of a runtime module named ``blas``
(:mod:`flow.targets.blas_module` implements it on the mapped buffers, with no copy),
declared once per name at module level::

    func.func private @blas.matmul_nt.256x784xf32.1024x784xf32(tensor<256x784xf32>,
        tensor<1024x784xf32>) -> tensor<256x1024xf32>
    %c = func.call @blas.matmul_nt.256x784xf32.1024x784xf32(%a, %b)
        : (tensor<256x784xf32>, tensor<1024x784xf32>) -> tensor<256x1024xf32>

``matmul_{ta}{tb}(a, b)`` with ``ta``, ``tb`` each ``n`` (as is) or ``t`` (the last two dims
swapped) is ``op(a) @ op(b)`` over the last two dims: ``[..., M, K] x [..., K, N] ->
[..., M, N]``, leading (batch) dims equal. The result is a fresh buffer. Element types: f32
and f64. The operand types in the name make each declaration unique (an MLIR module declares
a symbol once); the runtime reads only the part before the first dot. This module imports
nothing but the standard library, so the lowering can use it without loading IREE's runtime.
"""

from __future__ import annotations

import re

__all__ = ["CCONV", "ELEMENT_TYPES", "MODULE_NAME", "PRODUCTS", "declare", "import_name",
           "imported_products", "transposes"]  # fmt: skip

MODULE_NAME = "blas"
"""The name of the runtime module the calls import from."""

ELEMENT_TYPES = ("f32", "f64")
"""The element types the ``blas`` module takes (BLAS's sgemm and dgemm)."""

CCONV = "0rr_r"
"""IREE VM calling convention of every import: two buffer views in, one out."""


def _product(ta: bool, tb: bool) -> str:
    return f"matmul_{'t' if ta else 'n'}{'t' if tb else 'n'}"


def _mangle(tensor_type: str) -> str:
    inner = tensor_type.strip()
    if inner.startswith("tensor<") and inner.endswith(">"):
        inner = inner[len("tensor<") : -1]
    return re.sub(r"[^A-Za-z0-9_]", "_", inner.replace("?", "D"))


def import_name(ta: bool, tb: bool, lhs_type: str, rhs_type: str) -> str:
    """The symbol of ``op(a) @ op(b)`` on these operand types, e.g.
    ``blas.matmul_nt.256x784xf32.1024x784xf32``."""
    return ".".join((MODULE_NAME, _product(ta, tb), _mangle(lhs_type), _mangle(rhs_type)))


def declare(ta: bool, tb: bool, lhs_type: str, rhs_type: str, result_type: str) -> str:
    """The MLIR declaration of an import, for programs written as text."""
    symbol = import_name(ta, tb, lhs_type, rhs_type)
    return f"func.func private @{symbol}({lhs_type}, {rhs_type}) -> {result_type}"


PRODUCTS = tuple(_product(ta, tb) for ta in (False, True) for tb in (False, True))
"""The import names without their types: ``matmul_nn``, ``matmul_nt``, ``matmul_tn``,
``matmul_tt``."""


def transposes(product: str) -> tuple[bool, bool]:
    """``matmul_tn`` -> (True, False): which operands the product reads transposed."""
    if product not in PRODUCTS:
        raise KeyError(f"no blas product {product!r}; known: {', '.join(PRODUCTS)}")
    return product[-2] == "t", product[-1] == "t"


_IMPORT_RE = re.compile(rb"blas\.(matmul_[nt][nt](?:\.[A-Za-z0-9_]+)*)")


def imported_products(vmfb: bytes) -> set[str]:
    """The ``blas`` functions a compiled module may import (``matmul_nt.256x784xf32...``):
    names found in the module whose first part is a product. Extra names are harmless."""
    if b"blas.matmul_" not in vmfb:  # the common case, at memory speed even for large modules
        return set()
    found = {m.decode() for m in _IMPORT_RE.findall(vmfb)}
    return {n for n in found if n.split(".", 1)[0] in PRODUCTS}
