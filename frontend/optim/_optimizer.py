"""`flow.optim.Optimizer`: parameter groups, per-parameter state, PyTorch's state_dict format.

Subclasses write their update with flow tensor ops and store results with in-place
tensor methods (`p.sub_`, `buf.mul_`), and keep every piece of state (momentum
buffers, moments, the step count) in flow tensors. `step()` is therefore the same
Python whether it runs eagerly or is traced with the forward and backward pass
into one compiled training step.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from flow.core import profiling
from flow.core.autograd import enable_grad, no_grad
from flow.core.tensor import Tensor
from flow.core.trace import current_trace
from flow.ops.basic import from_numpy

from ._fused import bucket_key, fused_update

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks a hyperparameter that has no default and must be given per group."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]


def _eager_value(value):
    """`value` as a Python number when it is an eager tensor (for validation), else itself."""
    if isinstance(value, Tensor) and not value.is_traced and value.numel() == 1:
        return value.item()
    return value


def _snapshot(value):
    """A copy of a state value that later in-place updates cannot change."""
    if isinstance(value, Tensor):
        return value.detach().clone()
    return copy.deepcopy(value)


def _hyperparameter(value):
    """A param group's value as `state_dict` holds it: a number where a compiled step keeps it
    in a 0-d tensor (a learning rate), as PyTorch's state dicts have it, so the state dict of
    an optimizer, or of an nn.Graph, has tensors only where state has one per parameter."""
    if isinstance(value, Tensor) and value.ndim == 0 and value._trace is None:
        return value.item()
    return _snapshot(value)


class Optimizer:
    """Base class of all optimizers: holds `param_groups` and per-parameter `state`.

    `params` is an iterable of tensors, or of dicts (param groups) with a `"params"`
    entry and per-group hyperparameters overriding `defaults`. As in PyTorch, tensors
    that do not require grad (frozen parameters) are accepted and skipped while their
    `.grad` is None. A subclass implements
    `_update(p, grad, state, group, lr)`; `step()` calls it, under `no_grad`, for each
    parameter whose `.grad` is set. The learning rate is read from `group["lr"]` in
    `step()` only, once per group and step, and may be a Python float or a 0-d tensor.

    `foreach=True` (a group hyperparameter of the built-in optimizers, PyTorch's name for
    its multi-tensor update): a traced step (`nn.Graph`, `flow.jit`) runs the update once on
    the concatenation of the group's parameters of one dtype (and distribution), so the
    update is one dispatch per dtype, whatever the number of parameters. The default
    (None) updates each parameter separately: IREE fuses a parameter's update into the
    dispatch that computes its gradient, which the concatenation prevents (see README).
    Eager steps are per parameter either way; both give the same numbers.
    """

    _fused_update = False
    """Whether `_update` is elementwise in the parameter, gradient and state tensors (0-d
    state read and written as one value per parameter), so that `foreach` may run it once on
    the concatenation of many parameters (`flow.optim._fused`)."""

    def __init__(self, params: ParamsT, defaults: dict[str, Any]):
        self.defaults = dict(defaults)
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        name = type(self).__name__
        if isinstance(params, (Tensor, set, dict)):
            raise TypeError(
                f"{name}: params should be an iterable of tensors or of param-group dicts "
                f"(a list), got a {type(params).__name__}"
            )
        groups = list(params)
        if not groups:
            raise ValueError(f"{name}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters (with optional hyperparameters) to optimize."""
        name, index = type(self).__name__, len(self.param_groups)
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}: param group {index} must be a dict, "
                            f"got {type(param_group).__name__}")  # fmt: skip
        if "params" not in param_group:
            raise ValueError(f"{name}: param group {index} has no 'params' entry")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(f"{name}: the parameters of param group {index} are a set, whose "
                            "order changes between runs; pass a list")  # fmt: skip
        else:
            params = list(params)
        seen: set[int] = set()
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: parameter {i} of param group {index} is a "
                                f"{type(p).__name__}, expected a flow.Tensor")  # fmt: skip
            if not p.is_leaf:
                raise ValueError(f"{name}: parameter {i} of param group {index} is not a leaf "
                                 "tensor (it has a grad_fn); optimize the leaf it came from")  # fmt: skip
            if not p.is_floating_point():
                raise TypeError(f"{name}: parameter {i} of param group {index} has dtype "
                                f"{p.dtype!r}; only floating-point tensors can be optimized")  # fmt: skip
            if id(p) in seen:
                raise ValueError(f"{name}: parameter {i} of param group {index} appears twice "
                                 "in the group")  # fmt: skip
            seen.add(id(p))
        others = {id(p) for g in self.param_groups for p in g["params"]}
        if seen & others:
            raise ValueError(f"{name}: some parameters of param group {index} appear in more "
                             "than one parameter group")  # fmt: skip
        group = {**param_group, "params": params}
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise ValueError(f"{name}: param group {index} does not specify a value of "
                                 f"the required hyperparameter {key!r}")  # fmt: skip
            group.setdefault(key, default)
        self._validate_group(group, index)
        self.param_groups.append(group)

    def _validate_group(self, group: dict[str, Any], index: int) -> None:
        """Raise ValueError for out-of-range hyperparameters (overridden per optimizer)."""
        if "lr" in group:
            self._check(group, index, "lr", lambda v: v >= 0, "lr >= 0")
        if group.get("foreach") not in (None, True, False):
            where = f" in param group {index}" if index else ""
            raise TypeError(f"{type(self).__name__}: foreach{where} must be True, False or None, "
                            f"got {group['foreach']!r}")  # fmt: skip

    def _check(self, group: dict, index: int, key: str, ok: Callable, expected: str) -> None:
        value = _eager_value(group[key])
        if isinstance(value, Tensor):  # traced: checked when it was an input
            return
        if not ok(value):
            where = f" in param group {index}" if index else ""
            raise ValueError(f"{type(self).__name__}: invalid {key} {value!r}{where} "
                             f"(expected {expected})")  # fmt: skip

    # ------------------------------------------------------------------ stepping
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters: to None (default) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_()
                    p.grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None):
        """Update every parameter that has a `.grad`; `closure` re-evaluates the loss first."""
        rec = profiling.ACTIVE
        if rec is None or current_trace() is not None:  # a traced update is its graph's
            return self._step(closure)
        with rec.span(f"{type(self).__name__}.step", "optimizer"):
            return self._step(closure)

    def _step(self, closure: Callable[[], Any] | None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                lr = group["lr"]  # the one place the learning rate is read
                params = [p for p in group["params"] if p.grad is not None]
                for bucket in self._buckets(params, group):
                    states = [self.state[p] for p in bucket]
                    if len(bucket) > 1:
                        fused_update(self._update, bucket, states, group, lr)
                    else:
                        self._update(bucket[0], bucket[0].grad, states[0], group, lr)
                    for p, state in zip(bucket, states):
                        if not state:  # stateless rules (plain SGD) keep `self.state` empty
                            del self.state[p]
        return loss

    def _buckets(self, params: list[Tensor], group: dict) -> list[list[Tensor]]:
        """The parameters updated together: with `foreach`, inside a trace, those of one
        bucket (dtype, distribution, state layout; see `_fused`); otherwise one each."""
        if not (group.get("foreach") and self._fused_update and current_trace() is not None):
            return [[p] for p in params]
        buckets: dict[tuple, list[Tensor]] = {}
        alone = []
        for p in params:
            key = bucket_key(p, p.grad, self.state[p])
            if key is None or (not self.state[p] and self._initial_state(p, group)):
                alone.append([p])
            else:
                buckets.setdefault(key, []).append(p)
        return list(buckets.values()) + alone

    def init_state(self) -> list[Tensor]:
        """Create now the state each parameter without any would get on its first step, where
        that state is known before it (`_initial_state`); the parameters given state.

        `nn.Graph` calls it before tracing its first step, so that the first call and every
        later one run the same compiled program."""
        given = []
        for group in self.param_groups:
            for p in group["params"]:
                if not self.state.get(p):
                    state = self._initial_state(p, group)
                    if state:
                        self.state[p] = state
                        given.append(p)
        return given

    def _initial_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        """The state `p` starts with, made before its first step (fresh tensors); {} when the
        rule keeps none or when its first step makes the state from the gradient itself."""
        return {}

    def _update(self, p: Tensor, grad: Tensor, state: dict, group: dict, lr) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement _update or step")

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """`{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}`.

        Parameters are numbered in group order, as PyTorch does; the tensors are
        copies, so the result is a snapshot that later steps do not change. Group
        hyperparameters are numbers (a learning rate held in a 0-d tensor too).
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: _hyperparameter(v) for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            if id(p) in index and s:
                state[index[id(p)]] = {k: _snapshot(v) for k, v in s.items()}
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore `state_dict()` output onto this optimizer's parameters (same group layout);
        values of state this optimizer already has land in its own tensors."""
        name = type(self).__name__
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= state_dict.keys():
            raise ValueError(f"{name}.load_state_dict: expected a dict with 'state' and "
                             "'param_groups' entries")  # fmt: skip
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: the state dict has {len(saved_groups)} "
                             f"parameter groups, but the optimizer has "
                             f"{len(self.param_groups)}")  # fmt: skip
        by_index: dict[int, Tensor] = {}
        for g, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"{name}.load_state_dict: parameter group {g} of the state "
                                 f"dict has {len(saved['params'])} parameters, but the "
                                 f"optimizer's group {g} has {len(group['params'])}")  # fmt: skip
            for i, p in zip(saved["params"], group["params"]):
                by_index[int(i)] = p
        state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for i, saved_state in state_dict["state"].items():
            if int(i) not in by_index:
                raise ValueError(f"{name}.load_state_dict: the state of parameter {i} belongs "
                                 "to no parameter group")  # fmt: skip
            p = by_index[int(i)]
            state[p] = {k: self._load_value(p, int(i), k, v) for k, v in saved_state.items()}
        groups = [
            {**{k: copy.deepcopy(v) for k, v in saved.items() if k != "params"},
             "params": group["params"]}
            for saved, group in zip(saved_groups, self.param_groups)
        ]  # fmt: skip
        self._keep_tensors(state, groups)
        self.state, self.param_groups = state, groups

    def _keep_tensors(self, state: dict, groups: list[dict]) -> None:
        """Put loaded values into the tensors this optimizer already holds where their shapes
        agree (state entries, a 0-d learning rate), in place: a compiled step (`nn.Graph`)
        reads those tensors, so it runs on the loaded values."""
        with no_grad():
            for p, loaded in state.items():
                held = self.state.get(p, {})
                for key, value in loaded.items():
                    old = held.get(key)
                    if isinstance(old, Tensor) and isinstance(value, Tensor) \
                            and tuple(old.shape) == tuple(value.shape):  # fmt: skip
                        loaded[key] = old.copy_(value)
            for group, old_group in zip(groups, self.param_groups):
                for key, value in group.items():
                    old = old_group.get(key)
                    if key != "params" and isinstance(old, Tensor) and old.ndim == 0 \
                            and isinstance(_eager_value(value), (int, float)):  # fmt: skip
                        group[key] = old.fill_(float(_eager_value(value)))

    def _load_value(self, p: Tensor, index: int, key: str, value):
        if not isinstance(value, (Tensor, np.ndarray)):
            return copy.deepcopy(value)
        arr = np.array(value.numpy() if isinstance(value, Tensor) else value, order="C")
        if arr.ndim and arr.shape != tuple(p.shape):
            raise ValueError(f"{type(self).__name__}.load_state_dict: state {key!r} of parameter "
                             f"{index} has shape {list(arr.shape)}, but the parameter has shape "
                             f"{list(p.shape)}")  # fmt: skip
        if key != "step" and arr.dtype.kind == "f":
            arr = arr.astype(p.dtype.np_dtype)
        return from_numpy(arr)  # (np.ascontiguousarray would make a 0-d step 1-d)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines + [")"])


def in_place_arrays(p: Tensor, grad: Tensor, *state: Tensor) -> list[np.ndarray] | None:
    """The arrays of `p`, its gradient and its `state` tensors, for an eager update written
    straight into them with the kernels the ops run (the same bits, no op and no new array
    per update, as PyTorch's foreach and fused optimizers): all local eager float arrays of
    `p`'s dtype and shape, `p` and `state` writable, outside flow.lazy. None: take the ops."""
    arrays = []
    for t in (p, grad, *state):
        a = t._buf
        if (a.__class__ is not np.ndarray or a.dtype.kind != "f"
                or getattr(t, "_dist", None) is not None or t._trace is not None):  # fmt: skip
            return None
        arrays.append(a)
    pa = arrays[0]
    for i, a in enumerate(arrays):
        if a.dtype != pa.dtype or a.shape != pa.shape or (i != 1 and not a.flags.writeable):
            return None
    from flow.modes.lazy import enabled

    return None if enabled() else arrays


def in_place_with_step(p: Tensor, grad: Tensor, state: dict, names: list[str], lr):
    """`in_place_arrays` of `p`, `grad` and the state tensors `names`, and the array of the
    state's `step` (a 0-d float32 tensor the update counts in), for an adaptive optimizer's
    eager update (Adam's, RMSprop's): only float32 / float64 parameters (float16 ones mix in
    the float32 step) and a number `lr`. None: take the ops."""
    if isinstance(lr, (Tensor, bool)) or not isinstance(lr, (int, float)):
        return None
    tensors, step = [state.get(n) for n in names], state.get("step")
    if not all(isinstance(t, Tensor) for t in (*tensors, step)):
        return None
    arrays, sa = in_place_arrays(p, grad, *tensors), step._buf
    if (arrays is None or arrays[0].dtype not in (np.float32, np.float64)
            or sa.__class__ is not np.ndarray or sa.dtype != np.float32 or sa.shape != ()
            or not sa.flags.writeable or step._trace is not None):  # fmt: skip
        return None
    return arrays, sa
