"""flow-infer-sbp + flow-partition{rank=R} are exact: the rank programs compute the global one.

A small numpy interpreter runs the global program once, and every rank's
partitioned program in its own thread, with collectives and messages simulated
between the threads. Inputs are sharded per their declared SBP (P inputs get
unequal addends), the outputs are reassembled from the shards by their
declared SBP, and both must match. Uneven (balanced) splits and 2-D placements
are included.
"""

from __future__ import annotations

import threading
from itertools import product

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.parser import Parser

from flow.dialect import distributed as dd
from flow.dialect import make_context
from flow.dialect.attrs import Sbp, dist_of
from flow.lowering import run_pipeline

# --------------------------------------------------------------------------- sharding


def _regions(shape, placement, nd, coord):
    """Per dim (start, size) of the shard at `coord` (nested balanced splits)."""
    region = [[0, n] for n in shape]
    for k, s, c in zip(placement.mesh_shape, nd, coord):
        if s.kind == "S":
            start, size = region[s.dim]
            region[s.dim] = [start + dd.balanced_offset(size, k, c), dd.balanced_split(size, k)[c]]
    return region


def shard(value: np.ndarray, ty: TensorType, rank: int) -> np.ndarray:
    dist = dist_of(ty)
    coord = dd.mesh_coord(dist.placement, rank)
    region = _regions(value.shape, dist.placement, dist.sbp.sbps, coord)
    out = value[tuple(slice(a, a + n) for a, n in region)].copy()
    for k, s, c in zip(dist.placement.mesh_shape, dist.sbp.sbps, coord):
        if s.kind == "P":  # unequal addends that sum to the value
            out = out * (c + 1) / (k * (k + 1) / 2)
    return out


def unshard(shards: dict[int, np.ndarray], ty: TensorType) -> np.ndarray:
    dist = dist_of(ty)
    placement, nd = dist.placement, dist.sbp.sbps
    out = np.zeros(ty.get_shape(), dtype=np.float64)
    for rank in placement.rank_list:
        coord = dd.mesh_coord(placement, rank)
        region = _regions(ty.get_shape(), placement, nd, coord)
        index = tuple(slice(a, a + n) for a, n in region)
        if any(s.kind == "B" and c != 0 for s, c in zip(nd, coord)):
            first = [0 if s.kind == "B" else c for s, c in zip(nd, coord)]
            ref = shards[_rank_at(placement, first)]
            np.testing.assert_allclose(shards[rank], ref, rtol=1e-5, atol=1e-5)
            continue
        out[index] += shards[rank]
    return out


def _rank_at(placement, coord) -> int:
    flat = 0
    for c, s in zip(coord, placement.mesh_shape):
        flat = flat * s + c
    return placement.rank_list[flat]


# --------------------------------------------------------------------------- interpreter


class World:
    """Simulated communication between rank threads."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.slots: dict = {}
        self.seq: dict = {}
        self.mail: dict = {}

    def exchange(self, group: tuple[int, ...], rank: int, payload) -> list:
        with self.cond:
            n = self.seq.get((group, rank), 0)
            self.seq[(group, rank)] = n + 1
            slot = self.slots.setdefault((group, n), {})
            slot[rank] = payload
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: len(slot) == len(group), timeout=20):
                raise TimeoutError(f"rank {rank} waits in group {group}")
            return [slot[r] for r in group]

    def send(self, src: int, dst: int, value) -> None:
        with self.cond:
            self.mail.setdefault((src, dst), []).append(value)
            self.cond.notify_all()

    def recv(self, src: int, dst: int):
        with self.cond:
            box = self.mail.setdefault((src, dst), [])
            if not self.cond.wait_for(lambda: box, timeout=20):
                raise TimeoutError(f"rank {dst} waits for rank {src}")
            return box.pop(0)


def _group(op, rank):
    return next(g for g in op.groups() if rank in g)


def _piece(x, dim, k, i):
    n = x.shape[dim]
    a = dd.balanced_offset(n, k, i)
    return np.take(x, range(a, a + dd.balanced_split(n, k)[i]), axis=dim)


REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}


def _eval(op, args, world: World | None, rank: int | None):
    name = op.name
    res_shape = tuple(op.results[0].type.get_shape()) if op.results else None
    simple = {
        "flow.add": np.add, "flow.sub": np.subtract, "flow.mul": np.multiply,
        "flow.div": np.divide, "flow.neg": np.negative, "flow.exp": np.exp,
        "flow.tanh": np.tanh, "flow.maximum": np.maximum, "flow.matmul": np.matmul,
    }  # fmt: skip
    if name in simple:
        return simple[name](*args)
    if name in ("flow.boxing", "flow.to_local", "flow.to_global"):
        return args[0]
    if name == "flow.compare":
        ops_ = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                "eq": np.equal, "ne": np.not_equal}  # fmt: skip
        return ops_[op.direction.data.value](*args)
    if name == "flow.select":
        return np.where(args[0], args[1], args[2])
    if name == "flow.reduce":
        return REDUCE[op.kind.data.value](args[0], axis=tuple(op.dims.get_values()))
    if name == "flow.transpose":
        return np.transpose(args[0], op.permutation.get_values())
    if name == "flow.reshape":
        return args[0].reshape(res_shape)
    if name == "flow.broadcast_in_dim":
        dims = op.broadcast_dimensions.get_values()
        shape = [1] * len(res_shape)
        for i, d in enumerate(dims):
            shape[d] = args[0].shape[i]
        return np.broadcast_to(args[0].reshape(shape), res_shape).copy()
    if name == "flow.full":
        return np.full(res_shape, op.value.value.data, dtype=np.float64)
    if name == "flow.concat":
        return np.concatenate(args, axis=op.dimension.value.data)
    if name == "flow.slice":
        start, strides = op.start.get_values(), op.strides.get_values()
        index = tuple(
            np.arange(a, a + n * st, st) if n else np.arange(0)
            for a, st, n in zip(start, strides, res_shape)
        )
        return args[0][np.ix_(*index)]
    if name == "flow.pad":
        pads = list(zip(op.low.get_values(), op.high.get_values()))
        return np.pad(args[0], pads, constant_values=op.value.value.data)
    if name == "flow.gather":
        return np.take_along_axis(args[0], args[1], axis=op.dimension.value.data)
    if name == "flow.send":
        world.send(rank, op.peer.value.data, args[0])
        return None
    if name == "flow.recv":
        return world.recv(op.peer.value.data, rank)
    # collectives
    group = _group(op, rank)
    k, i = len(group), group.index(rank)
    x = args[0]
    if name == "flow.local_slice":
        return _piece(x, op.dim.value.data, k, i)
    if name == "flow.local_partial":
        return x if i == 0 else np.zeros_like(x)
    got = world.exchange(group, rank, x)
    if name == "flow.all_reduce":
        return REDUCE[op.kind.data.value](np.stack(got), axis=0)
    if name == "flow.all_gather":
        return np.concatenate(got, axis=op.dim.value.data)
    if name == "flow.reduce_scatter":
        return _piece(np.sum(np.stack(got), axis=0), op.dim.value.data, k, i)
    if name == "flow.all_to_all":
        split, concat = op.split_dim.value.data, op.concat_dim.value.data
        return np.concatenate([_piece(g, split, k, i) for g in got], axis=concat)
    raise NotImplementedError(name)


def interpret(f: func.FuncOp, inputs, world=None, rank=None) -> list[np.ndarray]:
    env = dict(zip(f.body.block.args, inputs))
    for op in f.body.block.ops:
        if isinstance(op, func.ReturnOp):
            return [env[v] for v in op.operands]
        value = _eval(op, [env[o] for o in op.operands], world, rank)
        if op.results:
            want = tuple(op.results[0].type.get_shape())
            assert value.shape == want, f"{op.name}: got shape {value.shape}, type says {want}"
            env[op.results[0]] = value
    raise AssertionError("no return")


# --------------------------------------------------------------------------- driver


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def check(text: str, seed: int = 0, int_inputs: dict[int, int] | None = None) -> None:
    """Partition `text` for every rank, run all ranks together, compare with the global run.

    `int_inputs` maps argument positions to an exclusive bound for integer inputs.
    """
    module = parse(text)
    (f,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    rng = np.random.default_rng(seed)
    arg_types = list(f.function_type.inputs.data)
    out_types = list(f.function_type.outputs.data)
    ints = int_inputs or {}
    inputs = [
        rng.integers(0, ints[i], t.get_shape()) if i in ints else rng.standard_normal(t.get_shape())
        for i, t in enumerate(arg_types)
    ]
    expected = interpret(f, inputs)

    ranks = sorted({r for t in arg_types + out_types for r in dist_of(t).placement.rank_list})
    programs = {}
    for rank in ranks:
        m = parse(text)
        run_pipeline(m, f"flow-infer-sbp,flow-partition{{rank={rank}}}")
        m.verify()
        text_out = str(m)
        assert "#flow.dist" not in text_out and "flow.boxing" not in text_out, text_out
        (programs[rank],) = [op for op in m.ops if isinstance(op, func.FuncOp)]

    world, results, errors = World(), {}, []

    def run(rank: int) -> None:
        try:
            local_in = [
                shard(x, t, rank)
                for x, t in zip(inputs, arg_types)
                if rank in dist_of(t).placement.rank_list
            ]
            results[rank] = interpret(programs[rank], local_in, world, rank)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append((rank, err))

    threads = [threading.Thread(target=run, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0][1]
    for j, (want, ty) in enumerate(zip(expected, out_types)):
        holders = [r for r in ranks if r in dist_of(ty).placement.rank_list]
        shards = {}
        for r in holders:
            kept = [i for i, t in enumerate(out_types) if r in dist_of(t).placement.rank_list]
            shards[r] = results[r][kept.index(j)]
        np.testing.assert_allclose(unshard(shards, ty), want, rtol=1e-5, atol=1e-5)


def T(shape, placement: str, sbp: str, el: str = "f32") -> str:
    dims = "x".join(str(s) for s in shape)
    return (
        f'tensor<{dims}x{el}, #flow.dist<#flow.placement<"cpu", {placement}>, #flow.sbp<[{sbp}]>>>'
    )


# --------------------------------------------------------------------------- cases

SBPS_1D = ["S(0)", "S(1)", "B", "P"]


def _boxing(a: str, b: str) -> str:
    if a == b:
        return f"func.func @f(%x: {a}) -> {a} {{\n  func.return %x : {a}\n}}"
    return (
        f"func.func @f(%x: {a}) -> {b} {{\n  %0 = flow.boxing %x : {a} -> {b}\n"
        f"  func.return %0 : {b}\n}}"
    )


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("shape", [(6, 4), (5, 7)], ids=["even", "uneven"])
@pytest.mark.parametrize("src", SBPS_1D)
@pytest.mark.parametrize("dst", SBPS_1D)
def test_every_1d_boxing(src, dst, shape, k):
    pl = str(list(range(k)))
    check(_boxing(T(shape, pl, src), T(shape, pl, dst)))


SBPS_2D = [f"{a}, {b}" for a, b in product(SBPS_1D, repeat=2)]


@pytest.mark.parametrize("src", SBPS_2D)
@pytest.mark.parametrize("dst", SBPS_2D)
def test_every_2d_boxing(src, dst):
    pl = "[[0, 1], [2, 3]]"
    check(_boxing(T((5, 6), pl, src), T((5, 6), pl, dst)))


MATMUL_INPUTS = [("S(0)", "B"), ("B", "S(1)"), ("S(1)", "S(0)"), ("B", "B"), ("P", "B"),
                 ("B", "P"), ("S(0)", "S(0)"), ("S(1)", "B"), ("P", "P")]  # fmt: skip


@pytest.mark.parametrize("lhs, rhs", MATMUL_INPUTS)
@pytest.mark.parametrize("out", ["B", "S(0)"])
def test_matmul_signatures(lhs, rhs, out):
    pl = "[0, 1, 2]"
    a, b, c = T((7, 5), pl, lhs), T((5, 4), pl, rhs), T((7, 4), pl, out)
    check(
        f"func.func @f(%a: {a}, %b: {b}) -> {c} {{\n"
        f"  %0 = flow.matmul %a, %b : {a}, {b} -> {c}\n"
        f"  func.return %0 : {c}\n}}"
    )


def test_batched_matmul_split_batch():
    pl = "[0, 1]"
    a, b, c = T((3, 4, 5), pl, "S(0)"), T((3, 5, 2), pl, "S(0)"), T((3, 4, 2), pl, "B")
    check(
        f"func.func @f(%a: {a}, %b: {b}) -> {c} {{\n"
        f"  %0 = flow.matmul %a, %b : {a}, {b} -> {c}\n"
        f"  func.return %0 : {c}\n}}"
    )


@pytest.mark.parametrize("sbp", ["S(0), B", "B, S(1)", "S(1), S(0)", "P, S(1)", "S(0), S(0)"])
@pytest.mark.parametrize("kind, dims", [("sum", [1]), ("sum", [0]), ("max", [1]), ("sum", [0, 1])])
def test_2d_reduce(sbp, kind, dims):
    pl = "[[0, 1], [2, 3]]"
    a = T((6, 5), pl, sbp)
    shape = [n for d, n in enumerate((6, 5)) if d not in dims]
    out = (
        T(shape, pl, "B, B")
        if shape
        else f'tensor<f32, #flow.dist<#flow.placement<"cpu", {pl}>, #flow.sbp<[B, B]>>>'
    )
    check(
        f"func.func @f(%a: {a}) -> {out} {{\n"
        f"  %0 = flow.reduce {kind} %a, dims = {dims} : {a} -> {out}\n"
        f"  func.return %0 : {out}\n}}"
    )


MLP_2D = [("S(0), B", "B, B"), ("S(0), S(1)", "B, S(0)"), ("B, S(1)", "S(0), S(0)"),
          ("P, B", "B, S(1)")]  # fmt: skip


@pytest.mark.parametrize("x_sbp, w_sbp", MLP_2D)
def test_2d_mlp(x_sbp, w_sbp):
    pl = "[[0, 1], [2, 3]]"
    x, w = T((6, 5), pl, x_sbp), T((5, 3), pl, w_sbp)
    y, s = T((6, 3), pl, "B, B"), T((3,), pl, "B, B")
    check(
        f"func.func @f(%x: {x}, %w: {w}) -> ({y}, {s}) {{\n"
        f"  %0 = flow.matmul %x, %w : {x}, {w} -> {y}\n"
        f"  %1 = flow.tanh %0 : {y}\n"
        f"  %2 = flow.add %1, %0 : {y}\n"
        f"  %3 = flow.reduce sum %2, dims = [0] : {y} -> {s}\n"
        f"  func.return %2, %3 : {y}, {s}\n}}"
    )


def test_movement_and_elementwise_chain():
    pl = "[0, 1, 2]"
    x, w = T((7, 4), pl, "S(0)"), T((4, 7), pl, "P")
    t = w  # declared like %w; inference makes the transpose S(1)
    r = T((28,), pl, "B")
    b3 = T((2, 4, 7), pl, "B")
    check(
        f"func.func @f(%x: {x}, %w: {w}) -> ({r}, {b3}) {{\n"
        f"  %0 = flow.transpose %x, permutation = [1, 0] : {x} -> {t}\n"
        f"  %1 = flow.add %0, %w : {t}\n"
        f"  %2 = flow.mul %1, %w : {t}\n"
        f"  %3 = flow.reshape %2 : {t} -> {r}\n"
        f"  %4 = flow.broadcast_in_dim %1, dims = [1, 2] : {t} -> {b3}\n"
        f"  func.return %3, %4 : {r}, {b3}\n}}"
    )


def test_replicated_local_values_are_promoted_to_broadcast():
    pl = "[0, 1]"
    x = T((5, 3), pl, "S(0)")
    check(
        f"func.func @f(%x: {x}, %y: {x}) -> {x} {{\n"
        "  %c = flow.full 2.0 : f32 -> tensor<5x3xf32>\n"
        "  %d = flow.full 1.0 : f32 -> tensor<5x3xf32>\n"
        "  %p = flow.compare lt, %d, %c : tensor<5x3xf32> -> tensor<5x3xi1>\n"
        f'  %0 = "flow.select"(%p, %x, %y) : (tensor<5x3xi1>, {x}, {x}) -> {x}\n'
        f"  func.return %0 : {x}\n}}"
    )


@pytest.mark.parametrize("src_pl, dst_pl, src, dst", [
    ("[0, 1]", "[2, 3]", "S(0)", "S(0)"),
    ("[0, 1]", "[1, 0]", "S(0)", "S(0)"),
    ("[0, 1]", "[2, 3, 4]", "S(0)", "S(1)"),
    ("[0, 1, 2]", "[[2, 3], [4, 5]]", "P", "S(0), B"),
    ("[0]", "[0, 1]", "B", "P"),
])  # fmt: skip
def test_placement_change(src_pl, dst_pl, src, dst):
    a, b = T((5, 4), src_pl, src), T((5, 4), dst_pl, dst)
    check(
        f"func.func @f(%x: {a}) -> {b} {{\n"
        f"  %0 = flow.exp %x : {a}\n"
        f"  %1 = flow.boxing %0 : {a} -> {b}\n"
        f"  %2 = flow.exp %1 : {b}\n"
        f"  func.return %2 : {b}\n}}"
    )


def test_movement_ops_keep_splits_where_they_can():
    pl = "[0, 1, 2]"
    x, y = T((7, 5), pl, "S(0)"), T((7, 3), pl, "S(1)")
    c, sl = T((7, 8), pl, "B"), T((7, 4), pl, "B")
    pd = T((7, 6), pl, "B")
    check(
        f"func.func @f(%x: {x}, %y: {y}) -> ({sl}, {pd}) {{\n"
        f"  %0 = flow.concat dim = 1, %x, %y : {x}, {y} -> {c}\n"
        f"  %1 = flow.slice %0, start = [0, 1], strides = [1, 2] : {c} -> {sl}\n"
        f"  %2 = flow.pad %1, low = [0, 1], high = [0, 1], value = (0.0 : f32) : {sl} -> {pd}\n"
        f"  func.return %1, %2 : {sl}, {pd}\n}}"
    )


@pytest.mark.parametrize("x_sbp, i_sbp", [("S(0)", "S(0)"), ("B", "S(1)"), ("P", "B"),
                                          ("S(1)", "S(0)")])  # fmt: skip
def test_gather(x_sbp, i_sbp):
    pl = "[0, 1]"
    x, out = T((5, 4), pl, x_sbp), T((5, 3), pl, "B")
    i = T((5, 3), pl, i_sbp, "i64")
    text = (
        f"func.func @f(%x: {x}, %i: {i}) -> {out} {{\n"
        f"  %0 = flow.gather %x, %i, dim = 1 : {x}, {i} -> {out}\n"
        f"  func.return %0 : {out}\n}}"
    )
    check(text, int_inputs={1: 4})


def test_plan_orders_axes_so_each_step_is_exact():
    from flow.lowering.boxing_to_collectives import plan

    s0, s1, b, p = Sbp("S", 0), Sbp("S", 1), Sbp("B"), Sbp("P")
    # Inner axis splits dim 1: the outer P -> S(1) must wait until it is gathered.
    assert plan((p, s1), (s1, b)) == [(1, s1, b), (0, p, s1)]
    assert plan((s0, b), (b, s0)) == [(0, s0, b), (1, b, s0)]
    # No exact order: through broadcast.
    assert plan((b, s0), (s0, s0)) == [(1, s0, b), (0, b, s0), (1, b, s0)]
    assert plan((s0,), (p,)) == [(0, s0, b), (0, b, p)]


@pytest.mark.parametrize("sbp", ["S(0)", "S(1)", "P"])
def test_even_program_is_the_same_for_every_rank(sbp):
    pl = "[[0, 1], [2, 3]]"
    x, w, y = T((8, 4), pl, f"{sbp}, B"), T((4, 6), pl, "B, S(1)"), T((8, 6), pl, "B, B")
    text = (
        f"func.func @f(%x: {x}, %w: {w}) -> {y} {{\n"
        f"  %0 = flow.matmul %x, %w : {x}, {w} -> {y}\n"
        f"  func.return %0 : {y}\n}}"
    )
    outs = set()
    for spec in ("flow-partition", *(f"flow-partition{{rank={r}}}" for r in range(4))):
        m = parse(text)
        run_pipeline(m, f"flow-infer-sbp,{spec}")
        outs.add(str(m))
    assert len(outs) == 1


def test_a_failing_pass_leaves_its_input_intact():
    from flow.lowering import PipelineError

    pl = "[0, 1]"
    x, y = T((5, 4), pl, "S(0)"), T((5, 4), pl, "B")
    m = parse(
        f"func.func @f(%x: {x}) -> {y} {{\n  %0 = flow.exp %x : {x}\n"
        f"  %1 = flow.boxing %0 : {x} -> {y}\n  func.return %1 : {y}\n}}"
    )
    run_pipeline(m, "flow-infer-sbp")
    before = str(m)
    with pytest.raises(PipelineError, match="uneven split needs a per-rank program"):
        run_pipeline(m, "flow-partition")
    assert str(m) == before


def test_partitioned_program_without_collectives_lowers_for_iree():
    from flow.lowering import to_iree_text

    pl = "[0, 1]"
    x, w = T((8, 4), pl, "S(0)"), T((4, 6), pl, "B")
    y = T((8, 6), pl, "S(0)")
    m = parse(
        f"func.func @f(%x: {x}, %w: {w}) -> {y} {{\n"
        f"  %0 = flow.matmul %x, %w : {x}, {w} -> {y}\n  %1 = flow.tanh %0 : {y}\n"
        f"  func.return %1 : {y}\n}}"
    )
    run_pipeline(m, "flow-infer-sbp,flow-partition{rank=1},flow-to-iree-input")
    text = to_iree_text(m)
    assert "tensor<4x4xf32>" in text and "flow." not in text
