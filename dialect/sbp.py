"""SBP signatures of the flow ops, the boxing table and the boxing cost model.

A signature says how an op may be computed on shards without communication:
given operands distributed as `inputs`, each rank runs the op on its shards and
holds its shard of the result, distributed as `outputs`. Matmul, for example,
has `S(0) x B -> S(0)` (split rows), `B x S(1) -> S(1)` (split columns),
`S(1) x S(0) -> P` (split the contraction: each rank holds an addend),
`B x B -> B`, `P x B -> P` and `B x P -> P`. The per-axis rules of every op are
the table in signatures.py; an op without an entry there is an error, and the
ops that must be computed replicated say so there.

Signatures for an N-d placement are products of the per-axis ones (mesh axis
0 splits first, axis 1 splits the pieces, ...); every per-axis rule is valid
whatever the other axes do, so all products are. The rules that hold only for
even splits (a reshape merging a split dim with the dims after it) are offered
where the placement's mesh divides that dim by all its ranks, so they too hold
whichever axes split it.

The boxing table (`BOXING_TABLE`, read through `boxing_rule` / `boxing_steps`)
says, once, how one mesh axis turns one SBP entry into another: which
collective, with which dims, at which cost in communicated bytes. The cost
model here, the compiled lowering (flow-boxing-to-collectives) and eager
boxing all read it.

`choose(op, operand_sbps)` picks the signature that needs the fewest bytes of
boxing (`boxing_cost`); ties go to the signature needing fewest boxings, then
to the first in `signatures` order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from math import prod

from xdsl.dialects.builtin import IntegerType, TensorType
from xdsl.ir import Attribute, Operation

from .attrs import Sbp, SbpAttr, dist_of
from .collectives import (
    AllGatherOp,
    AllReduceOp,
    AllToAllOp,
    LocalPartialOp,
    LocalSliceOp,
    MeshAxisOp,
    ReduceScatterOp,
)
from .signatures import REPLICATED_ONLY, RULES, NoSbpRuleError, axis_rules

NdSbp = tuple[Sbp, ...]
"""One SBP per mesh axis: the distribution of a tensor over an N-d placement."""


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


def signatures(op: Operation, ndim: int = 1,
               mesh_shape: Sequence[int] | None = None) -> list[Signature]:  # fmt: skip
    """The valid signatures of `op` for a placement with `ndim` mesh axes, in preference order
    (with its `mesh_shape`, also those valid only for splits that are even there).

    Raises `NoSbpRuleError` for an op without an entry in the rule table.
    """
    per_axis = axis_rules(op, tuple(mesh_shape) if mesh_shape is not None else None)
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
    return sig if sig in signatures(op, sig.ndim, dists[0].placement.mesh_shape) else None


# --------------------------------------------------------------------------- the boxing table


def _share(size: float, k: int) -> float:
    """The bytes of a tensor of `size` bytes that the other `k - 1` ranks of an axis hold."""
    return size * (k - 1) / k


def _free(size: float, k: int) -> float:
    return 0.0


def _no_dims(src: Sbp, dst: Sbp) -> dict[str, int]:
    return {}


@dataclass(frozen=True)
class BoxingRule:
    """One row of the boxing table: how one mesh axis turns entry kind `src` into `dst`.

    `op` is the collective that does it on shards, within the groups of the
    axis; `dims(src, dst)` gives that op's dim properties by name and `reduce`
    its combiner (for the ops that sum partial values). `cost(size, k)` is the
    bytes each rank communicates, for a tensor of `size` bytes as the axis sees
    it and `k` ranks on the axis. A row with `via` has no op of its own: it is
    the rows `src -> via` and `via -> dst` in turn (`boxing_steps` expands it).
    """

    src: str
    dst: str
    op: type[MeshAxisOp] | None
    cost: Callable[[float, int], float] = _free
    dims: Callable[[Sbp, Sbp], dict[str, int]] = _no_dims
    reduce: str | None = None
    via: str | None = None

    @property
    def collective(self) -> str:
        """The op's name without `flow.` ("all_reduce", ..., "local_partial"), "via B" for a
        row through another kind, "identity" where the pair needs nothing."""
        if self.op is not None:
            return self.op.name.removeprefix("flow.")
        return f"via {self.via}" if self.via is not None else "identity"


IDENTITY = BoxingRule("=", "=", None)
"""The row of every pair whose source and destination entries are equal: nothing to do."""

BOXING_TABLE: dict[tuple[str, str], BoxingRule] = {
    (r.src, r.dst): r
    for r in (
        BoxingRule("P", "B", AllReduceOp, cost=lambda size, k: 2 * _share(size, k),
                   reduce="sum"),
        BoxingRule("P", "S", ReduceScatterOp, cost=_share,
                   dims=lambda s, d: {"dim": d.dim}, reduce="sum"),
        BoxingRule("S", "B", AllGatherOp, cost=_share, dims=lambda s, d: {"dim": s.dim}),
        BoxingRule("S", "S", AllToAllOp, cost=lambda size, k: _share(size, k) / k,
                   dims=lambda s, d: {"split_dim": d.dim, "concat_dim": s.dim}),
        BoxingRule("B", "S", LocalSliceOp, dims=lambda s, d: {"dim": d.dim}),
        BoxingRule("B", "P", LocalPartialOp),
        BoxingRule("S", "P", None, via="B"),  # gather, then keep the value on one rank
    )
}  # fmt: skip
"""OneFlow's boxing table (DESIGN §5), per mesh axis, keyed by (source kind, destination kind):
P→B all_reduce; P→S(d) reduce_scatter; S(d)→B all_gather; S(i)→S(j) all_to_all (split d=j,
concatenate i); B→S(d) local_slice (no communication); B→P local_partial (the value on the
group's first rank, zeros elsewhere); S→P through B. Equal entries are `IDENTITY`."""


def _entry(x: Sbp | str) -> Sbp:
    if isinstance(x, Sbp):
        return x
    if isinstance(x, str):
        return Sbp.parse(x)
    raise TypeError(f"expected an SBP entry (an Sbp, or text S(<dim>), B or P), got {x!r}")


def boxing_rule(src: Sbp | str, dst: Sbp | str) -> BoxingRule:
    """The row of the boxing table that turns entry `src` into `dst` on one mesh axis."""
    src, dst = _entry(src), _entry(dst)
    if src == dst:
        return IDENTITY
    rule = BOXING_TABLE.get((src.kind, dst.kind))
    if rule is None:
        rows = ", ".join(f"{s}->{d}" for s, d in BOXING_TABLE)
        raise ValueError(
            f"no boxing rule turns {src} into {dst}: the boxing table has rows {rows} "
            "(flow.dialect.sbp.BOXING_TABLE)"
        )
    return rule


@dataclass(frozen=True)
class BoxingStep:
    """One collective of a boxing along one mesh axis: the row `rule` applied to `src -> dst`."""

    src: Sbp
    dst: Sbp
    rule: BoxingRule

    @property
    def collective(self) -> str:
        return self.rule.collective

    @property
    def op(self) -> type[MeshAxisOp]:
        assert self.rule.op is not None
        return self.rule.op

    @property
    def params(self) -> dict[str, int]:
        """The op's dim properties: `{"dim": d}`, `{"split_dim": j, "concat_dim": i}` or none."""
        return self.rule.dims(self.src, self.dst)

    @property
    def reduce(self) -> str | None:
        return self.rule.reduce

    def cost(self, size: float, k: int) -> float:
        return self.rule.cost(size, k)


def boxing_steps(src: Sbp | str, dst: Sbp | str) -> tuple[BoxingStep, ...]:
    """The collectives, in order, that turn entry `src` into `dst` on one mesh axis.

    None for equal entries, two for a row through another kind (S→P: all_gather, then
    local_partial), one otherwise.
    """
    src, dst = _entry(src), _entry(dst)
    rule = boxing_rule(src, dst)
    if rule.via is not None:
        mid = Sbp(rule.via)
        return boxing_steps(src, mid) + boxing_steps(mid, dst)
    return () if rule is IDENTITY else (BoxingStep(src, dst, rule),)


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
    for a 1-D placement); the costs are the boxing table's.
    """
    return sum((step.cost(size, k) for step in boxing_steps(src, dst)), 0.0)


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
    for i, sig in enumerate(signatures(op, ndim, mesh_shape)):
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
    "NdSbp", "Signature", "RULES", "REPLICATED_ONLY", "NoSbpRuleError", "signatures",
    "current_signature", "choose", "axis_cost", "boxing_cost", "tensor_bytes", "element_bytes",
    "format_nd", "BoxingRule", "BoxingStep", "BOXING_TABLE", "IDENTITY", "boxing_rule",
    "boxing_steps",
]  # fmt: skip
