"""Where global tensors live and how they are split: `flow.placement`, `flow.sbp`, and the
`GlobalInfo` a global tensor carries.

A global tensor is an ordinary `flow.Tensor` whose `_data` is this rank's local shard (its
piece for `S`, the whole value for `B`, its addend for `P`) and whose `_shape` is the GLOBAL
shape, so `shape`, `ndim` and `numel()` describe the global tensor as in OneFlow. Its
distribution lives in the `_dist` slot, a `GlobalInfo` (placement plus one dialect `Sbp` per
mesh axis); local tensors have no `_dist` (the slot is unset or None). Ranks that are not in a
tensor's placement hold an empty shard (`empty_shard`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from flow.core.tensor import Size, Tensor
from flow.dialect.semantics import Sbp
from flow.distributed import env

if TYPE_CHECKING:  # the dialect (and xDSL) loads with the first placement
    from flow.dialect.attrs import PlacementAttr

__all__ = [
    "GlobalInfo",
    "NdSbp",
    "placement",
    "sbp",
    "nd_sbp",
    "fmt_sbp",
    "is_global",
    "global_info",
    "make_global",
    "check_split_dims",
    "member",
    "coord",
    "empty_shard",
]

# --------------------------------------------------------------------------- placement


# Placement device types; each names a target (flow.core.device): a program on global
# tensors of a `cuda` placement compiles for the cuda target (hip is rocm).
_DEVICE_TYPES = ("cpu", "cuda", "rocm", "hip", "vulkan")


class placement:  # noqa: N801  (OneFlow's name)
    """Where a global tensor lives: a device type and an N-d array of process ranks.

    `flow.placement("cpu", [0, 1])` is a 1-D mesh of two ranks;
    `flow.placement("cpu", [[0, 1], [2, 3]])` a 2x2 mesh (one SBP entry per axis).
    The type (cpu, cuda, rocm or hip, vulkan) is the target its programs compile for.
    """

    __slots__ = ("_attr", "_nested")

    def __init__(self, type: str = "cpu", ranks: Sequence | int | None = None) -> None:  # noqa: A002
        if ranks is None:
            raise TypeError(
                "flow.placement: ranks are required, e.g. flow.placement('cpu', [0, 1])"
            )
        if isinstance(ranks, (int, np.integer)):
            ranks = [int(ranks)]
        if not isinstance(type, str) or type.split(":")[0] not in _DEVICE_TYPES:
            raise ValueError(
                f"flow.placement: type must be one of {', '.join(_DEVICE_TYPES)}, got {type!r}"
            )
        from xdsl.utils.exceptions import VerifyException

        from flow.dialect.attrs import PlacementAttr

        try:
            attr = PlacementAttr.get(type, _as_int_lists(ranks))
        except (ValueError, VerifyException) as err:
            raise ValueError(f"flow.placement: {err}") from None
        world = env.get_world_size()
        outside = [r for r in attr.rank_list if r >= world]
        if outside:
            raise ValueError(
                f"flow.placement: ranks {outside} of {list(attr.rank_list)} are outside the "
                f"world of {world} process{'es' if world != 1 else ''} (ranks 0..{world - 1})"
            )
        self._attr = attr
        self._nested = _as_int_lists(ranks)

    @classmethod
    def _from_attr(cls, attr: PlacementAttr) -> placement:
        """The placement of a dialect attribute."""
        out = object.__new__(cls)
        out._attr = attr
        out._nested = np.asarray(attr.rank_list).reshape(attr.mesh_shape).tolist()
        return out

    @classmethod
    def all(cls, type: str = "cpu") -> placement:  # noqa: A002
        """Every rank of the world, as a 1-D mesh."""
        return cls(type, list(range(env.get_world_size())))

    @property
    def type(self) -> str:
        return self._attr.device.data

    @property
    def ranks(self) -> list:
        """The rank array, as a (nested) list."""
        return self._nested

    @property
    def hierarchy(self) -> tuple[int, ...]:
        """The mesh shape."""
        return self._attr.mesh_shape

    @property
    def attr(self) -> PlacementAttr:
        """The dialect attribute `#flow.placement<...>`."""
        return self._attr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, placement) and other._attr == self._attr

    def __hash__(self) -> int:
        return hash(self._attr)

    def __repr__(self) -> str:
        return f'flow.placement(type="{self.type}", ranks={self._nested})'


def _as_int_lists(ranks: Any) -> Any:
    if isinstance(ranks, (int, np.integer)):
        return int(ranks)
    if isinstance(ranks, np.ndarray):
        return _as_int_lists(ranks.tolist())
    if isinstance(ranks, (list, tuple, range)):
        return [_as_int_lists(r) for r in ranks]
    raise TypeError(f"flow.placement: ranks must be ints in (nested) lists, got {ranks!r}")


# --------------------------------------------------------------------------- sbp


class _SbpEntry:
    """One SBP entry as the user sees it: `flow.sbp.split(dim=0)`, `broadcast`, `partial_sum`."""

    __slots__ = ("sbp",)

    def __init__(self, sbp: Sbp) -> None:
        self.sbp = sbp

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SbpEntry) and other.sbp == self.sbp

    def __hash__(self) -> int:
        return hash(self.sbp)

    def __repr__(self) -> str:
        if self.sbp.kind == "S":
            return f"flow.sbp.split(dim={self.sbp.dim})"
        return "flow.sbp.broadcast" if self.sbp.kind == "B" else "flow.sbp.partial_sum"


def _split(dim: int) -> _SbpEntry:
    """Split along `dim` (balanced pieces, the first ranks one larger when uneven)."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 0:
        raise ValueError(f"flow.sbp.split: dim must be a non-negative int, got {dim!r}")
    return _SbpEntry(Sbp("S", int(dim)))


sbp = SimpleNamespace(
    split=_split,
    broadcast=_SbpEntry(Sbp("B")),
    partial_sum=_SbpEntry(Sbp("P")),
    sbp=_SbpEntry,
)
"""`flow.sbp`: `split(dim)`, `broadcast`, `partial_sum` (and the entry type, `sbp.sbp`)."""

NdSbp = tuple[Sbp, ...]


def nd_sbp(value: Any, ndim: int, what: str = "sbp") -> NdSbp:
    """The dialect SBP of `value` (flow.sbp entries), one per placement axis; `what` names
    the caller in errors."""
    entries = value if isinstance(value, (list, tuple)) else (value,)
    out = []
    for e in entries:
        if isinstance(e, _SbpEntry):
            out.append(e.sbp)
        elif isinstance(e, Sbp):
            out.append(e)
        else:
            raise TypeError(f"{what}: expected flow.sbp entries, got {e!r}")
    if len(out) != ndim:
        raise ValueError(
            f"{what}: expected one SBP entry per placement axis ({ndim}), got {len(out)} "
            f"({fmt_sbp(tuple(out))})"
        )
    return tuple(out)


def fmt_sbp(nd: NdSbp) -> str:
    """`nd` as the user spells it: `(flow.sbp.split(dim=0), flow.sbp.broadcast)`."""
    return "(" + ", ".join(repr(_SbpEntry(s)) for s in nd) + ("," if len(nd) == 1 else "") + ")"


# --------------------------------------------------------------------------- tensor metadata


@dataclass(frozen=True)
class GlobalInfo:
    """The distribution of a global tensor: placement and one SBP per mesh axis."""

    placement: placement
    sbp: NdSbp

    def describe(self) -> str:
        return f"placement={self.placement!r}, sbp={fmt_sbp(self.sbp)}"


def is_global(t: Tensor) -> bool:
    return getattr(t, "_dist", None) is not None


def global_info(t: Tensor) -> GlobalInfo:
    """The placement and SBP of the global tensor `t`."""
    info = getattr(t, "_dist", None)
    assert info is not None
    return info


def check_split_dims(op: str, nd: NdSbp, ndim: int) -> None:
    """`op`'s error unless every split of `nd` names a dim of a rank-`ndim` tensor."""
    for s in nd:
        if s.kind == "S" and not 0 <= s.dim < ndim:
            raise ValueError(
                f"{op}: split dim {s.dim} is out of range for a tensor of rank {ndim} "
                f"(sbp {fmt_sbp(nd)})"
            )


def make_global(local: np.ndarray, shape: Sequence[int], info: GlobalInfo) -> Tensor:
    """The global tensor of global `shape` and distribution `info` whose shard here is `local`."""
    t = Tensor._eager(np.asarray(local))
    t._shape = Size(tuple(shape))
    t._dist = info
    return t


def member(pl: placement) -> bool:
    """Whether this rank is one of `pl`'s."""
    return env.get_rank() in pl.attr.rank_list


def coord(pl: placement) -> tuple[int, ...]:
    """This rank's coordinate in `pl`'s mesh (a member only)."""
    from flow.dialect.distributed import mesh_coord

    return mesh_coord(pl.attr, env.get_rank())


def empty_shard(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """The shard of a rank outside the placement: no elements."""
    return np.zeros((0, *tuple(shape)[1:]), dtype)
