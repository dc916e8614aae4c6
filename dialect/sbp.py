"""SBP signatures of the flow ops and the boxing cost model (OneFlow's SBP inference).

A signature says, for one mesh axis, how an op may be computed on shards
without communication: given operands distributed as `inputs`, each rank runs
the op on its shards and holds its shard of the result, distributed as
`outputs`. Matmul, for example, has `S(0) x B -> S(0)` (split rows),
`B x S(1) -> S(1)` (split columns), `S(1) x S(0) -> P` (split the contraction:
each rank holds an addend), `B x B -> B`, `P x B -> P` and `B x P -> P`.

Signatures for an N-d placement are products of the per-axis ones (mesh axis
0 splits first, axis 1 splits the pieces, ...); every per-axis rule below is
valid whatever the other axes do, so all products are. Ops without a rule are
computed replicated (`B` everywhere): always correct, never the fastest.

`choose(op, operand_sbps)` picks the signature that needs the fewest bytes of
boxing, by the costs of DESIGN §5 (`boxing_cost`); ties go to the signature
needing fewest boxings, then to the first in `signatures` order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from math import prod

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, TensorType
from xdsl.ir import Attribute, Operation

from . import movement as mv
from . import ops
from . import window as win
from .attrs import Sbp, SbpAttr, dist_of
from .random import RandomBitsOp

NdSbp = tuple[Sbp, ...]
"""One SBP per mesh axis: the distribution of a tensor over an N-d placement."""

B, P = Sbp("B"), Sbp("P")


def S(dim: int) -> Sbp:
    return Sbp("S", dim)


def format_nd(nd: Sequence[Sbp]) -> str:
    return "[" + ", ".join(str(s) for s in nd) + "]"


@dataclass(frozen=True)
class Signature:
    """The nd-SBP of each operand and result under which an op runs shard by shard."""

    inputs: tuple[NdSbp, ...]
    outputs: tuple[NdSbp, ...]

    @property
    def name(self) -> str:
        """E.g. `[S(0)], [B] -> [S(0)]`, the text of the `sbp_signature` attribute."""
        ins = ", ".join(format_nd(i) for i in self.inputs)
        outs = ", ".join(format_nd(o) for o in self.outputs)
        return f"{ins} -> {outs}" if ins else f"-> {outs}"

    @property
    def ndim(self) -> int:
        return len((self.inputs or self.outputs)[0])

    @staticmethod
    def of(inputs: Sequence[Sbp | str], outputs: Sequence[Sbp | str]) -> Signature:
        """A 1-D signature from one SBP per operand and per result."""

        def nd(x: Sbp | str) -> NdSbp:
            return (x if isinstance(x, Sbp) else Sbp.parse(x),)

        return Signature(tuple(nd(i) for i in inputs), tuple(nd(o) for o in outputs))


# --------------------------------------------------------------------------- per-axis rules

Rule1 = tuple[tuple[Sbp, ...], tuple[Sbp, ...]]


def _shape(value) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


def _replicated(op: Operation) -> list[Rule1]:
    """The safe default: every operand and result broadcast."""
    return [((B,) * len(op.operands), (B,) * len(op.results))]


def _splits(n_operands: int, rank: int) -> list[Rule1]:
    return [((S(d),) * n_operands, (S(d),)) for d in range(rank)]


def _elementwise(op: Operation) -> list[Rule1]:
    n, rank = len(op.operands), len(_shape(op.results[0]))
    rules = _splits(n, rank) + [((B,) * n, (B,))]
    is_float = ops.is_float(op.results[0].type.element_type)
    if isinstance(op, ops.NegOp):
        rules.append(((P,), (P,)))
    elif isinstance(op, (ops.AddOp, ops.SubOp)):
        rules.append(((P, P), (P,)))
    elif isinstance(op, ops.MulOp):
        rules += [((P, B), (P,)), ((B, P), (P,))]
    elif isinstance(op, ops.DivOp) and is_float:
        rules.append(((P, B), (P,)))
    elif isinstance(op, ops.SelectOp):
        rules.append(((B, P, P), (P,)))
    return rules


def _matmul(op: Operation) -> list[Rule1]:
    r = len(_shape(op.lhs))
    rules: list[Rule1] = [((S(b), S(b)), (S(b),)) for b in range(r - 2)]
    rules += [
        ((S(r - 2), B), (S(r - 2),)),  # split M
        ((B, S(r - 1)), (S(r - 1),)),  # split N
        ((S(r - 1), S(r - 2)), (P,)),  # split K: partial sums
        ((B, B), (B,)),
        ((P, B), (P,)),
        ((B, P), (P,)),
    ]
    return rules


def _reduce(op: ops.ReduceOp) -> list[Rule1]:
    kind, dims = op.kind.data.value, set(op.dims.get_values())
    rules: list[Rule1] = []
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


def _transpose(op: ops.TransposeOp) -> list[Rule1]:
    perm = list(op.permutation.get_values())
    return [((S(perm[i]),), (S(i),)) for i in range(len(perm))] + [((B,), (B,)), ((P,), (P,))]


def _reshape(op: ops.ReshapeOp) -> list[Rule1]:
    """A split dim survives a reshape when it is kept whole with the same elements before it."""
    src, dst = _shape(op.operand), _shape(op.result)
    rules: list[Rule1] = []
    for d, n in enumerate(src):
        before = prod(src[:d])
        for e, m in enumerate(dst):
            if m == n and prod(dst[:e]) == before:
                rules.append(((S(d),), (S(e),)))
                break
    return rules + [((B,), (B,)), ((P,), (P,))]


def _broadcast(op: ops.BroadcastInDimOp) -> list[Rule1]:
    src, dst = _shape(op.operand), _shape(op.result)
    dims = list(op.broadcast_dimensions.get_values())
    rules: list[Rule1] = [((S(i),), (S(d),)) for i, d in enumerate(dims) if src[i] == dst[d]]
    return rules + [((B,), (B,)), ((P,), (P,))]


def _slice(op: mv.SliceOp) -> list[Rule1]:
    src, dst = _shape(op.operand), _shape(op.result)
    start, strides = op.start.get_values(), op.strides.get_values()
    rules: list[Rule1] = [
        ((S(d),), (S(d),))
        for d in range(len(src))
        if start[d] == 0 and strides[d] == 1 and dst[d] == src[d]
    ]
    return rules + [((B,), (B,)), ((P,), (P,))]


def _is_zero(value: Attribute) -> bool:
    return isinstance(value, (FloatAttr, IntegerAttr)) and value.value.data == 0


def _pad(op: mv.PadOp) -> list[Rule1]:
    low, high = op.low.get_values(), op.high.get_values()
    rules: list[Rule1] = [((S(d),), (S(d),)) for d in range(len(low)) if low[d] == high[d] == 0]
    rules.append(((B,), (B,)))
    if _is_zero(op.value):
        rules.append(((P,), (P,)))
    return rules


def _concat(op: mv.ConcatOp) -> list[Rule1]:
    n, rank, dim = len(op.operands), len(_shape(op.result)), op.dimension.value.data
    rules = [r for r in _splits(n, rank) if r[1][0].dim != dim]
    return rules + [((B,) * n, (B,)), ((P,) * n, (P,))]


def _gather(op: mv.GatherOp) -> list[Rule1]:
    dim = op.dimension.value.data
    src, idx = _shape(op.operand), _shape(op.indices)
    rules: list[Rule1] = [
        ((S(d), S(d)), (S(d),)) for d in range(len(src)) if d != dim and src[d] == idx[d]
    ]
    rules += [((B, S(d)), (S(d),)) for d in range(len(idx))]
    return rules + [((B, B), (B,)), ((P, B), (P,))]


def _conv(op: win.ConvOp) -> list[Rule1]:
    rules: list[Rule1] = [((S(0), B), (S(0),))]  # split the batch
    if op.groups.value.data == 1:
        rules.append(((B, S(0)), (S(1),)))  # split the output channels
    return rules + [((B, B), (B,)), ((P, B), (P,)), ((B, P), (P,))]


def _reduce_window(op: win.ReduceWindowOp) -> list[Rule1]:
    window, strides = op.window.get_values(), op.strides.get_values()
    dilations, padding = op.dilations.get_values(), op.padding.get_values()
    rules: list[Rule1] = [
        ((S(d),), (S(d),))
        for d in range(len(window))
        if window[d] == strides[d] == dilations[d] == 1
        and padding[2 * d] == padding[2 * d + 1] == 0
    ]
    rules.append(((B,), (B,)))
    if op.kind.data.value == "sum":
        rules.append(((P,), (P,)))
    return rules


RULES: dict[type[Operation], Callable] = {
    **{cls: _elementwise for cls in ops.ELEMENTWISE_OPS},
    ops.MatmulOp: _matmul,
    ops.ReduceOp: _reduce,
    ops.TransposeOp: _transpose,
    ops.ReshapeOp: _reshape,
    ops.BroadcastInDimOp: _broadcast,
    mv.SliceOp: _slice,
    mv.PadOp: _pad,
    mv.ConcatOp: _concat,
    mv.GatherOp: _gather,
    win.ConvOp: _conv,
    win.ReduceWindowOp: _reduce_window,
}
"""Per-axis signature rules by op class; other ops (constants, iota, random bits) are `B` only."""

REPLICATED_ONLY: tuple[type[Operation], ...] = (
    ops.ConstantOp, ops.FullOp, ops.IotaOp, RandomBitsOp,
)  # fmt: skip
"""Ops that are computed replicated: their values depend on the global position."""


def signatures(op: Operation, ndim: int = 1) -> list[Signature]:
    """The valid signatures of `op` for a placement with `ndim` mesh axes, in preference order."""
    rule = RULES.get(type(op), _replicated)
    per_axis = rule(op)
    out = []
    for combo in product(per_axis, repeat=ndim):
        inputs = tuple(tuple(c[0][i] for c in combo) for i in range(len(op.operands)))
        outputs = tuple(tuple(c[1][j] for c in combo) for j in range(len(op.results)))
        out.append(Signature(inputs, outputs))
    return out


def current_signature(op: Operation) -> Signature | None:
    """The signature `op` runs under, as its operand and result types say; None if invalid.

    Every operand and result must be global on one placement.
    """
    dists = [dist_of(v.type) for v in (*op.operands, *op.results)]
    if not dists or any(d is None for d in dists):
        return None
    if len({d.placement for d in dists}) != 1:
        return None
    nd = [d.sbp.sbps for d in dists]
    n = len(op.operands)
    sig = Signature(tuple(nd[:n]), tuple(nd[n:]))
    return sig if sig in signatures(op, sig.ndim) else None


# --------------------------------------------------------------------------- cost model


def element_bytes(element_type: Attribute) -> int:
    if isinstance(element_type, IntegerType):
        return max(1, element_type.width.data // 8)
    width = getattr(element_type, "bitwidth", None)
    return max(1, width // 8) if isinstance(width, int) else 4


def tensor_bytes(ty: TensorType) -> int:
    return prod(ty.get_shape()) * element_bytes(ty.element_type)


def axis_cost(src: Sbp, dst: Sbp, size: float, k: int) -> float:
    """Bytes each rank communicates to turn `src` into `dst` along one mesh axis of `k` ranks.

    `size` is the bytes of the tensor the axis distributes (the global tensor
    for a 1-D placement). The table of DESIGN §5: P→B all_reduce, P→S
    reduce_scatter, S→B all_gather, S(i)→S(j) all_to_all; B→S and B→P are
    local; S→P goes through B.
    """
    if src == dst or src.kind == "B":
        return 0.0
    frac = size * (k - 1) / k
    if src.kind == "P":
        return 2 * frac if dst.kind == "B" else frac
    if dst.kind == "S":
        return frac / k
    return frac  # S -> B, S -> P (gather, then keep on one rank)


def boxing_cost(
    ty: TensorType, src: Sequence[Sbp], dst: Sequence[Sbp], mesh_shape: Sequence[int]
) -> float:
    """Bytes to box a tensor of type `ty` from nd-SBP `src` to `dst`: the sum over mesh axes.

    Each axis sees the tensor as split by the other axes' `S` entries.
    """
    total = float(tensor_bytes(ty))
    cost = 0.0
    for a, (s, d) in enumerate(zip(src, dst)):
        others = prod(k for b, k in enumerate(mesh_shape) if b != a and src[b].kind == "S")
        cost += axis_cost(s, d, total / others, mesh_shape[a])
    return cost


def _nd(x: Sequence[Sbp] | SbpAttr) -> NdSbp:
    return x.sbps if isinstance(x, SbpAttr) else tuple(x)


def choose(
    op: Operation,
    operand_sbps: Sequence[Sequence[Sbp] | SbpAttr],
    mesh_shape: Sequence[int] | None = None,
) -> Signature:
    """The cheapest signature of `op` given each operand's current nd-SBP.

    Cost is the boxing bytes over all operands; ties go to fewer boxings, then
    to the earlier signature. `mesh_shape` defaults to the placement of the
    op's first global operand (2 ranks per axis if it has none).
    """
    current = [_nd(s) for s in operand_sbps]
    if len(current) != len(op.operands):
        raise ValueError(f"'{op.name}' has {len(op.operands)} operands, got {len(current)} SBPs")
    if mesh_shape is None:
        dists = [d for o in op.operands if (d := dist_of(o.type)) is not None]
        ndim = len(current[0]) if current else 1
        mesh_shape = dists[0].placement.mesh_shape if dists else (2,) * ndim
    ndim = len(mesh_shape)
    best: tuple[float, int, int] | None = None
    chosen = None
    for i, sig in enumerate(signatures(op, ndim)):
        cost, boxings = 0.0, 0
        for o, have, want in zip(op.operands, current, sig.inputs):
            if have != want:
                boxings += 1
                cost += boxing_cost(o.type, have, want, mesh_shape)
        key = (cost, boxings, i)
        if best is None or key < best:
            best, chosen = key, sig
    assert chosen is not None
    return chosen


__all__ = [
    "NdSbp", "Signature", "RULES", "REPLICATED_ONLY", "signatures", "current_signature",
    "choose", "axis_cost", "boxing_cost", "tensor_bytes", "element_bytes", "format_nd",
]  # fmt: skip
