"""Contractions: `bmm`, `mv`, `dot`, `outer` and `einsum`, by transposes, sums and (batched)
matmuls."""

from __future__ import annotations

import builtins

from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops.basic import as_tensor, broadcast_to, matmul, mul, permute, reshape, unsqueeze
from flow.ops.basic import sum as _sum


def bmm(input, mat2) -> Tensor:
    a, b = as_tensor(input), as_tensor(mat2)
    if a.ndim != 3 or b.ndim != 3:
        raise op_error(
            "bmm", f"expected 3-D tensors, got shapes {list(a.shape)} and {list(b.shape)}"
        )
    if a.shape[0] != b.shape[0]:
        raise op_error("bmm", f"batch sizes differ: {a.shape[0]} and {b.shape[0]}")
    return matmul(a, b)


def mv(input, vec) -> Tensor:
    a, v = as_tensor(input), as_tensor(vec)
    if a.ndim != 2 or v.ndim != 1:
        raise op_error("mv", f"expected a matrix and a vector, got shapes {list(a.shape)} and "
                             f"{list(v.shape)}")  # fmt: skip
    return matmul(a, v)


def dot(input, other) -> Tensor:
    a, b = as_tensor(input), as_tensor(other)
    if a.ndim != 1 or b.ndim != 1:
        raise op_error(
            "dot", f"expected 1-D tensors, got shapes {list(a.shape)} and {list(b.shape)}"
        )
    return matmul(a, b)


def outer(input, vec2) -> Tensor:
    return mul(unsqueeze(as_tensor(input), 1), unsqueeze(as_tensor(vec2), 0))


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation for one or more operands, by transposes, sums and batched matmuls.

    Supports explicit (`ij,jk->ik`) and implicit (`ij,jk`) output, `...`, and any
    number of operands (contracted left to right). A label repeated within one
    operand (a diagonal, `ii->i`) is not supported and raises ValueError.
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ts = [as_tensor(t) for t in operands]
    eq_ = equation.replace(" ", "")
    lhs, _, out = eq_.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(ts):
        raise op_error("einsum", f"equation {equation!r} has {len(ins)} operands, got {len(ts)}")
    n_ell = builtins.max((_ellipsis_dims(s, t, equation) for s, t in zip(ins, ts)), default=0)
    ell = "".join(chr(0x2460 + i) for i in range(n_ell))  # labels standing for `...` dims
    ins = [s.replace("...", ell[n_ell - _ellipsis_dims(s, t, equation) :]) for s, t in zip(ins, ts)]
    if "->" in eq_:
        out = out.replace("...", ell)
    else:  # implicit output: the `...` dims, then labels used exactly once, alphabetically
        counts: dict[str, int] = {}
        for s in ins:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    for s, t in zip(ins, ts):
        if len(set(s)) != len(s):
            raise op_error(
                "einsum", f"repeated label in operand {s!r} (diagonals) is not supported"
            )
        if len(s) != t.ndim:
            raise op_error("einsum", f"operand {s!r} has {len(s)} labels but the tensor has "
                                     f"{t.ndim} dims (shape {list(t.shape)})")  # fmt: skip
    sizes: dict[str, int] = {}
    for s, t in zip(ins, ts):
        for c, n in zip(s, t.shape):
            if sizes.setdefault(c, n) != n and n != 1 and sizes[c] != 1:
                raise op_error("einsum", f"label {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = builtins.max(sizes[c], n)
    for c in out:
        if c not in sizes:
            raise op_error("einsum", f"output label {c!r} does not appear in the inputs")
    acc, acc_s = ts[0], ins[0]
    for k in range(1, len(ts)):
        rest = set(out).union(*ins[k + 1 :])
        acc, acc_s = _contract(acc, acc_s, ts[k], ins[k], rest, sizes)
    acc, acc_s = _sum_out(acc, acc_s, set(out))
    return permute(acc, *[acc_s.index(c) for c in out]) if acc_s != out else acc


def _ellipsis_dims(spec: str, t: Tensor, equation: str) -> int:
    """How many dims the `...` of an operand spec stands for."""
    if "..." not in spec:
        return 0
    n = t.ndim - len(spec.replace("...", ""))
    if n < 0:
        raise op_error("einsum", f"operand {spec!r} has more labels than dims in {equation!r}")
    return n


def _sum_out(t: Tensor, s: str, keep: set[str]) -> tuple[Tensor, str]:
    drop = [i for i, c in enumerate(s) if c not in keep]
    if not drop:
        return t, s
    return _sum(t, drop), "".join(c for c in s if c in keep)


def _contract(a, sa, b, sb, rest, sizes) -> tuple[Tensor, str]:
    """Contract two labelled operands into one whose labels are those still needed."""
    a, sa = _sum_out(a, sa, set(sb) | rest)
    b, sb = _sum_out(b, sb, set(sa) | rest)
    batch = [c for c in sa if c in sb and c in rest]
    contracted = [c for c in sa if c in sb and c not in rest]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]

    def arrange(t, s, order):
        t = permute(t, *[s.index(c) for c in order])
        return broadcast_to(t, [sizes[c] for c in order])

    def size(labels):
        n = 1
        for c in labels:
            n *= sizes[c]
        return n

    at = arrange(a, sa, batch + left + contracted)
    bt = arrange(b, sb, batch + contracted + right)
    bs = [sizes[c] for c in batch]
    at = reshape(at, *bs, size(left), size(contracted))
    bt = reshape(bt, *bs, size(contracted), size(right))
    prod = matmul(at, bt)
    out = reshape(prod, *bs, *[sizes[c] for c in left], *[sizes[c] for c in right])
    return out, "".join(batch + left + right)


TENSOR_METHODS: dict = {name: globals()[name] for name in (
    "bmm", "mv", "dot", "outer",
)}  # fmt: skip
"""Tensor methods this module adds (name -> function taking the tensor first)."""

__all__ = [
    "bmm", "mv", "dot", "outer", "einsum",
]  # fmt: skip
