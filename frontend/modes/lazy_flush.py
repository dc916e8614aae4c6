"""Flushing pending lazy graphs: which nodes to compute, and the programs computing them.

`flush` picks the outputs (see flow.modes.lazy for the rules), collects the pending
nodes they need in recording order, and keys the program by its structure: the op
sequence with static parameters and operand wiring, the shapes and dtypes of its
inputs (every concrete array read), and its outputs. `_Programs` keeps one entry per
key: a compiled function, or the decision to run on numpy (a program that failed to
compile), plus which float `full` values are inputs. Programs below `min_ops` ops always
run on numpy, uncached.
"""

from __future__ import annotations

import sys
import warnings
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from flow.core import dtypes as _dtypes
from flow.modes import lazy as L
from flow.modes.lazy import _NO, LazyValue, _eval
from flow.modes.lazy_stats import count as _count

_CACHE_ENTRIES = 256


def _external_refs(items: list) -> list[int]:
    return [sys.getrefcount(t) for t in items]


_REF_BASE = _external_refs([object()])[0]  # the references the scan itself holds


def _alive() -> list:
    L.forget_dead()
    return [t for t in (r() for r in list(L._tracked.values())) if t is not None]


def _live(tensors: list) -> list:
    """The tensors referenced from outside autograd's graph (a node holds its inputs, so a
    tensor only a later op reads is not live: nothing can read it but that op's backward)."""
    internal = _graph_refs(tensors)
    counts = _external_refs(tensors)
    return [t for t, c in zip(tensors, counts) if c - _REF_BASE > internal.get(id(t), 0)]


def _graph_refs(tensors: list) -> dict[int, int]:
    """Per tensor id, the references autograd nodes of `tensors` hold (as inputs; a node
    holds its output weakly)."""
    internal: dict[int, int] = {}
    for t in tensors:
        n = t._node
        if n is not None:
            for i in n.inputs:
                internal[id(i)] = internal.get(id(i), 0) + 1
    return internal


def _pending(t) -> LazyValue | None:
    b = getattr(t, "_buf", None)
    if b.__class__ is LazyValue and b.value is None and b.args:
        return b
    return None  # concrete, traced, computed, or a constant (recomputed for free)


def _defer_consumed_grads(live: list) -> None:
    """Mark the pending `.grad` of parameters whose pending in-place update (an optimizer
    step) this flush computes as computed only when read: `zero_grad` usually drops them
    unread, while as outputs they would keep the compiled step from fusing each weight
    gradient into its update."""
    for p in live:
        b, g = p._buf, p.grad
        if (b.__class__ is LazyValue and b.rebound and b.value is None and p._node is None
                and g is not None and _pending(g) is not None):  # fmt: skip
            g._buf.deferred = True


def _roots(requested: list, req_tensors: list) -> list[LazyValue]:
    """The nodes a flush outputs: requested, referenced from outside autograd, or saved
    by autograd nodes not freed yet (a later backward() reads them)."""
    roots, seen = list(requested), {id(n) for n in requested}
    graphs = list(req_tensors)
    tensors = _alive()
    live = _live(tensors) if tensors else []
    _defer_consumed_grads(live)
    for t in live:
        b = _pending(t)
        if b is not None and not b.deferred and id(b) not in seen:
            seen.add(id(b))
            roots.append(b)
        graphs.append(t)
    visited: set[int] = set()
    stack = [t._node for t in graphs if t._node is not None and not t._node.freed]
    while stack:
        n = stack.pop()
        if id(n) in visited:
            continue
        visited.add(id(n))
        for x in (n.out, *n.inputs):
            b = _pending(x)
            if b is not None and id(b) not in seen:
                seen.add(id(b))
                roots.append(b)
            m = getattr(x, "_node", None)
            if m is not None and not m.freed and id(m) not in visited:
                stack.append(m)
    return roots


def flush(requested: list, req_tensors: list) -> None:
    """Compute `requested` nodes and every pending value user code can still read."""
    roots = sorted(_roots(requested, req_tensors), key=lambda n: n.seq)  # a stable order
    if not roots:
        L._flushed()
        return
    order, stack, seen = [], list(roots), set()
    while stack:
        n = stack.pop()
        if id(n) in seen or n.value is not None:
            continue
        seen.add(id(n))
        order.append(n)
        stack.extend(a for a in n.args if a.__class__ is LazyValue and a.value is None)
    order.sort(key=lambda n: n.seq)
    index = {id(n): i for i, n in enumerate(order)}
    leaves, leaf_index, ops, fvals = [], {}, [], []
    for n in order:
        refs = []
        for a in n.args:
            if a.__class__ is LazyValue:
                if a.value is None:
                    refs.append(index[id(a)])
                    continue
                a = a.value
            j = leaf_index.get(id(a))
            if j is None:
                j = leaf_index[id(a)] = len(leaves)
                leaves.append(a)
            refs.append(~j)
        ops.append((n.key, tuple(refs)))
        if n.fvalue is not _NO:
            fvals.append(n.fvalue)
    key = (tuple(ops), tuple((a.shape, a.dtype) for a in leaves),
           tuple(index[id(r)] for r in roots))  # fmt: skip
    values = _programs.run(key, order, leaves, roots, fvals)
    for n, v in zip(roots, values):
        n._set(v)
    L._flushed()
    _count(flushes=1)
    _prune(order, leaves)


def _prune(order: list, leaves: list) -> None:
    """Give computed tensors their arrays; forget those whose autograd node holds no pending
    input (nothing left to count for them). Weakref callbacks only queue (see
    `_lazy.track`), so `_tracked` changes here only by this loop."""
    L.forget_dead()
    for key, r in list(L._tracked.items()):
        t = r()
        if t is None:
            continue
        b = t._buf
        if b.__class__ is LazyValue:
            if b.value is None:
                continue
            t._buf = L.settle(key, b.value, order, leaves)
        n = t._node
        if n is None or all(_pending(i) is None for i in n.inputs):
            del L._tracked[key]


def _interpret(order, leaves, roots) -> list[np.ndarray]:
    """Run the nodes on numpy, in order (what eager mode would have done)."""
    vals: dict[int, np.ndarray] = {}
    for n in order:
        args = []
        for a in n.args:
            if a.__class__ is LazyValue:
                a = vals[id(a)] if a.value is None else a.value
            args.append(a)
        vals[id(n)] = _eval(n, args)
    return [np.ascontiguousarray(vals[id(r)]) for r in roots]  # like compiled results


def _same(a, b) -> bool:
    return a == b or (a != a and b != b)  # NaN equals NaN here


@dataclass
class _Entry:
    fn: object = None  # the compiled function (None when compilation failed)
    failed: bool = False  # compilation failed: always numpy
    dynamic: tuple = ()  # per float `full`: whether its value is an input
    fvals: tuple = ()  # the float `full` values it was compiled (or run) with


class _Programs:
    """Compiled pending graphs by signature (least recently used ones dropped)."""

    def __init__(self):
        self.entries: OrderedDict[tuple, _Entry] = OrderedDict()

    def run(self, key, order, leaves, roots, fvals) -> list[np.ndarray]:
        if len(order) < L._min_ops():  # compiling would cost more than it saves
            _count(interpreted=1)
            return _interpret(order, leaves, roots)
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        fvals = tuple(fvals)
        if entry is not None and entry.fn is not None:
            if all(d or _same(a, b) for d, a, b in zip(entry.dynamic, fvals, entry.fvals)):
                _count(cache_hits=1)
                return self._call(entry, leaves, order, fvals)
        elif entry is not None and entry.failed:
            _count(interpreted=1)
            return _interpret(order, leaves, roots)
        # compile; positions whose value changed since last time become inputs
        dynamic = tuple(False for _ in fvals)
        if entry is not None:
            dynamic = tuple(d or not _same(a, b)
                            for d, a, b in zip(entry.dynamic, fvals, entry.fvals))  # fmt: skip
        new = _Entry(dynamic=dynamic, fvals=fvals)
        try:
            new.fn = _compile(order, leaves, roots, dynamic)
        except Exception as err:  # noqa: BLE001 - any lowering/compile failure runs on numpy
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            warnings.warn(f"flow.lazy: a pending graph could not be compiled; it runs on numpy "
                          f"({type(err).__name__}: {first})", RuntimeWarning, stacklevel=4)  # fmt: skip
            new.failed = True
            self._store(key, new)
            _count(compiles=1, fallbacks=1, interpreted=1)
            return _interpret(order, leaves, roots)
        self._store(key, new)
        _count(compiles=1)
        return self._call(new, leaves, order, fvals)

    def _store(self, key, entry: _Entry) -> None:
        self.entries[key] = entry
        while len(self.entries) > _CACHE_ENTRIES:
            self.entries.popitem(last=False)

    @staticmethod
    def _call(entry: _Entry, leaves, order, fvals) -> list[np.ndarray]:
        inputs = list(leaves)
        if any(entry.dynamic):
            fulls = [n for n in order if n.fvalue is not _NO]
            for n, v, d in zip(fulls, fvals, entry.dynamic):
                if d:
                    inputs.append(np.asarray(v, dtype=n.dtype.np_dtype))
        return list(entry.fn(*inputs))


_programs = _Programs()


def _compile(order, leaves, roots, dynamic):
    """Replay the nodes into a flow function and compile it like `flow.jit` does."""
    from xdsl.dialects.builtin import TensorType

    from flow import primitives as P
    from flow.compile.stages import Lowered
    from flow.core.trace import Trace
    from flow.targets import DEFAULT_TARGET

    trace = Trace("lazy")
    vals: dict[int, object] = {}
    leaf_vals = {id(a): trace.argument(TensorType(_dtypes.as_dtype(a.dtype).ir_type, a.shape))
                 for a in leaves}  # fmt: skip
    k = 0
    for n in order:
        if n.fvalue is not _NO:
            k += 1
            if dynamic[k - 1]:
                v = trace.argument(TensorType(n.dtype.ir_type, ()))
                if n.shape:
                    op = P.broadcast_in_dim.op.make(v, dims=(), shape=n.shape)
                    v = trace.emit(op, n.loc).results[0]
                vals[id(n)] = v
                continue
        operands = []
        for a in n.args:
            if a.__class__ is LazyValue and a.value is None:
                operands.append(vals[id(a)])
            else:
                operands.append(leaf_vals[id(a.value if a.__class__ is LazyValue else a)])
        op = trace.emit(n.prim.op.make(*operands, **n.prim.to_ir(n.params)), n.loc)
        vals[id(n)] = op.results[0]
    module = trace.finish([vals[id(r)] for r in roots])
    module.verify()
    lowered = Lowered(module=module, in_tree=None, out_tree=None, signature=(), captured=[],
                      name="lazy")  # fmt: skip
    return lowered.compile(DEFAULT_TARGET).entry
