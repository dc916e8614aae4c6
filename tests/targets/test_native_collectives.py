"""flow-lower-collectives-native: per-rank programs with IREE's native collectives (cuda, rocm).

Running them needs GPUs (NCCL / RCCL). Here they are checked two ways:
* exact: every rank's program, as the native lowering leaves it (before flow-to-iree-input),
  runs in the numpy interpreter of tests/lowering/test_partition.py, extended with IREE's
  collective semantics (dim 0, equal pieces, channels split by color and key from each
  rank's initializer), all ranks together; the outputs must equal the global program's;
* compiled: the programs (a data-parallel MLP step among them) compile for cuda and rocm.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp

from flow.dialect.attrs import dist_of
from flow.lowering import _iree_ops as iree
from flow.lowering import run_pipeline
from flow.lowering.lower_collectives_native import (
    channel_table,
    lower_collectives_native,
    set_channel_table,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lowering"))
import test_partition as tp  # noqa: E402 - the interpreter and the sharding helpers

T = tp.T
FORMATS = {"cuda": b"cuda-nvptx-fb", "rocm": b"rocm-hsaco-fb"}  # IREE executable formats
REDUCE = {1: np.sum, 2: np.prod, 3: np.min, 4: np.max}


def native_program(text: str, rank: int) -> ModuleOp:
    """Rank `rank`'s program with native collectives, still in flow ops (for the interpreter)."""
    module = tp.parse(text)
    run_pipeline(module, f"flow-infer-sbp,flow-partition{{rank={rank}}}")
    set_channel_table(module, channel_table(tp.parse(text)))
    lower_collectives_native(module, rank)
    module.verify()
    return module


def _splits(module: ModuleOp) -> list[tuple[int, int]]:
    """(color, key) of each channel split of the program's initializer, in order."""
    (init,) = [op for op in module.ops if isinstance(op, iree.InitializerOp)]
    const = {op.results[0]: op.value.value.data for op in init.body.block.ops
             if op.name == "arith.constant"}  # fmt: skip
    return [(const[op.color], const[op.key]) for op in init.body.block.ops
            if isinstance(op, iree.ChannelSplitOp)]  # fmt: skip


def channel_groups(programs: dict[int, ModuleOp]) -> dict[int, dict[int, tuple[int, ...]]]:
    """Per rank: channel id -> the ranks of its channel, in channel rank order (as NCCL splits)."""
    splits = {r: _splits(m) for r, m in programs.items() if any(m.ops)}
    counts = {len(s) for s in splits.values()}
    assert len(counts) <= 1, f"ranks split different numbers of channels: {splits}"
    world = tuple(sorted(splits))
    out: dict[int, dict[int, tuple[int, ...]]] = {r: {0: world} for r in splits}
    for i in range(next(iter(counts), 0)):
        for r in splits:
            color, _ = splits[r][i]
            if color >= 0:
                members = [q for q in splits if splits[q][i][0] == color]
                out[r][i + 1] = tuple(sorted(members, key=lambda q: splits[q][i][1]))
    return out


def _eval_native(op, args, world, rank, groups) -> list:
    name = op.name
    if name == "util.global.load":
        return [int(op.global_.root_reference.data.rsplit("_", 1)[1])]
    if name == "tensor.empty":
        return [np.zeros(op.results[0].type.get_shape())]
    if name == "arith.constant":
        return [op.value.value.data if isinstance(op.value, IntegerAttr) else None]
    if name == "util.optimization_barrier":
        return list(args)
    if name == "flow.collective.send_recv":
        _, source, _, send, recv = args
        if send >= 0:
            world.send(rank, send, source)
        return [world.recv(recv, rank) if recv >= 0 else np.zeros_like(source)]
    if name.startswith("flow.collective."):
        _, source, channel = args
        group = groups[channel]
        got = world.exchange(group, rank, source)
        k, i = len(group), group.index(rank)
        if name == "flow.collective.all_reduce":
            return [REDUCE[op.reduction_op.value.data](np.stack(got), axis=0)]
        if name == "flow.collective.all_gather":
            return [np.concatenate(got)]
        if name == "flow.collective.reduce_scatter":
            total = REDUCE[op.reduction_op.value.data](np.stack(got), axis=0)
            return [np.split(total, k)[i]]
        if name == "flow.collective.all_to_all":
            return [np.concatenate([np.split(g, k)[i] for g in got])]
    return [tp._eval(op, args, world, rank)]


def interpret(module: ModuleOp, inputs, world, rank, groups) -> list[np.ndarray]:
    (f,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    env = dict(zip(f.body.block.args, inputs))
    for op in f.body.block.ops:
        if isinstance(op, func.ReturnOp):
            return [env[v] for v in op.operands]
        values = _eval_native(op, [env[o] for o in op.operands], world, rank, groups)
        for result, value in zip(op.results, values, strict=True):
            want = tuple(result.type.get_shape()) if hasattr(result.type, "get_shape") else None
            if want is not None and value is not None:
                assert value.shape == want, f"{op.name}: got shape {value.shape}, type says {want}"
            env[result] = value
    raise AssertionError("no return")


def check(text: str, seed: int = 0) -> dict[int, ModuleOp]:
    """Lower `text` natively for every rank, run the ranks together, compare with the global run."""
    module = tp.parse(text)
    (f,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    arg_types, out_types = list(f.function_type.inputs.data), list(f.function_type.outputs.data)
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(t.get_shape()) for t in arg_types]
    expected = tp.interpret(f, inputs)
    ranks = sorted({r for t in arg_types + out_types for r in dist_of(t).placement.rank_list})
    programs = {r: native_program(text, r) for r in ranks}
    for m in programs.values():
        text_out = str(m)
        assert "flow.all_" not in text_out and "flow.send " not in text_out, text_out
    groups = channel_groups(programs)
    world, results, errors = tp.World(), {}, []

    def run(rank: int) -> None:
        try:
            local = [tp.shard(x, t, rank) for x, t in zip(inputs, arg_types)
                     if rank in dist_of(t).placement.rank_list]  # fmt: skip
            results[rank] = interpret(programs[rank], local, world, rank, groups[rank])
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [tp.threading.Thread(target=run, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    for j, (want, ty) in enumerate(zip(expected, out_types)):
        shards = {}
        for r in ranks:
            kept = [i for i, t in enumerate(out_types) if r in dist_of(t).placement.rank_list]
            if j in kept:
                shards[r] = results[r][kept.index(j)]
        np.testing.assert_allclose(tp.unshard(shards, ty), want, rtol=1e-5, atol=1e-5)
    return programs


# --------------------------------------------------------------------------- exact


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("shape", [(6, 4), (5, 7)], ids=["even", "uneven"])
@pytest.mark.parametrize("src", tp.SBPS_1D)
@pytest.mark.parametrize("dst", tp.SBPS_1D)
def test_every_1d_boxing(src, dst, shape, k):
    pl = str(list(range(k)))
    check(tp._boxing(T(shape, pl, src), T(shape, pl, dst)))


@pytest.mark.parametrize("src", ["S(0), S(1)", "P, S(0)", "P, P", "S(1), B"])
@pytest.mark.parametrize("dst", ["B, B", "S(1), S(0)", "S(0), P", "B, S(1)"])
def test_2d_boxing(src, dst):
    pl = "[[0, 1], [2, 3]]"
    check(tp._boxing(T((5, 6), pl, src), T((5, 6), pl, dst)))


@pytest.mark.parametrize("x_sbp, w_sbp", tp.MLP_2D)
def test_2d_mlp(x_sbp, w_sbp):
    pl = "[[0, 1], [2, 3]]"
    x, w = T((6, 5), pl, x_sbp), T((5, 3), pl, w_sbp)
    y, s = T((6, 3), pl, "B, B"), T((3,), pl, "B, B")
    check(
        f"func.func @f(%x: {x}, %w: {w}) -> ({y}, {s}) {{\n"
        f"  %0 = flow.matmul %x, %w : {x}, {w} -> {y}\n"
        f"  %1 = flow.tanh %0 : {y}\n"
        f"  %2 = flow.reduce sum %1, dims = [0] : {y} -> {s}\n"
        f"  func.return %1, %2 : {y}, {s}\n}}"
    )


@pytest.mark.parametrize("src_pl, dst_pl, src, dst", [
    ("[0, 1]", "[2, 3]", "S(0)", "S(0)"),
    ("[0, 1]", "[1, 0]", "S(0)", "S(0)"),
    ("[0, 1, 2]", "[[2, 3], [4, 5]]", "P", "S(0), B"),
    ("[0]", "[0, 1]", "B", "P"),
])  # fmt: skip
def test_placement_change(src_pl, dst_pl, src, dst):
    """Sends and receives on the world channel; ranks of either placement split every
    channel of the global program (color -1 outside it), so their splits pair up."""
    a, b = T((5, 4), src_pl, src), T((5, 4), dst_pl, dst)
    check(
        f"func.func @f(%x: {a}) -> {b} {{\n"
        f"  %0 = flow.exp %x : {a}\n"
        f"  %1 = flow.boxing %0 : {a} -> {b}\n"
        f"  %2 = flow.exp %1 : {b}\n"
        f"  func.return %2 : {b}\n}}"
    )


def _mlp_grads(pl: str = "[0, 1]", n: int = 7) -> str:
    """A data-parallel MLP step's gradients: batch split (over every mesh axis), weights
    broadcast, the weight gradients partial sums (all-reduced to B)."""
    axes = pl.count("[") - 1 or 1

    def t(shape, sbp):
        return T(shape, pl, ", ".join([sbp] * axes))

    x, tg = t((n, 4), "S(0)"), t((n, 3), "S(0)")
    w1, w2 = t((4, 6), "B"), t((6, 3), "B")
    h, y = t((n, 6), "S(0)"), t((n, 3), "S(0)")
    ht, xt, w2t = t((6, n), "S(1)"), t((4, n), "S(1)"), t((3, 6), "B")
    g2, g1 = t((6, 3), "B"), t((4, 6), "B")
    return f"""
func.func @f(%x: {x}, %t: {tg}, %w1: {w1}, %w2: {w2}) -> ({g1}, {g2}) {{
  %0 = flow.matmul %x, %w1 : {x}, {w1} -> {h}
  %1 = flow.tanh %0 : {h}
  %2 = flow.matmul %1, %w2 : {h}, {w2} -> {y}
  %3 = flow.sub %2, %t : {y}
  %4 = flow.transpose %1, permutation = [1, 0] : {h} -> {ht}
  %5 = flow.matmul %4, %3 : {ht}, {y} -> {g2}
  %6 = flow.transpose %w2, permutation = [1, 0] : {w2} -> {w2t}
  %7 = flow.matmul %3, %6 : {y}, {w2t} -> {h}
  %8 = flow.mul %1, %1 : {h}
  %9 = flow.sub %7, %8 : {h}
  %10 = flow.transpose %x, permutation = [1, 0] : {x} -> {xt}
  %11 = flow.matmul %10, %9 : {xt}, {h} -> {g1}
  func.return %11, %5 : {g1}, {g2}
}}
"""


@pytest.mark.parametrize("pl", ["[0, 1]", "[0, 1, 2]", "[[0, 1], [2, 3]]"])
def test_data_parallel_mlp_grads(pl):
    programs = check(_mlp_grads(pl))
    text = str(programs[1])
    assert text.count('"flow.collective.all_reduce"') == 2 * (pl.count("[") - 1 or 1), text


# --------------------------------------------------------------------------- compiled


@pytest.mark.parametrize("target", ["cuda", "rocm"])
@pytest.mark.parametrize("pl, rank", [("[0, 1]", 1), ("[[0, 1], [2, 3]]", 2)], ids=["1d", "2d"])
def test_mlp_grads_compile_per_rank(target, pl, rank):
    """compile_for_rank picks the native lowering for GPU targets; IREE compiles the result."""
    from flow.compile.per_rank import compile_for_rank, lower_for_rank
    from flow.targets import compile_mlir

    text = _mlp_grads(pl, 9)
    ir, groups = lower_for_rank(tp.parse(text), rank, target)
    assert "comm." not in ir and '"flow.collective.all_reduce"' in ir, ir
    assert '"flow.channel.split"' in ir
    vmfb, _ = compile_for_rank(tp.parse(text), rank, target)
    assert FORMATS[target] in vmfb and vmfb == compile_mlir(ir, target)
    assert all(rank in g for g in groups)


def test_cpu_keeps_the_comm_calls():
    from flow.compile.per_rank import lower_for_rank

    ir, groups = lower_for_rank(tp.parse(_mlp_grads()), 0, "cpu")
    assert "comm.all_reduce" in ir and "flow.collective" not in ir
    assert groups == [(0, 1)]


def test_traced_data_parallel_step_compiles_per_rank():
    """flow.jit traces a data-parallel MLP step (forward, cross-entropy, backward, SGD) on 2
    ranks; each rank's program compiles for cuda and rocm with native all-reduces."""
    from flow.distributed.launch import LauncherNotFoundError, find_mpiexec

    try:
        find_mpiexec()
    except LauncherNotFoundError:
        pytest.skip("no mpiexec (pip install mpi4py mpich)")
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("no mpi4py (pip install mpi4py mpich)")
    script = Path(__file__).resolve().parent / "rank_native_step.py"
    cmd = [sys.executable, "-m", "flow.distributed.launch", "--nproc-per-node", "2", str(script),
           "cuda", "rocm"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the ranks did not finish in 300 s\n{out}\n{err}")
    assert proc.returncode == 0, f"{out}\n{err}"
    lines = re.findall(r"rank (\d): (\w+) all_reduce=(\d+) channels=(\d+) vmfb=(\d+)", out)
    assert sorted((r, t) for r, t, *_ in lines) == [
        ("0", "cuda"), ("0", "rocm"), ("1", "cuda"), ("1", "rocm")
    ], out  # fmt: skip
    for _, _, reduces, channels, size in lines:
        # the 4 parameter gradients and the loss; one channel (the placement's one axis)
        assert int(reduces) == 5 and int(channels) == 1 and int(size) > 0, out
