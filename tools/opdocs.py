"""Generate docs/ops.md: the op coverage tables, from the registries.

    python -m flow.tools.opdocs > docs/ops.md      (tests/test_opdocs.py checks it is current)

Table 1 lists every primitive of the frontend registry with the dialect op it
emits, whether it has an eager kernel, a lowering rule and a VJP rule, and the
op's SBP signatures from the dialect's rule table (on a small sample op).
Table 2 lists every public op of `flow` and `flow.nn.functional`; each is run
once eagerly and traced once with `flow.jit` on a small sample input (no
compile: that is what the numeric tests do), and the table records the
outcome and the primitives the trace emitted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

FLOAT, INT, BOOL = "float32", "int64", "bool"


def _samples() -> dict[str, tuple[Callable, list]]:
    """name -> (call taking tensors, argument specs: shape or (shape, dtype))."""
    import flow

    nnf = flow.nn.functional
    x23, x34, i23, b23 = (2, 3), (3, 4), ((2, 3), INT), ((2, 3), BOOL)
    img, img1, img3 = (1, 2, 6, 6), (1, 2, 6), (1, 2, 4, 4, 4)

    def fn(name, *rest, **kw):
        target = getattr(flow, name, None) or getattr(nnf, name)
        return lambda *ts: target(*ts, *rest, **kw)

    s: dict[str, tuple[Callable, list]] = {}

    def add(names, call_args, specs):
        for n in names.split():
            s[n] = (fn(n, *call_args[0], **call_args[1]), specs)

    add("neg abs exp sqrt rsqrt tanh relu sin cos tan atan arctan sinh cosh erf expm1 floor ceil "
        "trunc fix round reciprocal square sign sigmoid isnan isinf isfinite logical_not sum mean "
        "prod amax amin max min var std var_mean std_mean all any count_nonzero norm argmax argmin "
        "sort argsort flatten squeeze t numel zeros_like ones_like rand_like randn_like bernoulli "
        "relu6 hardtanh hardsigmoid hardswish logsigmoid softplus elu celu selu gelu silu mish "
        "softsign tanhshrink unbind full_like empty_like", ((), {}), [x23])  # fmt: skip
    for n in ("log", "log1p", "log2", "log10", "asin", "acos", "arcsin", "arccos"):
        s[n] = (lambda x, n=n: getattr(flow, n)(flow.clamp(x, 0.1, 0.9)), [x23])
    add("add sub mul div maximum minimum pow atan2 arctan2 fmod remainder floor_divide eq ne lt "
        "le gt ge logical_and logical_or logical_xor mse_loss l1_loss smooth_l1_loss huber_loss",
        ((), {}), [x23, x23])  # fmt: skip
    add("bitwise_and bitwise_or bitwise_xor", ((), {}), [i23, i23])
    add("bitwise_not randint_like", ((), {}), [i23])
    s["randint_like"] = (lambda x: flow.randint_like(x, 0, 5), [i23])
    s["full_like"] = (lambda x: flow.full_like(x, 2.0), [x23])
    s["where"] = (fn("where"), [b23, x23, x23])
    s["masked_fill"] = (lambda x, m: flow.masked_fill(x, m, 0.0), [x23, b23])
    add("clamp clip", ((-0.5, 0.5), {}), [x23])
    add("clamp_min clamp_max", ((0.0,), {}), [x23])
    add("matmul mm", ((), {}), [x23, x34])
    add("bmm", ((), {}), [(2, 2, 3), (2, 3, 4)])
    add("mv", ((), {}), [x23, (3,)])
    add("dot", ((), {}), [(3,), (3,)])
    add("outer", ((), {}), [(2,), (3,)])
    s["einsum"] = (lambda a, b: flow.einsum("ij,jk->ik", a, b), [x23, x34])
    add("logsumexp cumsum cumprod softmax log_softmax softmin", ((1,), {}), [x23])
    add("topk", ((2,), {}), [x23])
    add("reshape view", ((3, 2), {}), [x23])
    add("permute", ((1, 0), {}), [x23])
    add("transpose", ((0, 1), {}), [x23])
    add("movedim", ((0, 1), {}), [x23])
    add("unsqueeze", ((0,), {}), [x23])
    add("broadcast_to", (((4, 2, 3),), {}), [x23])
    add("expand", ((4, 2, 3), {}), [x23])
    s["to"] = (fn("to", flow.int32), [x23])
    add("flip", ((1,), {}), [x23])
    add("roll", ((1, 1), {}), [x23])
    add("repeat", ((2, 1), {}), [x23])
    add("tile", (((2, 1),), {}), [x23])
    add("narrow", ((1, 0, 2), {}), [x23])
    add("select", ((1, 2), {}), [x23])
    add("split chunk", ((2, 1), {}), [(2, 4)])
    add("cat concat concatenate stack", ((), {}), [x23])
    for n in ("cat", "concat", "concatenate", "stack"):
        s[n] = (lambda a, b, n=n: getattr(flow, n)([a, b], 0), [x23, x23])
    s["gather"] = (lambda x, i: flow.gather(x, 1, i), [x23, i23])
    s["take_along_dim"] = (lambda x, i: flow.take_along_dim(x, i, 1), [x23, i23])
    s["index_select"] = (lambda x: flow.index_select(x, 1, flow.tensor([2, 0])), [x23])
    s["one_hot"] = (lambda i: flow.one_hot(i, 3), [i23])
    s["embedding"] = (lambda i, w: flow.embedding(i, w), [i23, (3, 4)])
    s["pad"] = (fn("pad", (1, 1)), [x23])
    for n, call in (("zeros", lambda: flow.zeros(2, 3)), ("ones", lambda: flow.ones(2, 3)),
                    ("empty", lambda: flow.empty(2, 3)), ("randperm", lambda: flow.randperm(5)),
                    ("logspace", lambda: flow.logspace(0, 2, 5)),
                    ("full", lambda: flow.full((2, 3), 1.5)), ("arange", lambda: flow.arange(5)),
                    ("linspace", lambda: flow.linspace(0, 1, 5)), ("eye", lambda: flow.eye(3)),
                    ("rand", lambda: flow.rand(2, 3)), ("randn", lambda: flow.randn(2, 3)),
                    ("randint", lambda: flow.randint(0, 5, (2, 3))),
                    ("normal", lambda: flow.normal(0.0, 1.0, (2, 3)))):  # fmt: skip
        s[n] = (call, [])
    s["linear"] = (fn("linear"), [x23, (4, 3), (4,)])
    s["conv1d"] = (lambda x, w: nnf.conv1d(x, w, padding=1), [img1, (3, 2, 3)])
    s["conv2d"] = (lambda x, w: nnf.conv2d(x, w, stride=2), [img, (3, 2, 3, 3)])
    s["conv3d"] = (lambda x, w: nnf.conv3d(x, w), [img3, (3, 2, 2, 2, 2)])
    s["conv_transpose1d"] = (lambda x, w: nnf.conv_transpose1d(x, w, stride=2, padding=1),
                             [img1, (2, 3, 3)])  # fmt: skip
    s["conv_transpose2d"] = (lambda x, w: nnf.conv_transpose2d(x, w, stride=2, output_padding=1),
                             [img, (2, 3, 3, 3)])  # fmt: skip
    s["conv_transpose3d"] = (lambda x, w: nnf.conv_transpose3d(x, w), [img3, (2, 3, 2, 2, 2)])
    s["unfold"] = (fn("unfold", 3, padding=1), [img])
    s["fold"] = (fn("fold", (4, 4), 2, stride=2), [(1, 8, 4)])
    for d, shape in ((1, img1), (2, img), (3, img3)):
        s[f"max_pool{d}d"] = (fn(f"max_pool{d}d", 2), [shape])
        s[f"avg_pool{d}d"] = (fn(f"avg_pool{d}d", 2), [shape])
        s[f"adaptive_avg_pool{d}d"] = (fn(f"adaptive_avg_pool{d}d", 3), [shape])
    s["interpolate"] = (lambda x: nnf.interpolate(x, scale_factor=2, mode="bilinear"), [img])
    s["upsample"] = (lambda x: flow.upsample(x, scale_factor=2), [img])
    s["upsample_nearest"] = (lambda x: flow.upsample_nearest(x, scale_factor=2), [img])
    s["upsample_bilinear"] = (lambda x: flow.upsample_bilinear(x, scale_factor=2), [img])
    s["leaky_relu"] = (fn("leaky_relu", 0.1), [x23])
    s["threshold"] = (fn("threshold", 0.1, 0.0), [x23])
    s["dropout"] = (fn("dropout", 0.5), [x23])
    s["normalize"] = (fn("normalize"), [x23])
    s["batch_norm"] = (lambda x: nnf.batch_norm(x, flow.zeros(3), flow.ones(3)), [x23])
    s["instance_norm"] = (fn("instance_norm"), [(2, 3, 4)])
    s["layer_norm"] = (fn("layer_norm", (3,)), [x23])
    s["scaled_dot_product_attention"] = (fn("scaled_dot_product_attention", is_causal=True),
                                         [(1, 2, 3, 4)] * 3)  # fmt: skip
    s["rms_norm"] = (fn("rms_norm", (3,)), [x23])
    s["group_norm"] = (fn("group_norm", 1), [(2, 3, 4)])
    s["cross_entropy"] = (lambda x: nnf.cross_entropy(x, flow.tensor([0, 2])), [x23])
    s["nll_loss"] = (lambda x: nnf.nll_loss(x, flow.tensor([0, 2])), [x23])
    s["kl_div"] = (lambda x, y: nnf.kl_div(x, flow.softmax(y, 1), reduction="batchmean"),
                   [x23, x23])  # fmt: skip
    s["binary_cross_entropy"] = (lambda x, y: nnf.binary_cross_entropy(flow.sigmoid(x),
                                                                       flow.sigmoid(y)),
                                 [x23, x23])  # fmt: skip
    s["binary_cross_entropy_with_logits"] = (fn("binary_cross_entropy_with_logits"), [x23, x23])
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
    skip = {"tensor", "as_tensor", "from_numpy", "from_dlpack", "is_tensor", "jit",
            "broadcast_shapes", "save", "load", "manual_seed", "seed", "initial_seed",
            "get_rng_state", "set_rng_state", "no_grad", "enable_grad", "set_grad_enabled",
            "is_grad_enabled", "lazy_stats", "lazy_sync"}  # fmt: skip
    return sorted((n, f) for n, f in ops.items() if n not in skip)


def _arrays(specs: list, rng) -> list[np.ndarray]:
    out = []
    for spec in specs:
        shape, dtype = spec if isinstance(spec[-1], str) else (spec, FLOAT)
        if dtype == BOOL:
            out.append(rng.random(shape) > 0.5)
        elif dtype == INT:
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
        result = call(*(flow.tensor(a) for a in arrays))
        eager = "yes"
    except Exception as err:  # noqa: BLE001 - the table reports it
        result, eager = None, f"no ({type(err).__name__})"
    if eager == "yes" and not isinstance(result, (flow.Tensor, tuple, list)):
        return eager, "n/a (returns a Python value)", "—"
    try:
        module = flow.jit(lambda *ts: call(*ts)).lower(*arrays).module
        used = sorted({op.name for op in module.walk() if op.name.startswith("flow.")})
        missing = [n for n in used if not any(c.name == n for c in RULES)]
        jit = "yes" if not missing else f"no lowering for {', '.join(missing)}"
    except Exception as err:  # noqa: BLE001
        used, jit = [], f"no ({type(err).__name__})"
    return eager, jit, ", ".join(u.removeprefix("flow.") for u in used) or "—"


_NOT_DIFFERENTIABLE = {"and", "or", "xor", "compare", "iota", "full", "constant", "random_bits"}


def _sbp_sample(op_class: type):
    """A small instance of `op_class` whose SBP signatures the table shows (2x3 operands)."""
    from xdsl.dialects.builtin import (
        DenseIntOrFPElementsAttr,
        FloatAttr,
        TensorType,
        f32,
        i1,
        i32,
        i64,
    )
    from xdsl.ir import Block

    import flow.dialect as fd
    from flow.dialect import elementwise as ew

    def args(*types):
        return Block(arg_types=[TensorType(el, shape) for el, shape in types]).args

    x23, i23, v3 = (f32, (2, 3)), (i32, (2, 3)), (f32, (3,))
    img, kernel = (f32, (1, 2, 6, 6)), (f32, (3, 2, 3, 3))
    window = {"strides": (1, 1), "dilations": (1, 1), "padding": ((0, 0), (0, 0))}
    samples = {
        fd.BitwiseOp: lambda c: c.make(*args(i23, i23)),
        fd.CompareOp: lambda c: c.make(*args(x23, x23), direction="lt"),
        fd.SelectOp: lambda c: c.make(*args((i1, (2, 3)), x23, x23)),
        fd.CastOp: lambda c: c.make(*args(x23), element_type=i32),
        fd.MatmulOp: lambda c: c.make(*args(x23, (f32, (3, 4)))),
        fd.ReduceOp: lambda c: c.make(*args(x23), kind="sum", dims=(1,)),
        fd.ReshapeOp: lambda c: c.make(*args(x23), shape=(2, 1, 3)),
        fd.TransposeOp: lambda c: c.make(*args(x23), permutation=(1, 0)),
        fd.BroadcastInDimOp: lambda c: c.make(*args(v3), dims=(1,), shape=(2, 3)),
        fd.ConstantOp: lambda c: c(DenseIntOrFPElementsAttr.from_list(TensorType(f32, (2,)),
                                                                      [0.0, 1.0])),
        fd.FullOp: lambda c: c.make(value=FloatAttr(1.0, f32), shape=(2, 3)),
        fd.IotaOp: lambda c: c.make(dim=0, shape=(2, 3), element_type=i64),
        fd.SliceOp: lambda c: c.make(*args(x23), start=(0, 1), strides=(1, 1), sizes=(2, 2)),
        fd.PadOp: lambda c: c.make(*args(x23), low=(0, 1), high=(0, 1),
                                   value=FloatAttr(0.0, f32)),
        fd.ConcatOp: lambda c: c.make(*args(x23, x23), dim=1),
        fd.GatherOp: lambda c: c.make(*args(x23, (i64, (2, 2))), dim=1),
        fd.ConvOp: lambda c: c.make(*args(img, kernel), groups=1, **window),
        fd.ReduceWindowOp: lambda c: c.make(*args(img), kind="sum", window=(1, 1, 2, 2),
                                            strides=(1, 1, 2, 2), dilations=(1, 1, 1, 1),
                                            padding=((0, 0),) * 4),
        fd.RandomBitsOp: lambda c: c.make(*args((i64, ())), shape=(2, 3), element_type=i32),
        fd.OptimizationBarrierOp: lambda c: c.make(*args(x23, (f32, ()))),
        ew.UnaryOp: lambda c: c.make(*args(x23)),
        ew.BinaryOp: lambda c: c.make(*args(x23, x23)),
    }  # fmt: skip
    for base, make in samples.items():  # the most specific class first
        if issubclass(op_class, base):
            return make(op_class)
    return None


def _sbp(op_class: type) -> str:
    """The SBP cell of a dialect op: its 1-D signatures on the sample, or `replicate only`."""
    from flow.dialect import sbp as sbp_rules
    from flow.dialect.signatures import is_replicate_only

    if is_replicate_only(op_class):
        return "replicate only"
    op = _sbp_sample(op_class)
    if op is None:
        return "no sample (add one to tools/opdocs.py)"

    def nd(entries) -> str:
        return " ".join(sbp_rules.format_nd(e).strip("[]") for e in entries)

    sigs = sbp_rules.signatures(op)
    return "; ".join(f"{nd(s.inputs)} → {nd(s.outputs)}" for s in sigs)


def render() -> str:
    from flow.lowering.lower_to_linalg import RULES
    from flow.primitives.registry import PRIMITIVES

    lines = [
        "# Op coverage",
        "",
        "Generated by `python -m flow.tools.opdocs`; do not edit by hand.",
        "",
        "## Primitives",
        "",
        "Each primitive has a numpy kernel (eager), emits one `flow` dialect op, and that op",
        "has a lowering rule to linalg (compiled) and a reverse-mode (VJP) rule — n/a for",
        "primitives with no inputs or with integer / bool results.",
        "",
        "SBP lists the op's signatures on one mesh axis (`operands → result`, from the rule",
        "table `flow.dialect.signatures.RULES`), in the order SBP inference prefers them, for",
        "a sample whose operands are 2×3 (a 2×3 · 3×4 matmul, a sum over dim 1, 1×2×6×6",
        "images; see `_sbp_sample` in `tools/opdocs.py`); `replicate only` ops are computed",
        "broadcast (`B`) on every rank.",
        "",
        "| primitive | dialect op | eager | lowering | VJP | SBP |",
        "|---|---|---|---|---|---|",
    ]
    for name, prim in sorted(PRIMITIVES.items()):
        lowered = "yes" if prim.op in RULES else "no"
        vjp = "yes" if prim.vjp is not None else ("n/a" if name in _NOT_DIFFERENTIABLE else "no")
        sbp = _sbp(prim.op)
        lines.append(f"| `{name}` | `{prim.op.name}` | yes | {lowered} | {vjp} | {sbp} |")
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
