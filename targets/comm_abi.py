"""The ABI of the ``comm`` runtime module: the collectives a compiled program imports, by name.

IREE's CPU drivers have no collective channels, so a per-rank program calls collectives as
imports of a runtime module named ``comm`` (:mod:`flow.targets.comm_module` implements it over
MPI), declared once per name at module level::

    func.func private @comm.all_reduce_sum.4x8xf32(tensor<4x8xf32>, i32, i32)
        -> (tensor<4x8xf32>, i32)
    %y, %t1 = func.call @comm.all_reduce_sum.4x8xf32(%x, %t0, %group)
        : (tensor<4x8xf32>, i32, i32) -> (tensor<4x8xf32>, i32)

The runtime implements these imports, so it owns their names: ``flow-lower-collectives``
spells its calls with :func:`import_name`. This module imports nothing but the standard
library, so the lowering can use it without loading IREE's runtime.

Import names are ``comm.<collective>`` optionally followed by ``.<suffix>``: an MLIR module
declares a symbol once, so a program that calls a collective on several tensor types gives each
declaration its own suffix. :func:`import_name` and :func:`declare` derive it from the types;
the runtime ignores it. (Operands may also be ``!hal.buffer_view``, with ``hal.tensor.export``
and ``hal.tensor.import`` around the call: one declaration then serves every type.) Where the
program uses a result, IREE checks its shape and type against the declaration.

The ABI (every import is synchronous; ``group`` is an i32 id, 0 = all ranks, others from the
program's group table or :func:`~flow.targets.groups.register_group`; ranks named in arguments
are ranks *within* the group; "dim 0" is the leading dimension, other dimensions are the
caller's transposes; every import also takes ``after`` and returns a token, see below):

====================================  ============================================================
``all_reduce_{op}(x, after, g)``      ``op`` in sum, max, min, prod; result shaped like ``x``
``all_reduce_{op}_inplace(...)``      same, reduced into ``x``'s buffer: only when ``x`` is
                                      dead after the call (not a function argument, not a
                                      constant, no later use); otherwise use the above
``all_gather(x, after, group)``       concatenation of every rank's ``x`` along dim 0, in group
                                      rank order; dim 0 may differ between ranks
``reduce_scatter_{op}(x, after, g)``  reduce, then split along dim 0: rank ``r`` keeps block
                                      ``r`` of the balanced split (``n // G`` rows, one more for
                                      the first ``n % G`` ranks); ``x`` has one shape on all ranks
``all_to_all(x, after, group)``       split ``x`` along dim 0 (balanced split, block ``j`` to rank
                                      ``j``), concatenate the received blocks along dim 0 in
                                      source rank order
``broadcast(x, root, after, g)``      the root's ``x`` on every rank; elsewhere ``x`` only gives
                                      the shape and element type
``send(x, peer, tag, after, g)``      returns at once: ``x`` is copied and sent in the
                                      background, so two ranks may both send first; messages
                                      between two ranks with one tag arrive in order
``recv(like, peer, tag, after, g)``   a tensor shaped like ``like`` (contents ignored)
``fence(x, after)``                   returns once ``x`` is computed (no data moves): ties
                                      compute into the chain of calls
``barrier(after, group)``             no tensor
====================================  ============================================================

Results are the tensor (when there is one), then an i32 token, ``after + 1``. ``after`` is the
token of the function's previous call (any i32 for the first): the chain makes the calls
data-dependent, so the compiler keeps them in program order. Without it IREE reorders
independent calls, and differently on ranks whose pieces differ in shape, so that ranks
would wait in different collectives; it could also hoist a receive, which waits, above a send
that a peer needs first.

Results live in fresh buffers (never aliasing an operand), except the ``_inplace`` variants.
Element types: f16, bf16, f32, f64 and 8- to 64-bit integers; data movement works on bytes
(any type), reductions of f16/bf16 accumulate in f32.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "MODULE_NAME", "REDUCE_OPS", "SIGNATURES", "WORLD", "Signature", "declare", "import_name",
    "imported_collectives", "mangle",
]  # fmt: skip

MODULE_NAME = "comm"
"""The name of the runtime module the calls import from."""

WORLD = 0
"""The group id of all ranks."""

REDUCE_OPS = ("sum", "max", "min", "prod")
"""The reductions of ``all_reduce_{op}`` and ``reduce_scatter_{op}``."""


@dataclass(frozen=True)
class Signature:
    """One import of the ``comm`` module: its name, the i32 arguments after the tensor (the
    ``after`` token, then the group id, last), whether it takes a tensor and returns one
    (every import returns a token, after the tensor)."""

    name: str
    int_args: tuple[str, ...]
    takes_tensor: bool
    returns_tensor: bool

    @property
    def cconv(self) -> str:
        """IREE VM calling convention: ``r`` = buffer view, ``i`` = i32, ``v`` = nothing."""
        args = ("r" if self.takes_tensor else "") + "i" * len(self.int_args)
        return f"0{args}_{'r' if self.returns_tensor else ''}i"


_ORDERED = ("after", "group")
SIGNATURES: dict[str, Signature] = {
    s.name: s
    for s in (
        *(Signature(f"all_reduce_{op}{sfx}", _ORDERED, True, True)
          for op in REDUCE_OPS for sfx in ("", "_inplace")),
        *(Signature(f"reduce_scatter_{op}", _ORDERED, True, True) for op in REDUCE_OPS),
        Signature("all_gather", _ORDERED, True, True),
        Signature("all_to_all", _ORDERED, True, True),
        Signature("broadcast", ("root", *_ORDERED), True, True),
        Signature("send", ("peer", "tag", *_ORDERED), True, False),
        Signature("recv", ("peer", "tag", *_ORDERED), True, True),
        Signature("fence", ("after",), True, False),
        Signature("barrier", _ORDERED, False, False),
    )
}  # fmt: skip
"""Every import of the ``comm`` module, by name (the order the runtime exports them in)."""


def _signature(name: str) -> Signature:
    sig = SIGNATURES.get(name)
    if sig is None:
        raise KeyError(f"no collective {name!r}; known: {', '.join(SIGNATURES)}")
    return sig


def mangle(tensor_type: str) -> str:
    """``tensor<2x?xf32>`` -> ``2xDxf32``: a type as symbol characters."""
    inner = tensor_type.strip()
    if inner.startswith("tensor<") and inner.endswith(">"):
        inner = inner[len("tensor<") : -1]
    return re.sub(r"[^A-Za-z0-9_]", "_", inner.replace("?", "D"))


def import_name(name: str, tensor_type: str | None = None, result_type: str | None = None) -> str:
    """The symbol of a collective specialised to its types, e.g. ``comm.all_gather.2x3xf32.4x3xf32``:
    an MLIR module declares each symbol once, so each tensor type needs its own name. The
    operand type is appended, then the result type when it differs."""
    _signature(name)
    parts = [MODULE_NAME, name]
    if tensor_type is not None:
        parts.append(mangle(tensor_type))
        if result_type is not None and result_type != tensor_type:
            parts.append(mangle(result_type))
    return ".".join(parts)


def declare(name: str, tensor_type: str | None = None, result_type: str | None = None) -> str:
    """The MLIR declaration of an import, e.g. ``declare("all_gather", "tensor<2x3xf32>",
    "tensor<4x3xf32>")``; ``result_type`` defaults to ``tensor_type``. Call it as
    ``@`` + :func:`import_name` with the same arguments."""
    c = _signature(name)
    if c.takes_tensor and tensor_type is None:
        raise ValueError(f"{name} takes a tensor: pass its type")
    args = ([tensor_type] if c.takes_tensor else []) + ["i32"] * len(c.int_args)
    results = ([result_type or tensor_type] if c.returns_tensor else []) + ["i32"]
    result = f" -> {results[0]}" if len(results) == 1 else f" -> ({', '.join(results)})"
    symbol = import_name(name, tensor_type if c.takes_tensor else None, result_type)
    return f"func.func private @{symbol}({', '.join(args)}){result}"


_IMPORT_RE = re.compile(rb"comm\.([A-Za-z_][A-Za-z0-9_$.]*)")


def imported_collectives(vmfb: bytes) -> set[str]:
    """The ``comm`` functions a compiled module may import (``all_gather.2x3xf32...``): names
    found in the module whose first part is a collective. Extra names are harmless."""
    if b"comm." not in vmfb:  # the common case, at memory speed even for large modules
        return set()
    found = {m.decode() for m in _IMPORT_RE.findall(vmfb)}
    return {n for n in found if n.split(".", 1)[0] in SIGNATURES}
