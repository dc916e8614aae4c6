"""The hand-written MLIR program that calls the ``comm`` collectives (compiled by the tests, run
by rank_collectives.py on every rank): one function per collective and element type, with the
group id (and root, peer, tag) as function arguments so one program serves every rank and group.
"""

from __future__ import annotations

ROWS, COLS = 4, 3
TYPES = ("f32", "f64", "f16", "bf16", "i32", "i64")
# Which element types each collective is tested with (data movement is type-agnostic bytes;
# f16/bf16 reductions take the widening path).
PLAN: dict[str, tuple[str, ...]] = {
    "all_reduce_sum": TYPES,
    "all_reduce_max": ("f32", "bf16", "i32"),
    "all_reduce_min": ("f32", "i64"),
    "all_reduce_prod": ("f32", "f16", "i32"),
    "all_gather": TYPES,
    "reduce_scatter_sum": ("f32", "f16", "bf16", "i32"),
    "all_to_all": ("f32", "bf16", "i64"),
    "broadcast": ("f32", "f64", "bf16"),
}


def _t(rows: int, ty: str) -> str:
    return f"tensor<{rows}x{COLS}x{ty}>"


def _fn(
    name: str, args: list[tuple[str, str]], body: list[str], results: list[tuple[str, str]]
) -> str:
    sig = ", ".join(f"%{n}: {t}" for n, t in args)
    res = ", ".join(t for _, t in results)
    ret = f"return {', '.join('%' + v for v, _ in results)} : {res}"
    lines = "\n".join(f"  {line}" for line in [*body, ret])
    return f"func.func @{name}({sig}) -> ({res}) {{\n{lines}\n}}"


def _call(result: str, callee: str, operands: list[tuple[str, str]], result_type: str) -> str:
    ops = ", ".join(f"%{v}" for v, _ in operands)
    types = ", ".join(t for _, t in operands)
    head = f"%{result} = " if result else ""
    tail = f" -> {result_type}" if result_type else " -> ()"
    return f"{head}func.call @{callee}({ops}) : ({types}){tail}"


def collective_program(world: int) -> str:
    """MLIR (func/arith/tensor + calls to @comm.*) exercising every collective on ``world``
    ranks. The group id (and root, peer, tag) are function arguments, so one program serves
    every rank and every group; functions whose shapes depend on the rank end in ``_r{rank}``."""
    from flow.targets.collectives import declare, import_name

    decls: set[str] = set()
    fns: list[str] = []

    def call(res: str, name: str, x: tuple[str, str], ints: list[str], rtype: str | None,
             after: str = "t0") -> str:
        """A call of import `name` on `x` (none when its name is empty), the i32 arguments
        `ints` (the group last) and the token `after` before the group; `res` names its
        results (the tensor, if any, then the token)."""
        types = (x[1], rtype) if x[0] and rtype else (x[1],) if x[0] else ()
        decls.add(declare(name, *types))
        *head, group = [(i, "i32") for i in ints]
        operands = ([x] if x[0] else []) + head + [(after, "i32"), group]
        out = f"({rtype}, i32)" if rtype else "i32"
        return _call(res, import_name(name, *types), operands, out)

    g = ("g", "i32")
    zero = "%t0 = arith.constant 0 : i32"  # the first call's token
    # fmt: off
    shapes = {  # collective -> (operand rows, result rows)
        "all_gather": (ROWS, ROWS * world),
        "reduce_scatter_sum": (ROWS * world, ROWS),
        "all_to_all": (ROWS * world, ROWS * world),
    }
    for name, types in PLAN.items():
        ints = ["root", "g"] if name == "broadcast" else ["g"]
        rows, out_rows = shapes.get(name, (ROWS, ROWS))
        for ty in types:
            t, tr = _t(rows, ty), _t(out_rows, ty)
            fns.append(_fn(f"{name}_{ty}", [("x", t), *[(i, "i32") for i in ints]],
                           [zero, call("y, %t1", name, ("x", t), ints, tr)], [("y", tr)]))
    t = _t(ROWS, "f32")
    # In place on a dead intermediate; the argument itself must come back unchanged.
    fns.append(_fn("all_reduce_sum_inplace", [("x", t), g],
                   [zero, "%d = arith.addf %x, %x : " + t,
                    call("y, %t1", "all_reduce_sum_inplace", ("d", t), ["g"], t)],
                   [("y", t), ("x", t)]))
    # The operand of a non-in-place collective is still used afterwards.
    fns.append(_fn("all_reduce_keeps_operand", [("x", t), g],
                   [zero, "%d = arith.addf %x, %x : " + t,
                    call("y, %t1", "all_reduce_sum", ("d", t), ["g"], t),
                    "%z = arith.addf %y, %d : " + t],
                   [("z", t), ("d", t)]))
    # Point to point: even ranks send first, odd ranks receive first.
    # Each passes its ordering token to the next.
    p = [("peer", "i32"), ("tag", "i32"), g]
    pt = ["peer", "tag", "g"]
    fns.append(_fn("send_then_recv", [("x", t), *p],
                   [zero, call("t1", "send", ("x", t), pt, None),
                    f"%like = tensor.empty() : {t}",
                    call("y, %t2", "recv", ("like", t), pt, t, "t1")], [("y", t)]))
    fns.append(_fn("recv_then_send", [("x", t), *p],
                   [zero, f"%like = tensor.empty() : {t}",
                    call("y, %t1", "recv", ("like", t), pt, t),
                    call("t2", "send", ("x", t), pt, None, "t1")], [("y", t)]))
    # Both ranks send first: 2 MiB, above MPI's eager limit, so sends must not wait for receives.
    tb = "tensor<512x1024xf32>"
    fns.append(_fn("exchange", [("x", tb), *p],
                   [zero, call("t1", "send", ("x", tb), pt, None),
                    f"%like = tensor.empty() : {tb}",
                    call("y, %t2", "recv", ("like", tb), pt, tb, "t1")], [("y", tb)]))
    # The type-erased form: one !hal.buffer_view declaration, export/import around the call.
    bv = "!hal.buffer_view"
    decls.add(f"func.func private @comm.all_reduce_sum({bv}, i32, i32) -> ({bv}, i32)")
    fns.append(_fn("all_reduce_sum_buffer_view", [("x", t), g], [
        zero, f"%d = arith.addf %x, %x : {t}",
        f"%v = hal.tensor.export %d : {t} -> {bv}",
        f"%r, %t1 = func.call @comm.all_reduce_sum(%v, %t0, %g) : ({bv}, i32, i32) -> ({bv}, i32)",
        f"%y = hal.tensor.import %r : !hal.buffer_view -> {t}",
        f"%z = arith.addf %y, %x : {t}",
    ], [("z", t)]))
    fns.append(_fn("barrier", [("x", t), g], [zero, call("t1", "barrier", ("", ""), ["g"], None)],
                   [("x", t)]))
    # Uneven (balanced) splits: N = 2G + 1 rows.
    n = 2 * world + 1
    for r in range(world):
        mine = n // world + (1 if r < n % world else 0)
        tn, tm = _t(n, "f32"), _t(mine, "f32")
        fns.append(_fn(f"reduce_scatter_uneven_r{r}", [("x", tn), g],
                       [zero, call("y, %t1", "reduce_scatter_sum", ("x", tn), ["g"], tm)],
                       [("y", tm)]))
        fns.append(_fn(f"all_to_all_uneven_r{r}", [("x", tn), g],
                       [zero, call("y, %t1", "all_to_all", ("x", tn), ["g"],
                                  _t(mine * world, "f32"))],
                       [("y", _t(mine * world, "f32"))]))
        tl = _t(3 if r == 0 else 2, "f32")
        fns.append(_fn(f"all_gather_uneven_r{r}", [("x", tl), g],
                       [zero, call("y, %t1", "all_gather", ("x", tl), ["g"], tn)], [("y", tn)]))
    # fmt: on
    return "\n".join(sorted(decls)) + "\n\n" + "\n\n".join(fns) + "\n"
