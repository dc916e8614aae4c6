"""Tracing: while a `Trace` is active, primitives append flow ops to it instead of running.

The trace builds xDSL IR objects directly (no text round trip). Eager tensors
that a traced function captures become extra function arguments (closure
conversion, as JAX does for its constants), so weights never end up baked into
the IR and compiled code sees their current values at every call.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # xDSL loads with the first trace, not with `import flow`
    from xdsl.dialects.builtin import ModuleOp, TensorType
    from xdsl.ir import Attribute, Operation, SSAValue

class _Local(threading.local):
    def __init__(self):  # (run once per thread)
        self.stack: list[Trace] = []


_local = _Local()


def _stack() -> list[Trace]:
    return _local.stack


def current_trace() -> Trace | None:
    stack = _local.stack  # (not `_stack()`: every primitive asks)
    return stack[-1] if stack else None


def index_checks_enabled() -> bool:
    """Whether `FLOW_CHECK_INDICES` leaves traced index range checks on (the default)."""
    return os.environ.get("FLOW_CHECK_INDICES", "1").strip().lower() not in ("0", "false", "off")


class Trace:
    """One function being traced into flow IR."""

    def __init__(self, name: str = "main"):
        from xdsl.ir import Block

        self.name = name
        self.block = Block()
        self.captured: list = []  # eager Tensors lifted to extra arguments, in order
        self._captured_ids: dict[int, SSAValue] = {}
        self.key_slots: list[tuple[int, object]] = []  # (argument index, Generator)
        self.mutated: dict[int, tuple] = {}  # id -> (eager tensor, its data before the trace)
        self.arg_dists: dict[int, object] = {}  # argument index -> GlobalInfo of a global tensor
        self.placements: dict = {}  # placements named by traced to_global calls (ordered set)
        self._placement_of: dict[SSAValue, object] = {}
        self.tags: dict[str, Attribute] = {}  # attributes emit() puts on every op
        self.scope = ""  # the module path emitted ops are named with (`scoped`), "" for none
        self.check_indices = index_checks_enabled()  # emit index range checks (ops.index_checks)
        self.index_checks: list = []  # their sites, in program order
        # op -> (Primitive, params) for each op a primitive emitted: what runs the program
        # on the eager kernels before it is compiled (compile/interpret.py)
        self.eqns: dict[Operation, tuple] = {}
        # id -> eager tensor whose gradient a traced backward pass computed (a parameter):
        # a cached program checks them for gradient hooks (flow.core.autograd.check_reached)
        self.grad_reached: dict[int, object] = {}
        # activation checkpointing (flow.utils.checkpoint): the random keys a block draws
        # are logged, and its recomputation in the backward pass draws the same ones again
        self.key_log: list | None = None
        self.key_replay: list | None = None

    def __enter__(self) -> Trace:
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        popped = _stack().pop()
        assert popped is self

    def argument(self, ty: TensorType) -> SSAValue:
        return self.block.insert_arg(ty, len(self.block.args))

    def lift(self, tensor) -> SSAValue:
        """The SSA value standing for an eager tensor captured by the traced function."""
        key = id(tensor)
        if key not in self._captured_ids:
            value = self.argument(tensor._ir_type())  # of a global tensor: its global shape
            if getattr(tensor, "_dist", None) is not None:
                self.arg_dists[value.index] = tensor._dist
            self._captured_ids[key] = value
            self.captured.append(tensor)
        return self._captured_ids[key]

    def placement_of(self, value: SSAValue):
        """The placement (a PlacementAttr) of a value of a global program: that of the global
        argument or traced `to_global` it is computed from (ops compute on one placement);
        None for a local value (a constant, a local input)."""
        todo = [value]
        while todo:
            v = todo[-1]
            if v in self._placement_of:
                todo.pop()
                continue
            if v.owner is self.block:  # an argument of the traced function
                info = self.arg_dists.get(v.index)
                self._placement_of[v] = None if info is None else info.placement.attr
                todo.pop()
                continue
            op = v.owner
            if op.name == "flow.redistribute":
                self._placement_of[v] = op.dist.placement
                todo.pop()
                continue
            pending = [o for o in op.operands if o not in self._placement_of]
            if pending:
                todo.extend(pending)
                continue
            found = (self._placement_of[o] for o in op.operands)
            self._placement_of[v] = next((p for p in found if p is not None), None)
            todo.pop()
        return self._placement_of[value]

    def derives_from_global(self, value: SSAValue) -> bool:
        """Whether `value` is computed from a global argument or a traced `to_global`: a
        value of the global program, as opposed to a local one (a constant, a local input)."""
        return self.placement_of(value) is not None

    @contextlib.contextmanager
    def tagged(self, **attrs: Attribute) -> Iterator[None]:
        """Within: every emitted op carries `attrs` (e.g. a pipeline's micro-batch)."""
        saved = dict(self.tags)
        self.tags.update(attrs)
        try:
            yield
        finally:
            self.tags = saved

    @contextlib.contextmanager
    def scoped(self, scope: str) -> Iterator[None]:
        """Within: every emitted op's location is named `scope` (a module path such as
        `first.0`, as JAX names locations with its name stack): `loc("first.0"("m.py":3:1))`."""
        saved, self.scope = self.scope, scope
        try:
            yield
        finally:
            self.scope = saved

    def mutate(self, tensor, new) -> None:
        """Record that eager `tensor` now holds `new` (a value of this trace).

        Until the trace ends the tensor stands for `new`, so later ops read the
        updated value; `restore_mutated` then puts the eager data back, and the
        compiled function returns the final values for write-back after each call.
        """
        key = id(tensor)
        if key not in self.mutated:
            self.lift(tensor)  # its value at call time is an input of the function
            self.mutated[key] = (tensor, tensor._data)
        tensor._data, tensor._value, tensor._trace = None, new._value, self

    def restore_mutated(self) -> list:
        """Final values of the mutated tensors (in order), putting their eager data back."""
        finals = []
        for tensor, data in self.mutated.values():
            finals.append(tensor._value)
            tensor._data, tensor._value, tensor._trace = data, None, None
        return finals

    def random_key(self, generator) -> SSAValue:
        """A new `tensor<1xi64>` argument for a random op's key (see flow.ops.random).

        The compiled function fills it from `generator` at every call, so each call
        draws new numbers, as the eager code would; no key is baked into the IR.
        """
        from xdsl.dialects.builtin import TensorType, i64

        if self.key_replay:  # a checkpointed block recomputed: the keys it drew before
            value = self.key_replay.pop(0)
        else:
            value = self.argument(TensorType(i64, (1,)))
            value.name_hint = "rng_key"
            self.key_slots.append((len(self.block.args) - 1, generator))
        if self.key_log is not None:
            self.key_log.append(value)
        return value

    def emit(self, op: Operation, loc: tuple[str, int, int] | None) -> Operation:
        if self.tags:
            op.attributes.update(self.tags)
        if loc is not None or self.scope:
            from xdsl.dialects.builtin import (
                FileLineColLoc,
                IntAttr,
                NameLoc,
                StringAttr,
                UnknownLoc,
            )

            where = (UnknownLoc() if loc is None else
                     FileLineColLoc(StringAttr(loc[0]), IntAttr(loc[1]), IntAttr(loc[2])))  # fmt: skip
            op.location = NameLoc(StringAttr(self.scope), where) if self.scope else where
        self.block.add_op(op)
        return op

    def finish(self, results: Sequence[SSAValue]) -> ModuleOp:
        """Close the function with a return of `results` and wrap it in a module."""
        from xdsl.dialects import func
        from xdsl.dialects.builtin import ModuleOp
        from xdsl.ir import Region

        self.block.add_op(func.ReturnOp(*results))
        arg_types = [a.type for a in self.block.args]
        fn = func.FuncOp(self.name, (arg_types, [r.type for r in results]), Region(self.block))
        return ModuleOp([fn])
