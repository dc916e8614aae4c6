"""`flow-print-comm-plan{rank=R}`: print a per-rank program's communication plan on stderr.

One line per collective of a partitioned program (the output of `flow-partition{rank=R}`):
the op, the local tensor it moves, its size in bytes and the user source line:

    communication plan of rank 1:
      flow.all_reduce tensor<8x6xf32> (192 bytes) axis=0, kind=sum  at model.py:12

The module is left unchanged. The per-rank pipelines run this step when `FLOW_COMM_PLAN=1`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute
from xdsl.passes import ModulePass

from flow.dialect.locations import source_location

__all__ = ["CommFact", "PrintCommPlanPass", "comm_facts", "communication_plan"]

_COLLECTIVES = ("flow.all_reduce", "flow.all_gather", "flow.reduce_scatter", "flow.all_to_all",
                "flow.send", "flow.recv", "flow.local_slice", "flow.local_partial")  # fmt: skip


def _itemsize(el: Attribute) -> int:
    width = getattr(el, "bitwidth", None) or getattr(getattr(el, "width", None), "data", 32)
    return max(1, int(width) // 8)


@dataclass(frozen=True)
class CommFact:
    """One collective of a per-rank program: the op, the local tensor it moves, its bytes, its
    properties (but the placement) as text, and the user source line ("" when unknown)."""

    op: str
    type: str
    nbytes: int
    props: str
    where: str

    def __str__(self) -> str:
        props = f" {self.props}" if self.props else ""
        where = f"  at {self.where}" if self.where else ""
        return f"{self.op} {self.type} ({self.nbytes} bytes){props}{where}"


def comm_facts(partitioned: ModuleOp) -> list[CommFact]:
    """The collectives of a partitioned (per-rank) program, in program order."""
    facts = []
    for op in partitioned.walk():
        if op.name not in _COLLECTIVES:
            continue
        value = op.operands[0] if op.operands else op.results[0]
        ty = value.type
        n = prod(ty.get_shape()) if ty.get_shape() else 1
        loc = source_location(op)
        where = f"{loc.filename.data}:{loc.line.data}" if loc is not None else ""
        props = ", ".join(f"{k}={v}" for k, v in op.properties.items() if k != "placement")
        facts.append(CommFact(op.name, str(ty), n * _itemsize(ty.element_type), props, where))
    return facts


def communication_plan(partitioned: ModuleOp) -> list[str]:
    """One line per collective of a partitioned (per-rank) program: the op, the local tensor
    it moves, its size in bytes and the user source line."""
    return [str(fact) for fact in comm_facts(partitioned)]


@dataclass(frozen=True)
class PrintCommPlanPass(ModulePass):
    """Print the module's communication plan on stderr (see the module docstring)."""

    name = "flow-print-comm-plan"
    rank: int = -1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        of = f" of rank {self.rank}" if self.rank >= 0 else ""
        print(f"communication plan{of}:", file=sys.stderr)
        for line in communication_plan(op) or ["(no communication)"]:
            print(f"  {line}", file=sys.stderr)
