"""One line to spread a model over every rank of a device, through SBP and pipeline stages:

    model = model.to_global(flow.device("cuda"), parallel=True)           # data parallel
    model = model.to_global(flow.device("cuda"), model_parallel=True)     # tensor parallel
    model = model.to_global(flow.device("cuda"), pipeline_parallel=True)  # pipeline stages

The device names the placement: every rank of the world, for that device type (checked to
be usable here, as `x.to(device)` does); a 1-D `flow.placement` may be given instead.

* `parallel`: parameters and buffers broadcast (B); the model's tensor arguments are split
  along the batch (S(0)). A global argument is boxed to S(0); a local one (eager) is this
  rank's part of the batch, as `x.to_global(placement, flow.sbp.split(0))` takes it.
* `model_parallel`: Megatron-style pairs of Linears, found in the module order: a column-
  parallel Linear (weight and bias S(0), the output dim) and then a row-parallel one (weight
  S(1), bias B), so the activation between them is split and the pair's result is a partial
  sum that becomes B. Attention blocks are known by the names of their projections: `q`, `k`,
  `v`, `query`, `key`, `value`, `qkv`, `q_proj`, ... are column-parallel (the heads split),
  `out`, `o`, `out_proj`, `o_proj`, `proj`, `c_proj` row-parallel. Embeddings split their
  hidden dim (S(1)); other parameters and buffers are B. Tensor arguments are replicated
  (B): a local one is the same on every rank.
* `pipeline_parallel`: the model's top-level children, in order, cut into contiguous stages
  balanced by parameter count (one stage per rank, or per group of ranks when there are
  fewer children than ranks: such a stage is data parallel, a batch moved to it is split
  S(0)); each stage's parameters are B on its ranks and it is set as a pipeline stage
  (`set_stage`), so nn.Graph runs the micro-batches of
  `config.set_gradient_accumulation_steps` with the 1F1B schedule.

Whatever the split, results equal single-device ones: SBP only says where the pieces are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from flow.core.autograd import no_grad
from flow.core.tensor import Tensor

from ._module import _HOOKS

__all__ = ["InputPlan", "balance", "parallelize", "tensor_parallel_sbp"]

_FLAGS = ("parallel", "model_parallel", "pipeline_parallel")


@dataclass(frozen=True)
class InputPlan:
    """How a parallelized module's tensor arguments are distributed when it is called."""

    placement: Any
    split: bool  # S(0) along the batch (data parallel), else B

    def inputs(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        def conv(v: Any) -> Any:
            return self._convert(module, v) if isinstance(v, Tensor) else v

        return tuple(conv(a) for a in args), {k: conv(v) for k, v in kwargs.items()}

    def _convert(self, module: Any, t: Tensor) -> Tensor:
        from flow.distributed.placement import global_info, is_global, sbp

        split = self.split and t.ndim > 0
        nd = [sbp.split(0) if split else sbp.broadcast]
        trace = t._trace
        glob = is_global(t) or (trace is not None and trace.derives_from_global(t._value))
        if glob:
            if is_global(t):
                info = global_info(t)
                if info.placement == self.placement and (not split or info.sbp == tuple(nd)):
                    return t
            return t.to_global(self.placement, nd)
        if trace is not None and split:
            raise ValueError(
                f"{type(module).__name__} is data parallel (to_global(..., parallel=True)): "
                f"inside nn.Graph / flow.jit its tensor arguments must be global; got a local "
                f"tensor of shape {list(t.shape)}. Convert the batch before the call, e.g. "
                "x.to_global(placement, flow.sbp.broadcast) (the whole batch on every rank) or "
                "x.to_global(placement, flow.sbp.split(0)) (each rank's part)"
            )
        return t.to_global(self.placement, nd)


def _flag_name(parallel: bool, model_parallel: bool, pipeline_parallel: bool) -> str | None:
    chosen = [n for n, v in zip(_FLAGS, (parallel, model_parallel, pipeline_parallel)) if v]
    if len(chosen) > 1:
        raise ValueError(f"to_global: choose one of {', '.join(f'{n}=True' for n in _FLAGS)}; "
                         f"got {' and '.join(chosen)}")  # fmt: skip
    return chosen[0] if chosen else None


def _resolve(where: Any, flag: str) -> Any:
    """The 1-D placement that `where` (a device, a device string or a placement) names."""
    from flow.core.device import as_device, device, require
    from flow.distributed.placement import placement
    from flow.targets import RuntimeUnavailableError

    if isinstance(where, placement):
        if len(where.hierarchy) != 1:
            raise ValueError(f"to_global(..., {flag}=True): expected a device or a 1-D "
                             f"placement, got a {len(where.hierarchy)}-D one: {where!r}")
        return where
    if where is None:
        raise ValueError(f"to_global(..., {flag}=True): name the device, e.g. "
                         f"model.to_global(flow.device('cuda'), {flag}=True), or a placement")
    if not isinstance(where, (str, device)):
        raise TypeError(f"to_global(..., {flag}=True): expected a flow.device or a "
                        f"flow.placement, got {where!r}")  # fmt: skip
    dev = as_device(where)
    try:
        require(dev)
    except RuntimeUnavailableError as err:
        raise RuntimeUnavailableError(
            f"to_global({str(dev)!r}, {flag}=True): no {dev.type} device can run programs "
            f"here: {err}"
        ) from None
    return placement.all(dev.type)


def parallelize(module: Any, where: Any, sbp: Any, *, parallel: bool = False,
                model_parallel: bool = False, pipeline_parallel: bool = False) -> Any:  # fmt: skip
    """`module.to_global(where, parallel=... | model_parallel=... | pipeline_parallel=...)`."""
    flag = _flag_name(parallel, model_parallel, pipeline_parallel)
    if flag is None:
        raise ValueError(
            f"to_global({where!r}): a device says where, not how; pass parallel=True (data "
            "parallel), model_parallel=True (tensor parallel) or pipeline_parallel=True "
            "(pipeline stages), or a flow.placement and an sbp, e.g. "
            "to_global(flow.placement('cpu', [0, 1]), flow.sbp.broadcast)"
        )
    if sbp is not None:
        raise ValueError(f"to_global(..., {flag}=True) chooses the sbp of every tensor; got "
                         f"sbp={sbp!r} as well (pass one or the other)")  # fmt: skip
    pl = _resolve(where, flag)
    if flag == "pipeline_parallel":
        return _pipeline(module, pl)
    from flow.distributed.global_tensor import to_global_
    from flow.distributed.placement import sbp as sbp_mod

    plan = tensor_parallel_sbp(module) if flag == "model_parallel" else {}
    with no_grad():
        for name, t in [*module.named_parameters(), *module.named_buffers()]:
            to_global_(t, pl, [plan.get(name, sbp_mod.broadcast)])
    object.__setattr__(module, "_parallel", InputPlan(pl, split=flag == "parallel"))
    return module


# --------------------------------------------------------------------------- tensor parallel


# Attribute names of an attention block's projections: the query/key/value ones are
# column-parallel (their heads split), the output projection is row-parallel.
_COLUMN_NAMES = {"q", "k", "v", "query", "key", "value", "qkv", "q_proj", "k_proj", "v_proj",
                 "in_proj", "qkv_proj", "wq", "wk", "wv", "c_attn"}  # fmt: skip
_ROW_NAMES = {"o", "out", "out_proj", "o_proj", "proj", "c_proj", "wo"}


def tensor_parallel_sbp(module: Any) -> dict[str, Any]:
    """The SBP entry of each Linear and Embedding parameter (dotted name -> entry) under
    `model_parallel=True` (see the module's doc); parameters not named are B."""
    from flow.distributed.placement import sbp

    from ._layers import Embedding, Linear

    out: dict[str, Any] = {}
    column = True  # whether the next Linear starts a pair
    for path, m in module.named_modules():
        if isinstance(m, Embedding):
            out[_join(path, "weight")] = sbp.split(1)
            continue
        if not isinstance(m, Linear):
            continue
        attr = path.rpartition(".")[2].lower()
        if attr in _COLUMN_NAMES:
            column = True
        elif attr in _ROW_NAMES:
            column = False
        if column:
            out[_join(path, "weight")] = sbp.split(0)
            if m.bias is not None:
                out[_join(path, "bias")] = sbp.split(0)
        else:
            out[_join(path, "weight")] = sbp.split(1)
        column = not column
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# --------------------------------------------------------------------------- pipeline


def balance(sizes: list[int], stages: int) -> list[int]:
    """How many of the consecutive items of `sizes` each of `stages` stages takes, minimizing
    the largest stage (then the spread: the sum of squares); every stage takes one or more."""
    n = len(sizes)
    prefix = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    inf = (float("inf"), float("inf"))
    # best[k][i]: (max, sum of squares) of the first i items in k stages; cut[k][i]: last start
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = (0, 0)
    for k in range(1, stages + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                prev = best[k - 1][j]
                if prev == inf:
                    continue
                s = prefix[i] - prefix[j]
                cand = (max(prev[0], s), prev[1] + s * s)
                if cand < best[k][i]:
                    best[k][i], cut[k][i] = cand, j
    counts, i = [], n
    for k in range(stages, 0, -1):
        j = cut[k][i]
        counts.append(i - j)
        i = j
    return counts[::-1]


def _pipeline(module: Any, pl: Any) -> Any:
    from flow.distributed.placement import placement, sbp

    from ._pipeline import GraphModule

    name = type(module).__name__
    children = list(module.named_children())
    if not children:
        raise ValueError(f"to_global(..., pipeline_parallel=True): {name} has no child modules "
                         "to cut into stages (the stages are its top-level children, in order)")
    own = [n for n, p in module._parameters.items() if p is not None]
    if own:
        raise ValueError(
            f"to_global(..., pipeline_parallel=True): {name} holds parameters of its own "
            f"({', '.join(own)}); the stages are its top-level children, so move them into one"
        )
    ranks = list(pl.attr.rank_list)
    stages = min(len(ranks), len(children))
    sizes = [sum(p.numel() for p in c.parameters()) for _, c in children]
    counts = balance(sizes, stages)
    groups = np.array_split(np.asarray(ranks), stages)
    start = 0
    for stage_id, (count, group) in enumerate(zip(counts, groups)):
        where = placement(pl.type, [int(r) for r in group])
        for _, child in children[start : start + count]:
            child.to_global(where, sbp.broadcast)
            # a stage of several ranks is data parallel: the batch it receives is split
            moved = [sbp.split(0)] if len(group) > 1 else None
            child.to(GraphModule).set_stage(stage_id, where, sbp=moved)
        start += count
    with no_grad():
        for _, b in module.named_buffers(recurse=False):
            if b is not None:
                from flow.distributed.global_tensor import to_global_

                to_global_(b, placement(pl.type, [int(r) for r in groups[0]]), sbp.broadcast)
    return module


_HOOKS["parallelize"] = parallelize
