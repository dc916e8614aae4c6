"""ZeRO in `nn.Graph` (`graph.config.enable_zero(True, stage=1|2|3)`), as SBP in the step.

Over a data-parallel placement (every parameter broadcast, B, on a 1-D placement of several
ranks) each shardable parameter (dim 0 at least the number of ranks, at least
`shard_min_size` elements) gets its optimizer state split along dim 0, S(0), so each rank
keeps 1/N of it. In the traced step the update then runs on S(0) views:
stage 1 boxes the gradient to B (an all-reduce) and takes this rank's slice, updates
`p.to_global(sbp=S(0))` and boxes the new parameter back to B (an all-gather); stage 2
reduce-scatters the gradient (P -> S(0)) instead; stage 3 also keeps the parameter itself
S(0) between steps and gathers it to B where `build` uses it, so no boxing back is needed.
Everything is `to_global` in the trace: flow-infer-sbp and FLOW_COMM_PLAN=1 show it.
`state_dict()` of such a graph gives every tensor boxed back to B, so a plain data-parallel
graph loads it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from flow.core.autograd import no_grad
from flow.core.tensor import Tensor
from flow.distributed.global_tensor import to_global_
from flow.distributed.placement import is_global, sbp

__all__ = ["ZeroPlan", "boxed_back", "check_zero_args"]

STAGES = (1, 2, 3)


def check_zero_args(mode, stage, shard_min_size, shard_restore_level) -> None:
    """Raise for a bad `enable_zero` argument, naming it and what is expected."""
    if not isinstance(mode, bool):
        raise TypeError(f"enable_zero: mode must be True or False, got {mode!r}")
    if isinstance(stage, bool) or stage not in STAGES:
        raise ValueError(f"enable_zero: stage must be 1, 2 or 3, got {stage!r}")
    if isinstance(shard_min_size, bool) or not isinstance(shard_min_size, int) \
            or shard_min_size < 1:  # fmt: skip
        raise ValueError(f"enable_zero: shard_min_size must be an int >= 1, "
                         f"got {shard_min_size!r}")  # fmt: skip
    if shard_restore_level not in (0, 1, 2):
        raise ValueError(f"enable_zero: shard_restore_level must be 0, 1 or 2, "
                         f"got {shard_restore_level!r}")  # fmt: skip


def _broadcast(t: Tensor) -> bool:
    return all(s == sbp.broadcast for s in t.sbp)


class ZeroPlan:
    """Which parameters of a graph ZeRO shards, made once before the first trace."""

    def __init__(self, graph_name: str, stage: int, shard_min_size: int, modules, optimizers):
        self.stage = stage
        named = {id(p): f"{m}.{n}" for m, mod in modules for n, p in mod.named_parameters()}
        params = [p for opt in optimizers for g in opt.param_groups for p in g["params"]]
        if not params:
            raise RuntimeError(f"{graph_name}: enable_zero needs an optimizer "
                               "(add_optimizer) whose parameters it shards")  # fmt: skip
        self.sharded: dict[int, Tensor] = {}
        for p in params:
            name = named.get(id(p), "a parameter")
            if not is_global(p):
                raise RuntimeError(
                    f"{graph_name}: enable_zero needs a data-parallel placement, but {name} is "
                    "a local tensor; make the model global first, e.g. "
                    "model.to_global(placement=flow.placement('cpu', ranks=[0, 1]), "
                    "sbp=flow.sbp.broadcast)")  # fmt: skip
            pl = p.placement
            if len(pl.hierarchy) != 1 or pl.hierarchy[0] < 2:
                raise RuntimeError(
                    f"{graph_name}: enable_zero needs a data-parallel axis (a 1-D placement "
                    f"of 2 or more ranks), but {name} is placed on {pl}")  # fmt: skip
            if not _broadcast(p):
                raise RuntimeError(
                    f"{graph_name}: enable_zero shards data-parallel parameters (sbp B), but "
                    f"{name} has sbp {p.sbp}: a split parameter has no data-parallel axis")  # fmt: skip
            if p.ndim and p.shape[0] >= pl.hierarchy[0] and p.numel() >= shard_min_size:
                self.sharded[id(p)] = p
        self.optimizers = list(optimizers)
        self._shard_storage()

    def _shard_storage(self) -> None:
        """Make the state the optimizers can make before a step, and split it (stage 3: the
        parameters too) along dim 0, in place, so the compiled step reads S(0) tensors."""
        s0 = sbp.split(0)
        with no_grad():
            for opt in self.optimizers:
                opt.init_state()
                for p, state in opt.state.items():
                    if id(p) not in self.sharded:
                        continue
                    for key, v in state.items():
                        if isinstance(v, Tensor) and tuple(v.shape) == tuple(p.shape):
                            state[key] = v.to_global(sbp=s0)
            if self.stage == 3:
                for p in self.sharded.values():
                    to_global_(p, sbp_=s0)

    @contextlib.contextmanager
    def gathered_parameters(self, modules) -> Iterator[None]:
        """Stage 3, within `build`: each module sees its sharded parameters all-gathered to B
        (differentiable: the gradient flows back to the S(0) leaf the optimizer holds)."""
        if self.stage != 3:
            yield
            return
        swapped = []
        for _, top in modules:
            for mod in top.modules():
                for name, p in mod._parameters.items():
                    if p is not None and id(p) in self.sharded:
                        swapped.append((mod, name, p))
        full: dict[int, Tensor] = {}
        for mod, name, p in swapped:
            if id(p) not in full:
                full[id(p)] = p.to_global(sbp=sbp.broadcast)
            mod._parameters[name] = full[id(p)]
        try:
            yield
        finally:
            for mod, name, p in swapped:
                mod._parameters[name] = p

    def shards_grad(self, p) -> bool:
        """Whether `p`'s gradient is kept S(0) (reduce-scattered): stage 2's sharded
        parameters (stage 3's gradients are S(0) as their parameters are)."""
        return self.stage == 2 and id(p) in self.sharded

    def optimizer_step(self, opt) -> None:
        """`opt.step()` in the traced step, on S(0) parameters and gradients."""
        s0, b = sbp.split(0), sbp.broadcast
        swaps = []  # (params list, index, parameter, its S(0) stand-in)
        with no_grad():
            for group in opt.param_groups:
                params = group["params"]
                for i, p in enumerate(params):
                    if id(p) not in self.sharded or p.grad is None:
                        continue
                    g = p.grad if self.stage >= 2 else p.grad.to_global(sbp=b)
                    g = g.to_global(sbp=s0)
                    if self.stage == 3:  # already S(0)
                        p.grad = g
                        continue
                    ps = p.to_global(sbp=s0)
                    ps.grad = g
                    if p in opt.state:
                        opt.state[ps] = opt.state.pop(p)
                    params[i] = ps
                    swaps.append((params, i, p, ps))
        try:
            opt.step()
        finally:
            for params, i, p, ps in swaps:
                params[i] = p
                if ps in opt.state:
                    opt.state[p] = opt.state.pop(ps)
        with no_grad():
            for _, _, p, ps in swaps:
                p.copy_(ps.to_global(sbp=b))


def boxed_back(value):
    """`value` (a state dict entry, nested) with every global tensor boxed to B."""
    if isinstance(value, Tensor):
        if is_global(value) and not _broadcast(value):
            return value.to_global(sbp=[sbp.broadcast] * len(value.placement.hierarchy))
        return value
    if isinstance(value, dict):
        return type(value)((k, boxed_back(v)) for k, v in value.items())
    if isinstance(value, list):
        return [boxed_back(v) for v in value]
    return value
