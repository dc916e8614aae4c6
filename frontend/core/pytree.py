"""Pytrees: nested tuples, lists, namedtuples and dicts of leaves, flattened and rebuilt.

`flatten(tree)` gives the leaves in order and a structure (a `TreeDef`) that
`unflatten(treedef, leaves)` rebuilds the tree from; dict keys are visited in sorted order,
so two dicts with the same items flatten alike whatever their insertion order. Anything
other than a tuple, list or dict is a leaf. `flow.jit` and `nn.Graph` flatten their
arguments and results with these.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TreeDef", "flatten", "leaves", "unflatten"]

# None (a leaf), or (container type, children): for a dict (dict, (sorted keys, TreeDef of
# their values as a list)), else (tuple/list/namedtuple type, ((leaf count, TreeDef), ...)).
TreeDef = Any


def flatten(tree: Any) -> tuple[list, TreeDef]:
    """The leaves of `tree`, in order, and its structure."""
    if isinstance(tree, (tuple, list)):
        out, specs = [], []
        for item in tree:
            sub, spec = flatten(item)
            out += sub
            specs.append((len(sub), spec))
        return out, (type(tree), tuple(specs))
    if isinstance(tree, dict):
        keys = sorted(tree)
        out, spec = flatten([tree[k] for k in keys])
        return out, (dict, (tuple(keys), spec))
    return [tree], None


def leaves(tree: Any) -> list:
    """The leaves of `tree`, in order (`flatten(tree)[0]`)."""
    return flatten(tree)[0]


def unflatten(treedef: TreeDef, values: list) -> Any:
    """The tree of structure `treedef` (from `flatten`) holding `values` as its leaves."""
    if treedef is None:
        return values[0]
    kind, inner = treedef
    if kind is dict:
        keys, sub = inner
        return dict(zip(keys, unflatten(sub, values)))
    out, i = [], 0
    for n, sub in inner:
        out.append(unflatten(sub, values[i : i + n]))
        i += n
    return kind(*out) if hasattr(kind, "_fields") else kind(out)  # a namedtuple, or not
