"""`flow.utils.global_view` (OneFlow's API): `to_global` / `to_local` of a whole structure, such
as a model's or an nn.Graph's state dict, for saving and loading a model in pieces.

    sd = flow.utils.global_view.to_global(graph.state_dict(), placement=pl, sbp=get_sbp)
    flow.save(flow.utils.global_view.to_local(sd), f"./model_{flow.env.get_rank()}")

Tensors anywhere in nested dicts, lists and tuples are converted; other values are kept.
`sbp` is one SBP (or one per placement axis) for every tensor, or a function
`sbp(structure, tensor)` choosing each tensor's (compare with `is` against entries of the
structure). A rank outside `placement` may pass `None` (it holds no piece): it receives the
structure of the placement's first rank, with empty tensors of the right dtype standing for
the pieces it does not hold, so every rank makes the same calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flow.core import dtypes as _dtypes
from flow.core.tensor import Tensor

__all__ = ["to_global", "to_local"]


def _map(obj: Any, leaf: Callable[[Tensor], Any]) -> Any:
    """`obj` with each tensor `t` in nested dicts / lists / tuples replaced by `leaf(t)`."""
    if isinstance(obj, Tensor):
        return leaf(obj)
    if isinstance(obj, dict):
        out = {k: _map(v, leaf) for k, v in obj.items()}
        return out if type(obj) is dict else type(obj)(out)
    if isinstance(obj, (list, tuple)):
        items = [_map(v, leaf) for v in obj]
        return items if type(obj) is list else tuple(items)
    return obj


def _has_global(obj: Any) -> bool:
    found = []
    _map(obj, lambda t: found.append(t.is_global))
    return any(found)


def _skeleton(obj: Any) -> Any:
    """A picture of `obj` made of plain values: each tensor becomes its dtype and rank."""
    if isinstance(obj, Tensor):
        return {"__tensor__": obj.dtype.name, "ndim": obj.ndim}
    if isinstance(obj, dict):
        return {"__dict__": [[k, _skeleton(v)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"__list__" if isinstance(obj, list) else "__tuple__": [_skeleton(v) for v in obj]}
    return obj


def _rebuild(sk: Any) -> Any:
    """The structure of a `_skeleton`, with an empty tensor of each dtype and rank (a 0-d one
    holds one element)."""
    if isinstance(sk, dict):
        if "__tensor__" in sk:
            from flow.ops.construct import zeros

            return zeros(*([0] * sk["ndim"]), dtype=_dtypes.as_dtype(sk["__tensor__"]))
        if "__dict__" in sk:
            return {k: _rebuild(v) for k, v in sk["__dict__"]}
        if "__list__" in sk:
            return [_rebuild(v) for v in sk["__list__"]]
        return tuple(_rebuild(v) for v in sk["__tuple__"])
    return sk


def to_global(input: Any, placement=None, sbp=None) -> Any:
    """`input` (a tensor, `None`, or nested dicts / lists / tuples holding tensors) with every
    tensor made global on `placement` with `sbp` (see the module docstring). Local tensors
    need both; global ones keep what is not given. Collective over every rank when some
    ranks are outside `placement` and hold local pieces."""
    from flow.distributed import env
    from flow.distributed.boxing import world_allgather
    from flow.distributed.placement import placement as Placement

    if placement is not None and not isinstance(placement, Placement):
        raise TypeError(
            f"flow.utils.global_view.to_global: placement must be a flow.placement, got "
            f"{placement!r}"
        )
    members = [] if placement is None else list(placement.attr.rank_list)
    if members and not _has_global(input) and len(set(members)) < env.get_world_size():
        # ranks outside the placement take the structure of its first rank
        pictures = world_allgather(_skeleton(input), "to_global (structure)")
        if env.get_rank() not in members:
            input = _rebuild(pictures[members[0]])
    if input is None:
        return None
    whole = input

    def convert(t: Tensor) -> Tensor:
        nd = sbp(whole, t) if callable(sbp) else sbp
        if not t.is_global and (placement is None or nd is None):
            raise ValueError(
                "flow.utils.global_view.to_global: a local tensor needs both placement and sbp"
            )
        return t.to_global(placement=placement, sbp=nd)

    return _map(input, convert)


def to_local(input: Any) -> Any:
    """`input` with every global tensor replaced by this rank's piece (`Tensor.to_local`)."""
    return _map(input, lambda t: t.to_local() if t.is_global else t)
