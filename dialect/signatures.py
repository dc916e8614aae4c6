"""Per-op SBP signature rules: the table `flow-infer-sbp` and eager global ops ask.

A rule gives, for one mesh axis, the ways an op may be computed on shards
without communication: given operands distributed as the `inputs` entries,
each rank runs the op on its shards and holds its shard of the result,
distributed as the `outputs` entries (sbp.py builds N-d signatures from them).
Every compute op of the dialect has an entry in `RULES`, either its rule or
`replicate_only` (every operand and result `B`), which is named so that being
replicated is a choice made here, never a default: an op without an entry is
an error (`NoSbpRuleError`), not silently replicated.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Attribute, Operation

from . import elementwise as ew
from . import movement as mv
from . import structured as st
from . import window as win
from .attrs import Sbp
from .base import is_float
from .random import RandomBitsOp

B, P = Sbp("B"), Sbp("P")


def S(dim: int) -> Sbp:
    return Sbp("S", dim)


AxisRule = tuple[tuple[Sbp, ...], tuple[Sbp, ...]]
"""One per-axis signature: an SBP entry per operand, one per result."""


def replicate_only(op: Operation) -> list[AxisRule]:
    """Every operand and result broadcast: for ops whose values depend on the global position
    (constants, `full`, `iota`, random bits), so that no shard of them can be made alone."""
    return [((B,) * len(op.operands), (B,) * len(op.results))]


def _shape(value) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


def _splits(n_operands: int, rank: int) -> list[AxisRule]:
    return [((S(d),) * n_operands, (S(d),)) for d in range(rank)]


def _elementwise(op: Operation) -> list[AxisRule]:
    n, rank = len(op.operands), len(_shape(op.results[0]))
    rules = _splits(n, rank) + [((B,) * n, (B,))]
    floating = is_float(op.results[0].type.element_type)
    if isinstance(op, ew.NegOp):
        rules.append(((P,), (P,)))
    elif isinstance(op, (ew.AddOp, ew.SubOp)):
        rules.append(((P, P), (P,)))
    elif isinstance(op, ew.MulOp):
        rules += [((P, B), (P,)), ((B, P), (P,))]
    elif isinstance(op, ew.DivOp) and floating:
        rules.append(((P, B), (P,)))
    elif isinstance(op, ew.SelectOp):
        rules.append(((B, P, P), (P,)))
    return rules


def _matmul(op: Operation) -> list[AxisRule]:
    r = len(_shape(op.lhs))
    rules: list[AxisRule] = [((S(b), S(b)), (S(b),)) for b in range(r - 2)]
    rules += [
        ((S(r - 2), B), (S(r - 2),)),  # split M
        ((B, S(r - 1)), (S(r - 1),)),  # split N
        ((S(r - 1), S(r - 2)), (P,)),  # split K: partial sums
        ((B, B), (B,)),
        ((P, B), (P,)),
        ((B, P), (P,)),
    ]
    return rules


def _reduce(op: st.ReduceOp) -> list[AxisRule]:
    kind, dims = op.kind.data.value, set(op.dims.get_values())
    rules: list[AxisRule] = []
    for d in range(len(_shape(op.operand))):
        if d in dims:
            if kind == "sum":
                rules.append(((S(d),), (P,)))
        else:
            rules.append(((S(d),), (S(d - sum(1 for r in dims if r < d)),)))
    rules.append(((B,), (B,)))
    if kind == "sum":
        rules.append(((P,), (P,)))
    return rules


def _transpose(op: st.TransposeOp) -> list[AxisRule]:
    perm = list(op.permutation.get_values())
    return [((S(perm[i]),), (S(i),)) for i in range(len(perm))] + [((B,), (B,)), ((P,), (P,))]


def _reshape(op: st.ReshapeOp) -> list[AxisRule]:
    """A split dim survives a reshape when it is kept whole with the same elements before it."""
    src, dst = _shape(op.operand), _shape(op.result)
    rules: list[AxisRule] = []
    for d, n in enumerate(src):
        before = prod(src[:d])
        for e, m in enumerate(dst):
            if m == n and prod(dst[:e]) == before:
                rules.append(((S(d),), (S(e),)))
                break
    return rules + [((B,), (B,)), ((P,), (P,))]


def _reshape_even(op: st.ReshapeOp) -> list[tuple[AxisRule, int]]:
    """Splits that survive a reshape when the split is even: the leading dim of dims merged
    into one ((b, t) -> (b*t)), or the dim split into dims whose leading one is split
    ((b*t) -> (b, t)). With `src[d]` (merging) or `dst[e]` (splitting) a multiple of the
    ranks, every rank's block of rows is a block of the other shape's rows too. Each rule
    comes with that dim's size, which must be a multiple of the ranks splitting it."""
    src, dst = _shape(op.operand), _shape(op.result)
    out: list[tuple[AxisRule, int]] = []
    for d in range(len(src)):
        for e in range(len(dst)):
            if prod(src[:d]) != prod(dst[:e]) or src[d] == dst[e]:
                continue
            merged = next((j for j in range(d + 2, len(src) + 1)
                           if prod(src[d:j]) == dst[e]), None)  # fmt: skip
            split = next((j for j in range(e + 2, len(dst) + 1)
                          if prod(dst[e:j]) == src[d]), None)  # fmt: skip
            if merged is not None:
                out.append((((S(d),), (S(e),)), src[d]))
            elif split is not None:
                out.append((((S(d),), (S(e),)), dst[e]))
    return out


def _broadcast(op: st.BroadcastInDimOp) -> list[AxisRule]:
    src, dst = _shape(op.operand), _shape(op.result)
    dims = list(op.broadcast_dimensions.get_values())
    rules: list[AxisRule] = [((S(i),), (S(d),)) for i, d in enumerate(dims) if src[i] == dst[d]]
    return rules + [((B,), (B,)), ((P,), (P,))]


def _slice(op: mv.SliceOp) -> list[AxisRule]:
    src, dst = _shape(op.operand), _shape(op.result)
    start, strides = op.start.get_values(), op.strides.get_values()
    rules: list[AxisRule] = [
        ((S(d),), (S(d),))
        for d in range(len(src))
        if start[d] == 0 and strides[d] == 1 and dst[d] == src[d]
    ]
    return rules + [((B,), (B,)), ((P,), (P,))]


def _is_zero(value: Attribute) -> bool:
    return isinstance(value, (FloatAttr, IntegerAttr)) and value.value.data == 0


def _pad(op: mv.PadOp) -> list[AxisRule]:
    low, high = op.low.get_values(), op.high.get_values()
    rules: list[AxisRule] = [((S(d),), (S(d),)) for d in range(len(low)) if low[d] == high[d] == 0]
    rules.append(((B,), (B,)))
    if _is_zero(op.value):
        rules.append(((P,), (P,)))
    return rules


def _concat(op: mv.ConcatOp) -> list[AxisRule]:
    n, rank, dim = len(op.operands), len(_shape(op.result)), op.dimension.value.data
    rules = [r for r in _splits(n, rank) if r[1][0].dim != dim]
    return rules + [((B,) * n, (B,)), ((P,) * n, (P,))]


def _gather(op: mv.GatherOp) -> list[AxisRule]:
    dim = op.dimension.value.data
    src, idx = _shape(op.operand), _shape(op.indices)
    rules: list[AxisRule] = [
        ((S(d), S(d)), (S(d),)) for d in range(len(src)) if d != dim and src[d] == idx[d]
    ]
    rules += [((B, S(d)), (S(d),)) for d in range(len(idx))]
    return rules + [((B, B), (B,)), ((P, B), (P,))]


def _conv(op: win.ConvOp) -> list[AxisRule]:
    rules: list[AxisRule] = [((S(0), B), (S(0),))]  # split the batch
    if op.groups.value.data == 1:
        rules.append(((B, S(0)), (S(1),)))  # split the output channels
    return rules + [((B, B), (B,)), ((P, B), (P,)), ((B, P), (P,))]


def _reduce_window(op: win.ReduceWindowOp) -> list[AxisRule]:
    window, strides = op.window.get_values(), op.strides.get_values()
    dilations, padding = op.dilations.get_values(), op.padding.get_values()
    rules: list[AxisRule] = [
        ((S(d),), (S(d),))
        for d in range(len(window))
        if window[d] == strides[d] == dilations[d] == 1
        and padding[2 * d] == padding[2 * d + 1] == 0
    ]
    rules.append(((B,), (B,)))
    if op.kind.data.value == "sum":
        rules.append(((P,), (P,)))
    return rules


def _barrier(op: st.OptimizationBarrierOp) -> list[AxisRule]:
    """The value keeps its distribution, whatever the dependency's."""
    own = [S(d) for d in range(len(_shape(op.value)))] + [B, P]
    deps = [S(d) for d in range(len(_shape(op.dep)))] + [B, P]
    return [((v, d), (v,)) for v in own for d in deps]


RULES: dict[type[Operation], Callable[[Operation], list[AxisRule]]] = {
    **{cls: _elementwise for cls in ew.ELEMENTWISE_OPS},
    st.MatmulOp: _matmul,
    st.ReduceOp: _reduce,
    st.TransposeOp: _transpose,
    st.ReshapeOp: _reshape,
    st.BroadcastInDimOp: _broadcast,
    st.ConstantOp: replicate_only,
    st.FullOp: replicate_only,
    st.IotaOp: replicate_only,
    st.OptimizationBarrierOp: _barrier,
    mv.SliceOp: _slice,
    mv.PadOp: _pad,
    mv.ConcatOp: _concat,
    mv.GatherOp: _gather,
    win.ConvOp: _conv,
    win.ReduceWindowOp: _reduce_window,
    RandomBitsOp: replicate_only,
}
"""Per-axis signature rules by op class, one entry for every compute op of the dialect."""

REPLICATED_ONLY: tuple[type[Operation], ...] = tuple(
    cls for cls, rule in RULES.items() if rule is replicate_only
)
"""The ops computed replicated only: their values depend on the global position."""


class NoSbpRuleError(LookupError):
    """An op has no entry in `RULES`: neither signatures nor an explicit `replicate_only`."""

    def __init__(self, op_name: str):
        self.op_name = op_name
        self.detail = (
            "has no SBP signatures and no replicate-only entry in the SBP rule table "
            "(flow.dialect.signatures.RULES); add its rule there, or `replicate_only` if it "
            "must be computed replicated"
        )
        super().__init__(f"'{op_name}' op {self.detail}")


EVEN_RULES: dict[type[Operation], Callable[[Operation], list[tuple[AxisRule, int]]]] = {
    st.ReshapeOp: _reshape_even,
}
"""Per-axis signatures valid only when a dim splits evenly: each rule with the size that
must be a multiple of the number of ranks (`axis_rules` with the mesh's shape)."""


def axis_rules(op: Operation, mesh_shape: tuple[int, ...] | None = None) -> list[AxisRule]:
    """The per-axis signatures of `op`, in preference order (`NoSbpRuleError` without any).
    With the placement's `mesh_shape`, also those of `EVEN_RULES` whose dim every axis
    together splits evenly (a multiple of all the ranks: valid whichever axes split it)."""
    rule = RULES.get(type(op))
    if rule is None:
        raise NoSbpRuleError(op.name)
    rules = rule(op)
    even = EVEN_RULES.get(type(op))
    if even is not None and mesh_shape is not None:
        ranks = prod(mesh_shape)
        extra = [r for r, size in even(op) if size % ranks == 0 and r not in rules]
        rules = rules[:-2] + extra + rules[-2:] if extra else rules  # before B and P
    return rules


def is_replicate_only(op_class: type[Operation]) -> bool:
    """Whether the table computes `op_class` replicated only (False for ops not in it)."""
    return RULES.get(op_class) is replicate_only


__all__ = [
    "AxisRule", "RULES", "REPLICATED_ONLY", "NoSbpRuleError", "axis_rules", "is_replicate_only",
    "replicate_only", "B", "P", "S",
]  # fmt: skip
