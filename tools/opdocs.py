"""Generate docs/ops.md: the op coverage tables, from the registries.

    python -m flow.tools.opdocs > docs/ops.md      (tests/test_opdocs.py checks it is current)

Table 1 lists every primitive of the frontend registry with the dialect op it
emits and whether it has an eager kernel, a lowering rule and a VJP rule.
Table 2 lists every public op of `flow` and `flow.nn.functional`; each is run
once eagerly and traced once with `flow.jit` on a small sample input (no
compile: that is what the numeric tests do), and the table records the
outcome and the primitives the trace emitted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

F, I, B = "float32", "int64", "bool"


def _samples() -> dict[str, tuple[Callable, list]]:
    """name -> (call taking tensors, argument specs: shape or (shape, dtype))."""
    import flow

    nnf = flow.nn.functional
    x23, x34, i23, b23 = (2, 3), (3, 4), ((2, 3), I), ((2, 3), B)
    img = (1, 2, 6, 6)

    def fn(name, *rest, **kw):
        target = getattr(flow, name, None) or getattr(nnf, name)
        return lambda *ts: target(*ts, *rest, **kw)

    s: dict[str, tuple[Callable, list]] = {}
    for n in ("neg", "abs", "exp", "sqrt", "rsqrt", "tanh", "relu", "sin", "cos", "tan", "atan",
              "sinh", "cosh", "erf", "expm1", "floor", "ceil", "trunc", "fix", "round",
              "reciprocal", "square", "sign", "sigmoid", "isnan", "isinf", "isfinite",
              "logical_not", "sum", "mean", "prod", "amax", "amin", "max", "min", "var", "std",
              "var_mean", "std_mean", "all", "any", "count_nonzero", "norm", "argmax", "argmin",
              "sort", "argsort", "flatten", "squeeze", "t", "clone", "numel"):  # fmt: skip
        s[n] = (fn(n), [x23])
    for n in ("log", "log1p", "log2", "log10", "asin", "acos", "arcsin", "arccos"):
        s[n] = (lambda n: lambda x: getattr(flow, n)(flow.clamp(x, 0.1, 0.9)))(n), [x23]
    s["arctan"] = (fn("arctan"), [x23])
    for n in ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "atan2", "arctan2", "fmod",
              "remainder", "floor_divide", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
              "logical_or", "logical_xor"):  # fmt: skip
        s[n] = (fn(n), [x23, x23])
    for n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        s[n] = (fn(n), [i23, i23])
    s["bitwise_not"] = (fn("bitwise_not"), [i23])
    s["where"] = (fn("where"), [b23, x23, x23])
    s["clamp"] = s["clip"] = (fn("clamp", -0.5, 0.5), [x23])
    s["clamp_min"], s["clamp_max"] = (fn("clamp_min", 0.0), [x23]), (fn("clamp_max", 0.0), [x23])
    s["matmul"] = s["mm"] = (fn("matmul"), [x23, x34])
    s["bmm"] = (fn("bmm"), [(2, 2, 3), (2, 3, 4)])
    s["mv"], s["dot"], s["outer"] = (fn("mv"), [x23, (3,)]), (fn("dot"), [(3,), (3,)]), (
        fn("outer"), [(2,), (3,)])  # fmt: skip
    s["einsum"] = (lambda a, b: flow.einsum("ij,jk->ik", a, b), [x23, x34])
    s["logsumexp"] = (fn("logsumexp", 1), [x23])
    s["topk"] = (fn("topk", 2), [x23])
    s["cumsum"], s["cumprod"] = (fn("cumsum", 1), [x23]), (fn("cumprod", 1), [x23])
    s["reshape"] = s["view"] = (fn("reshape", 3, 2), [x23])
    s["permute"] = (fn("permute", 1, 0), [x23])
    s["transpose"] = (fn("transpose", 0, 1), [x23])
    s["unsqueeze"] = (fn("unsqueeze", 0), [x23])
    s["broadcast_to"] = (fn("broadcast_to", (4, 2, 3)), [x23])
    s["expand"] = (fn("expand", 4, 2, 3), [x23])
    s["to"] = (fn("to", flow.int32), [x23])
    for n in ("zeros_like", "ones_like"):
        s[n] = (fn(n), [x23])
    for n, call in (("zeros", lambda: flow.zeros(2, 3)), ("ones", lambda: flow.ones(2, 3)),
                    ("full", lambda: flow.full((2, 3), 1.5))):  # fmt: skip
        s[n] = (call, [])
    s["linear"] = (fn("linear"), [x23, (4, 3), (4,)])
    _ = img
    return s


def _public_ops() -> list[tuple[str, Callable]]:
    import flow

    nnf = flow.nn.functional
    ops: dict[str, Callable] = {}
    for module, names in ((flow, flow.__all__), (nnf, nnf.__all__)):
        for n in names:
            obj = getattr(module, n)
            if callable(obj) and not isinstance(obj, (type, flow.dtype)) and n not in ops:
                ops[n] = obj
    skip = {"tensor", "from_numpy", "from_dlpack", "is_tensor", "jit", "broadcast_shapes"}
    return sorted((n, f) for n, f in ops.items() if n not in skip)


def _arrays(specs: list, rng) -> list[np.ndarray]:
    out = []
    for spec in specs:
        shape, dtype = spec if isinstance(spec[-1], str) else (spec, F)
        if dtype == B:
            out.append(rng.random(shape) > 0.5)
        elif dtype == I:
            out.append(rng.integers(0, 3, shape).astype(np.int64))
        else:
            out.append(rng.standard_normal(shape).astype(np.float32))
    return out


def _check(call: Callable, specs: list) -> tuple[str, str, str]:
    """(eager, jit, primitives) for one sample."""
    import flow
    from flow.lowering.lower_to_linalg import RULES

    rng = np.random.default_rng(0)
    arrays = _arrays(specs, rng)
    try:
        call(*(flow.tensor(a) for a in arrays))
        eager = "yes"
    except Exception as err:  # noqa: BLE001 - the table reports it
        eager = f"no ({type(err).__name__})"
    try:
        module = flow.jit(lambda *ts: call(*ts)).lower(*arrays).module
        used = sorted({op.name for op in module.walk() if op.name.startswith("flow.")})
        missing = [n for n in used if not any(c.name == n for c in RULES)]
        jit = "yes" if not missing else f"no lowering for {', '.join(missing)}"
    except Exception as err:  # noqa: BLE001
        used, jit = [], f"no ({type(err).__name__})"
    return eager, jit, ", ".join(u.removeprefix("flow.") for u in used) or "—"


def render() -> str:
    from flow._primitives import PRIMITIVES
    from flow.lowering.lower_to_linalg import RULES

    lines = [
        "# Op coverage",
        "",
        "Generated by `python -m flow.tools.opdocs`; do not edit by hand.",
        "",
        "## Primitives",
        "",
        "Each primitive has a numpy kernel (eager), emits one `flow` dialect op, and that op",
        "has a lowering rule to linalg (compiled). VJP rules arrive with autograd.",
        "",
        "| primitive | dialect op | eager | lowering | VJP |",
        "|---|---|---|---|---|",
    ]
    for name, prim in sorted(PRIMITIVES.items()):
        lowered = "yes" if prim.op in RULES else "no"
        vjp = "yes" if prim.vjp is not None else "—"
        lines.append(f"| `{name}` | `{prim.op.name}` | yes | {lowered} | {vjp} |")
    samples = _samples()
    lines += [
        "",
        "## Public ops",
        "",
        "Every public op of `flow` and `flow.nn.functional`, run eagerly and traced with",
        "`flow.jit` on a small sample; the last column lists the primitives its trace emits.",
        "Numerics (eager vs numpy, compiled vs eager) are checked by the test suite.",
        "",
        "| op | eager | jit | primitives |",
        "|---|---|---|---|",
    ]
    for name, _fn in _public_ops():
        if name not in samples:
            lines.append(f"| `{name}` | not sampled | not sampled | |")
            continue
        eager, jit, used = _check(*samples[name])
        lines.append(f"| `{name}` | {eager} | {jit} | {used} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
