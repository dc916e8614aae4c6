"""`flow.jit`: trace a Python function into flow IR, compile it with IREE, cache per signature.

Staged like JAX: `jit(f).lower(*args)` → `Lowered` (`.as_text()` is the flow
IR) → `.compile(target=...)` → `Compiled`, a callable running the IREE module.
Calling `jit(f)(*args)` traces on the first call for each input signature
(shapes, dtypes, static arguments, target) and reuses the result
(compile/staging.py: the path `nn.Graph` shares), except that calls differing only in
sizes share one program with those dims dynamic (compile/dynamic.py, `dynamic=`). A new
program's first call runs at once on the eager kernels while IREE compiles in the
background, and a later call switches to the compiled program (compile/tiers.py; `sync_compile=True` or
`FLOW_SYNC_COMPILE=1` compiles first).

Global tensors (frontend/distributed/) trace as arguments of their global type
with a `#flow.dist` encoding (placement and SBP are part of the signature);
`flow-infer-sbp` then gives every value its distribution, the function's
results take the distribution inference chose, and each rank compiles and runs
its own partition of the program on its shards (compile/per_rank.py),
getting global tensors back; until those compiles are done the program runs
interpreted on global values, and every rank switches at the same call
(compile/tiers.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from flow.core import profiling

from .stages import Compiled, Lowered
from .staging import ProgramCache, stage

__all__ = ["Compiled", "Lowered", "jit"]


class jit:  # noqa: N801  (a decorator, named like jax.jit / torch.compile)
    """Compile `fn` with IREE for `target`; usable as `@flow.jit` or `@flow.jit(target=...)`.

    Without `target`, `fn` runs on the device of its tensors (arguments and captured tensors,
    see `flow.device`), the cpu when they have none; `self.target` is then None."""

    def __new__(cls, fn: Callable | None = None, *, target: str | None = None,
                check_indices: bool | None = None, sync_compile: bool | None = None,
                dynamic=None):  # fmt: skip
        if fn is None:
            return functools.partial(cls, target=target, check_indices=check_indices,
                                     sync_compile=sync_compile, dynamic=dynamic)  # fmt: skip
        return super().__new__(cls)

    def __init__(self, fn: Callable, *, target: str | None = None,
                 check_indices: bool | None = None, sync_compile: bool | None = None,
                 dynamic=None):  # fmt: skip
        """`check_indices=False` compiles without index range checks (out-of-range indices
        are then clamped, unchecked); by default `FLOW_CHECK_INDICES` decides (on).
        `sync_compile=True` compiles a new signature before its first call returns; by
        default (`FLOW_SYNC_COMPILE` unset) the call runs at once on the eager kernels while
        IREE compiles in the background, and a later call switches (compile/tiers.py).
        `dynamic` (compile/dynamic.py): by default a dim whose size changes between calls
        becomes dynamic at its second size, so one program serves every size; False
        compiles one program per shape; dims named here are dynamic from the first call
        (`dynamic=0`: the first dim of every array argument; `dynamic={"x": (0, 1)}`)."""
        from flow.targets import get_target

        self.fn = fn
        self.target = get_target(target).name if target else None
        self.check_indices = check_indices
        self.name = getattr(fn, "__name__", "main")
        self._cache = ProgramCache(f"flow.jit({self.name})", sync_compile=sync_compile,
                                   dynamic=dynamic, fn=fn)  # fmt: skip
        functools.update_wrapper(self, fn)

    def lower(self, *args) -> Lowered:
        """Trace `fn(*args)` into flow IR (`.as_text()`), ready to `.compile(target)`."""
        return stage(self.fn, self.name, args, check_indices=self.check_indices)

    def __call__(self, *args):
        """Run the program compiled for this call's key (see `ProgramCache`), compiling it
        on the key's first call: the device is decided then, once, before lowering."""
        if profiling.ACTIVE is not None:
            with profiling.ACTIVE.span(f"jit {self.name}", "jit", {"function": self.name}):
                return self._call(args)
        return self._call(args)

    def _call(self, args: tuple):
        leaves, key, compiled = self._cache.lookup(args, self.target)
        if compiled is None:
            compiled = self._cache.compile(key, self.lower(*args), leaves,
                                           retrace=lambda a: self.lower(*a))  # fmt: skip
        return compiled.call_flat(leaves)
