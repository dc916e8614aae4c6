"""Shards of global tensors: balanced splits, mesh coordinates and shard types.

Splits are balanced like OneFlow's: `n` elements over `k` ranks give the first
`n % k` ranks one more element than the rest. A shard's shape can therefore
depend on the rank; the verifiers accept any shape some rank of the placement
has, and the per-rank program (flow-partition{rank=R}) picks its own. The
distribution ops (distributed.py) and the collectives (collectives.py) verify
their operands with the helpers at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute

from .attrs import DistAttr, PlacementAttr, Sbp, dist_of, verify_dist_fits
from .base import verify_error


def balanced_split(n: int, k: int) -> tuple[int, ...]:
    """Sizes of the `k` pieces of `n` elements: the first `n % k` get one more."""
    base_, rem = divmod(n, k)
    return tuple(base_ + (1 if i < rem else 0) for i in range(k))


def balanced_offset(n: int, k: int, i: int) -> int:
    """Where piece `i` of `balanced_split(n, k)` starts."""
    base_, rem = divmod(n, k)
    return i * base_ + min(i, rem)


def mesh_coord(placement: PlacementAttr, rank: int) -> tuple[int, ...]:
    """The mesh coordinates of `rank` in `placement` (ValueError if it is not there)."""
    ranks = placement.rank_list
    if rank not in ranks:
        raise ValueError(f"rank {rank} is not in placement {placement} (ranks {list(ranks)})")
    index, coord = ranks.index(rank), []
    for size in reversed(placement.mesh_shape):
        index, c = divmod(index, size)
        coord.append(c)
    return tuple(reversed(coord))


def rank_groups(placement: PlacementAttr, axis: int) -> list[tuple[int, ...]]:
    """The groups a collective along mesh `axis` runs in: ranks that differ only in `axis`.

    Each group lists its ranks in order of their coordinate along `axis`.
    """
    shape, ranks = placement.mesh_shape, placement.rank_list
    others = [range(s) if a != axis else range(1) for a, s in enumerate(shape)]
    groups = []
    for start in product(*others):
        group = []
        for i in range(shape[axis]):
            coord = list(start)
            coord[axis] = i
            flat = 0
            for c, s in zip(coord, shape):
                flat = flat * s + c
            group.append(ranks[flat])
        groups.append(tuple(group))
    return groups


def local_shape(
    shape: Sequence[int], mesh: Sequence[int], sbps: Sequence[Sbp], coord: Sequence[int]
) -> tuple[int, ...]:
    """The shard shape at mesh `coord`: mesh axes split their dim in order, outer axis first."""
    out = list(shape)
    for size, sbp, c in zip(mesh, sbps, coord):
        if sbp.kind == "S":
            out[sbp.dim] = balanced_split(out[sbp.dim], size)[c]
    return tuple(out)


def local_shapes(ty: TensorType) -> set[tuple[int, ...]]:
    """Every shard shape of the global tensor type `ty`, over all ranks of its placement."""
    dist = dist_of(ty)
    assert dist is not None
    mesh, sbps = dist.placement.mesh_shape, dist.sbp.sbps
    return {local_shape(ty.get_shape(), mesh, sbps, c) for c in product(*map(range, mesh))}


class UnevenSplitError(ValueError):
    """A shard shape depends on the rank, and no rank was given."""


def local_type(ty: Attribute, rank: int | None = None) -> Attribute:
    """The type of `rank`'s shard of `ty` (a local type is returned as is).

    Without a rank the shard shape must be the same on every rank of the
    placement (every split even); otherwise this raises `UnevenSplitError`.
    """
    dist = dist_of(ty)
    if dist is None:
        return ty
    assert isinstance(ty, TensorType)
    if rank is None:
        shapes = local_shapes(ty)
        if len(shapes) != 1:
            raise UnevenSplitError(
                f"the shards of {ty} have different shapes on different ranks "
                f"({', '.join(str(list(s)) for s in sorted(shapes))}): an uneven split needs "
                "a per-rank program (give the pass option rank=R)"
            )
        (shape,) = shapes
    else:
        coord = mesh_coord(dist.placement, rank)
        shape = local_shape(ty.get_shape(), dist.placement.mesh_shape, dist.sbp.sbps, coord)
    return TensorType(ty.element_type, shape)


# --------------------------------------------------------------------------- verifier helpers


def expect_global(op_name: str, what: str, ty: Attribute) -> DistAttr:
    """The distribution of `ty`, which must be a global tensor type that fits it."""
    dist = dist_of(ty)
    if dist is None:
        raise verify_error(
            op_name, f"expected {what} to be a global tensor (#flow.dist encoding), got {ty}"
        )
    assert isinstance(ty, TensorType)
    verify_dist_fits(ty)
    return dist


def expect_local(op_name: str, what: str, ty: Attribute) -> TensorType:
    """`ty`, which must be a local tensor type (no #flow.dist)."""
    if not isinstance(ty, TensorType) or dist_of(ty) is not None:
        raise verify_error(
            op_name, f"expected {what} to be a local tensor (no #flow.dist), got {ty}"
        )
    return ty


def same_element_type(op_name: str, a: TensorType, b: TensorType) -> None:
    if a.element_type != b.element_type:
        raise verify_error(
            op_name, f"expected operand and result element types to match, got {a} and {b}"
        )


__all__ = [
    "UnevenSplitError", "balanced_split", "balanced_offset", "mesh_coord", "rank_groups",
    "local_shape", "local_shapes", "local_type",
]  # fmt: skip
