"""The ``blas`` runtime module: an IREE VM module written in Python whose imports run the
host's BLAS (the OpenBLAS that numpy links) on the program's buffers.

A cpu program calls a large matrix product as an import of ``blas`` (the ABI:
:mod:`flow.targets.blas_abi`); each import maps its operand buffers to numpy without a copy
(:mod:`.buffers`), allocates the result buffer on the device and lets ``np.matmul`` write the
product into it (numpy hands 2-D float products, transposed operands included, to BLAS's
gemm). ``flow.targets.load(vmfb, "cpu")`` links this module in when the program imports from
it.

Threads: BLAS runs on the calling thread's VM invocation, which waits for the import, so IREE's
workers are idle meanwhile and BLAS may use every core. Under ``flow-run`` with as many ranks
as cores the launcher sets ``OPENBLAS_NUM_THREADS`` to the cores per rank (as it sets
``local-sync`` for IREE), so ranks do not oversubscribe the cores. OpenBLAS splits a product
over threads by blocks of the result, never along the reduction, so a product is the same bit
for bit from run to run for a given thread count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import iree.runtime as rt
import numpy as np

from .blas_abi import CCONV, MODULE_NAME, PRODUCTS, imported_products, transposes
from .buffers import Buffers, dtype_of

__all__ = ["create_module"]


class _BlasModule:
    """Per-context state of the ``blas`` module: the device's buffers."""

    def __init__(self, device: rt.HalDevice):
        self.buffers = Buffers(device, host_memory=True)


def _product(ta: bool, tb: bool) -> Callable[[_BlasModule, rt.VmRef, rt.VmRef], Any]:
    def impl(self: _BlasModule, a_ref: rt.VmRef, b_ref: rt.VmRef) -> Any:
        bufs = self.buffers
        a_bv, b_bv = bufs.view(a_ref), bufs.view(b_ref)
        dt = dtype_of(a_bv)
        a, b = bufs.array(a_bv, dt), bufs.array(b_bv, dt)
        if ta:
            a = a.swapaxes(-1, -2)
        if tb:
            b = b.swapaxes(-1, -2)
        shape = [*a.shape[:-1], b.shape[-1]]
        c_bv = bufs.new(shape, a_bv.element_type, int(np.prod(shape, dtype=np.int64)) * dt.itemsize)
        np.matmul(a, b, out=bufs.array(c_bv, dt))
        return c_bv.ref

    impl.__name__ = PRODUCTS[2 * ta + tb]
    return impl


_IMPLS = {name: _product(*transposes(name)) for name in PRODUCTS}


def create_module(device: rt.HalDevice, vmfb: bytes = b"") -> tuple[rt.VmModule, Any]:
    """The ``blas`` VM module for a context on the cpu ``device``, exporting every product
    plus the specialised names that ``vmfb`` imports; and its interface, which must stay alive
    as long as the context."""
    iface = rt.PyModuleInterface(MODULE_NAME, lambda _iface: _BlasModule(device))
    names = dict(_IMPLS)
    names.update({n: _IMPLS[n.split(".", 1)[0]] for n in imported_products(vmfb)})
    for name, impl in sorted(names.items()):
        iface.export(name, CCONV, impl)
    return iface.create(), iface
