"""Hand-written global flow programs for the multi-rank tests, with their numpy references.

Each case is a global program (`#flow.dist` types) with one function `@f`, a
world size, the global inputs (built from one seed, the same on every rank) and
the expected global outputs. The rank script cuts the inputs into shards from
the argument types and compares each rank's outputs with the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

P2 = '#flow.placement<"cpu", [0, 1]>'
P22 = '#flow.placement<"cpu", [[0, 1], [2, 3]]>'


def t(shape: str, placement: str, sbp: str) -> str:
    """A global tensor type: `t("5x3", P2, "S(0)")`."""
    return f"tensor<{shape}xf32, #flow.dist<{placement}, #flow.sbp<[{sbp}]>>>"


@dataclass(frozen=True)
class Case:
    name: str
    world: int
    program: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[..., list[np.ndarray]]


def _rand(*shapes: tuple[int, ...]) -> Callable[[np.random.Generator], list[np.ndarray]]:
    return lambda rng: [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _boxing(name: str, shape: tuple[int, ...], src: str, dst: str, place: str = P2) -> Case:
    text = "x".join(map(str, shape))
    a, b = t(text, place, src), t(text, place, dst)
    program = f"""
func.func @f(%x: {a}) -> {b} {{
  %0 = flow.boxing %x : {a} -> {b}
  func.return %0 : {b}
}}
"""
    world = 4 if place == P22 else 2
    return Case(name, world, program, _rand(shape), lambda x: [x])


def _matmul(name: str, sa: str, sb: str, sy: str, final: str | None) -> Case:
    a, b, y = t("5x4", P2, sa), t("4x6", P2, sb), t("5x6", P2, sy)
    if final is None:
        body, out = "func.return %0 : " + y, y
    else:
        out = t("5x6", P2, final)
        body = f"%1 = flow.boxing %0 : {y} -> {out}\n  func.return %1 : {out}"
    program = f"""
func.func @f(%a: {a}, %b: {b}) -> {out} {{
  %0 = flow.matmul %a, %b : {a}, {b} -> {y}
  {body}
}}
"""
    return Case(name, 2, program, _rand((5, 4), (4, 6)), lambda a, b: [a @ b])


def _mlp_grads() -> Case:
    """Data parallel: batch split, weights broadcast; the gradients are partial sums, all-reduced.

    h = tanh(x @ w1), y = h @ w2, loss = sum((y - target)^2) / 2:
    dy = y - target, g2 = h^T dy, dh = (dy w2^T) (1 - h^2), g1 = x^T dh.
    """
    n, i, hdim, o = 7, 4, 6, 3  # 7 rows over 2 ranks: uneven
    x, tg = t(f"{n}x{i}", P2, "S(0)"), t(f"{n}x{o}", P2, "S(0)")
    w1, w2 = t(f"{i}x{hdim}", P2, "B"), t(f"{hdim}x{o}", P2, "B")
    h, y = t(f"{n}x{hdim}", P2, "S(0)"), t(f"{n}x{o}", P2, "S(0)")
    ht, xt = t(f"{hdim}x{n}", P2, "S(1)"), t(f"{i}x{n}", P2, "S(1)")
    w2t = t(f"{o}x{hdim}", P2, "B")
    g2p, g2 = t(f"{hdim}x{o}", P2, "P"), t(f"{hdim}x{o}", P2, "B")
    g1p, g1 = t(f"{i}x{hdim}", P2, "P"), t(f"{i}x{hdim}", P2, "B")
    program = f"""
func.func @f(%x: {x}, %w1: {w1}, %w2: {w2}, %t: {tg}) -> ({g1}, {g2}) {{
  %z = flow.matmul %x, %w1 : {x}, {w1} -> {h}
  %h = flow.tanh %z : {h}
  %y = flow.matmul %h, %w2 : {h}, {w2} -> {y}
  %dy = flow.sub %y, %t : {y}
  %ht = flow.transpose %h, permutation = [1, 0] : {h} -> {ht}
  %g2p = flow.matmul %ht, %dy : {ht}, {y} -> {g2p}
  %g2 = flow.boxing %g2p : {g2p} -> {g2}
  %w2t = flow.transpose %w2, permutation = [1, 0] : {w2} -> {w2t}
  %g = flow.matmul %dy, %w2t : {y}, {w2t} -> {h}
  %hh = flow.mul %h, %h : {h}
  %ghh = flow.mul %g, %hh : {h}
  %dh = flow.sub %g, %ghh : {h}
  %xt = flow.transpose %x, permutation = [1, 0] : {x} -> {xt}
  %g1p = flow.matmul %xt, %dh : {xt}, {h} -> {g1p}
  %g1 = flow.boxing %g1p : {g1p} -> {g1}
  func.return %g1, %g2 : {g1}, {g2}
}}
"""

    def reference(x, w1, w2, target):
        hv = np.tanh(x @ w1)
        dy = hv @ w2 - target
        dh = (dy @ w2.T) * (1 - hv * hv)
        return [x.T @ dh, hv.T @ dy]

    return Case("mlp_grads", 2, program, _rand((n, i), (i, hdim), (hdim, o), (n, o)), reference)


CASES: list[Case] = [
    _boxing("p_to_b", (5, 3), "P", "B"),
    _boxing("p_to_s0_uneven", (5, 3), "P", "S(0)"),
    _boxing("p_to_s1", (3, 4), "P", "S(1)"),
    _boxing("s0_to_b_uneven", (5, 3), "S(0)", "B"),
    _boxing("s1_to_b", (3, 6), "S(1)", "B"),
    _boxing("s0_to_s1", (4, 6), "S(0)", "S(1)"),
    _boxing("s0_to_s1_uneven", (5, 3), "S(0)", "S(1)"),
    _boxing("s1_to_s0", (6, 4), "S(1)", "S(0)"),
    _boxing("b_to_s1_uneven", (4, 5), "B", "S(1)"),
    _boxing("b_to_p", (4, 3), "B", "P"),
    _matmul("matmul_s0_b", "S(0)", "B", "S(0)", "B"),
    _matmul("matmul_b_s1", "B", "S(1)", "S(1)", None),
    _matmul("matmul_s1_s0_p_b", "S(1)", "S(0)", "P", "B"),
    _mlp_grads(),
    _boxing("mesh_s0s1_to_bb", (6, 5), "S(0), S(1)", "B, B", P22),
    _boxing("mesh_pp_to_bs0", (5, 4), "P, P", "B, S(0)", P22),
]
"""Every case; the rank script runs those whose world size is its own."""
