"""`flow.lazy()`: eager code recorded into pending graphs, compiled with `flow.jit`'s machinery.

Inside `with flow.lazy():` (or everywhere with `FLOW_LAZY=1`), `bind` does not run a
primitive (lazy is the first mode it asks, outside traces): this mode asks the dialect op's
`infer` for the result type — so shape and dtype errors raise at the call, as eagerly, as
do the value checks of eager kernels when the values are known (gather's index range) —
records the application as a `LazyValue` node (a `flow.core.pending.PendingValue`) and
returns a tensor holding that node. Autograd records over such tensors unchanged
(VJP rules call `bind`), so `loss.backward()` and `optimizer.step()` are recorded too.

**When values are computed (a flush).** Reading a pending tensor (`numpy()`, `item()`,
`float()`, `bool()`, printing, `__array__`, indexing by a tensor, anything that reads
`Tensor._data`), leaving the outermost `flow.lazy()` block, `flow.lazy_sync()`, a host
write (`x[i] = v`) into an array that pending work reads, and two bounds below. One flush computes, in
one program: the requested values; every pending tensor still referenced from outside
autograd's graph (a variable, a parameter, optimizer state, a `.grad`; counted with
`sys.getrefcount` less the references autograd nodes hold as inputs; a node holds its
output weakly, so a step leaves no cycle for the collector); and the tensors a not yet run
`backward()` will read (inputs and outputs of autograd nodes not freed, reachable from
those). After a flush nothing that user code can still read is pending, so graphs do
not grow across steps — except the `.grad` of a parameter whose optimizer update the
flush computes: outputting it would keep the compiled step from fusing the gradient into
the update, and `zero_grad` usually drops it unread; it is computed only when read
(recomputing the step). Pending tensors left out are garbage, or recomputed if read.

**Bounds.** A parameter (a leaf requiring grad) whose value is pending because of an
in-place update and which a differentiable op then reads marks the start of the next
forward pass: the pending step is flushed there, so a loop that never reads anything
still compiles one training step per program. `FLOW_LAZY_MAX_OPS` (default 10000)
flushes when that many ops are pending.

**Programs and their cache** (flow.modes.lazy_flush). The needed nodes are replayed
into a flow `Trace`, and `Lowered.compile` lowers and compiles them with IREE (and the
on-disk cache of `flow.targets`), as `flow.jit` does. Every concrete array a node reads
(parameters, data batches, random keys, values computed by an earlier flush) is an
*input* of the program, never a constant, so programs are keyed by structure only: the
op sequence with its static parameters and operand wiring, the inputs' shapes and
dtypes, and the outputs. Floating `full` values (Python scalars such as a learning
rate) start as constants; when a program is seen again with a different value at a
position, it is recompiled once with that value as an input, and never again for it
(a scheduler's first change costs one recompile; an lr kept as a 0-d tensor none:
filling a small tensor in place keeps it a concrete input). A program of fewer than
`min_ops` (default 16) ops runs on numpy, eager's kernels, instead: compiling it would
cost more than it saves. Either way a program always runs the same way (same bits).

**Semantics kept and not.** Random ops draw their keys when recorded, so numbers equal
eager ones. An in-place op makes the tensor's value pending; when it is computed, the
result is written into the tensor's old array if anything else still references that
array (`from_numpy`'s caller, a kept `numpy()`, a view), as eagerly, and replaces it
otherwise (no copy). A small tensor filled in place (an lr) is written at once. Views
made by flow ops are copies under lazy mode; writes through numpy itself into an array
that pending work reads must wait for a flush (flow's own `x[i] = v` flushes first);
`clone()` copies, `detach()` shares the value. Global
tensors, the `constant` primitive (its array becomes a leaf) and ops inside `flow.jit`
traces run as without lazy mode; a program whose lowering or compilation fails runs on
numpy (`lazy_stats().fallbacks`). The flag is per thread; the pending graph is per
process and not thread safe.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import weakref

import numpy as np

from flow.core import device as _device
from flow.core import dtypes as _dtypes
from flow.core.autograd import is_grad_enabled, record
from flow.core.errors import FRONTEND_DIR as _FRONTEND_DIR
from flow.core.pending import PendingValue, register_host_write_hook
from flow.core.tensor import Size, Tensor
from flow.distributed.eager_ops import creation_placement
from flow.modes.lazy_stats import LazyStats, counters, lazy_stats

__all__ = ["LazyStats", "LazyValue", "applies", "lazy", "lazy_stats", "lazy_sync", "process"]

_OFF = ("", "0", "false", "off", "no")
_ENV_ON = os.environ.get("FLOW_LAZY", "").strip().lower() not in _OFF
_MAX_OPS = int(os.environ.get("FLOW_LAZY_MAX_OPS", "10000"))
_MIN_OPS = 16
_CREATION = ("full", "iota")
_NO = object()  # "no float value" marker of non-`full` nodes

class _Local(threading.local):
    on = _ENV_ON  # (per thread; the class attributes are the defaults)
    min_ops = _MIN_OPS


_local = _Local()


def enabled() -> bool:
    """Whether primitives are recorded instead of run on this thread."""
    return _local.on


def _min_ops() -> int:
    return _local.min_ops


class lazy(contextlib.ContextDecorator):  # noqa: N801  (used like flow.no_grad)
    """`with flow.lazy():` records eager ops and compiles them when values are needed.

    `enabled=False` turns lazy mode off inside (e.g. under `FLOW_LAZY=1`); `min_ops`
    sets the size below which a program runs on numpy instead of compiling (0: compile
    everything). Leaving the outermost block computes what is still pending.
    """

    def __init__(self, enabled: bool = True, *, min_ops: int | None = None):
        self.enabled = bool(enabled)
        self.min_ops = min_ops
        self._saved: list[tuple] = []

    def __enter__(self) -> lazy:
        self._saved.append((enabled(), _min_ops()))
        _local.on = self.enabled
        if self.min_ops is not None:
            _local.min_ops = int(self.min_ops)
        return self

    def __exit__(self, exc_type, *exc) -> None:
        was_on, min_ops = self._saved.pop()
        _local.on, _local.min_ops = was_on, min_ops
        if self.enabled and not was_on and exc_type is None:
            lazy_sync()


def lazy_sync() -> None:
    """Compute every pending value that user code can still read (a `mark_step`)."""
    if _pending_work():
        from flow.modes.lazy_flush import flush

        flush([], [])


# --------------------------------------------------------------------------- nodes


class LazyValue(PendingValue):
    """A recorded primitive application: `prim(*args, **params)`, not computed yet.

    `args` are other nodes or concrete numpy arrays (the values operands had when the
    op was recorded). `value` is set when a flush computes the node; its `args` are
    then dropped. Nodes are immutable values: tensors sharing one stay independent.
    """

    __slots__ = ("prim", "args", "params", "key", "fvalue", "shape", "dtype", "loc", "seq",
                 "value", "rebound", "deferred", "__weakref__")  # fmt: skip

    def materialize(self, tensor) -> np.ndarray:
        """`tensor`'s array, computing this node (and what else is pending) if needed."""
        if self.value is None:
            if not self.args and self.prim.name in _CREATION:
                self._set(_eval(self, ()))  # a constant: numpy, no program
            else:
                from flow.modes.lazy_flush import flush

                flush([self], [tensor])
        if tensor._buf is self:  # (a flush has settled the tensors it tracks already)
            tensor._buf = settle(id(tensor), self.value)
        return tensor._buf

    def alias(self, tensor, copy: bool):
        return alias(tensor, copy)

    def rebind(self, tensor) -> None:
        rebind(tensor, self)

    def _set(self, value: np.ndarray) -> None:
        if value.shape != self.shape:  # 0-d results of some runtimes
            value = value.reshape(self.shape)
        self.value, self.args = value, ()

    def __copy__(self) -> LazyValue:
        return self

    def __deepcopy__(self, memo) -> LazyValue:
        return self

    def __repr__(self) -> str:
        state = "computed" if self.value is not None else "pending"
        return f"LazyValue({self.prim.name}, {self.dtype!r}{list(self.shape)}, {state})"


_seq = 0
_ops_pending = 0  # ops recorded since the last flush
_tracked: dict[int, weakref.ref] = {}  # tensors holding nodes (and still alive)
_dead: list[tuple[int, weakref.ref]] = []  # entries of `_tracked` whose tensor died
_homes: dict[int, np.ndarray] = {}  # tensor id -> its array before a pending in-place update
_captured: set[int] = set()  # ids of the arrays pending nodes read (since the last flush)
_infer_cache: dict = {}
_frontend_file: dict[str, bool] = {}


def _user_loc() -> tuple[str, int, int] | None:
    """The user's file and line (like `_trace.user_location`, memoized per file)."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        inside = _frontend_file.get(name)
        if inside is None:
            inside = _frontend_file[name] = os.path.abspath(name).startswith(_FRONTEND_DIR)
        if not inside:
            return (name, f.f_lineno, 1)
        f = f.f_back
    return None


def _freeze(value):
    """A hashable stand-in for a primitive parameter."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype, value.shape, value.tobytes())
    return value


def track(t) -> None:
    """Remember `t` (a tensor holding a node) for flushes; forgotten when it dies."""
    forget_dead()
    key = id(t)
    ref = _tracked.get(key)
    if ref is None or ref() is not t:
        _tracked[key] = weakref.ref(t, functools.partial(_died, key))


def _died(key: int, ref: weakref.ref) -> None:
    # A weakref callback runs whenever the collector frees a tensor, possibly while some
    # code iterates over `_tracked`: it only queues (list.append is atomic), and
    # `forget_dead` drops the entry where nothing iterates.
    _dead.append((key, ref))


def forget_dead() -> None:
    """Drop the entries of tensors that died. A tensor's id is reused only after it died
    (its callback queued by then), so this runs first wherever an id is tracked or read."""
    while _dead:
        key, ref = _dead.pop()
        r = _tracked.get(key)
        if r is ref:
            del _tracked[key]
        if r is ref or r is None:
            _homes.pop(key, None)


def _new_tensor(node: LazyValue):
    t = object.__new__(Tensor)
    t._buf, t._value, t._trace = node, None, None
    t._requires_grad, t._node, t.grad = False, None, None
    t._dist = t._device = None
    t._shape, t._dtype = Size(node.shape), node.dtype
    track(t)
    return t


def _pending_work() -> bool:
    return _ops_pending > 0


def _flushed() -> None:
    """Nothing that user code can read is pending any more."""
    global _ops_pending
    _ops_pending = 0
    _captured.clear()


def _base_id(a: np.ndarray) -> int:
    """The id of the array owning `a`'s memory (views share their base's)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return id(a)


def _step_boundary(args) -> bool:
    """Whether a parameter updated in place (still pending) is read by a differentiable op."""
    for a in args:
        b = a._buf
        if (b.__class__ is LazyValue and b.rebound and b.value is None
                and a._requires_grad and a._node is None):  # fmt: skip
            return True
    return False


def applies(prim, args: tuple, trace) -> bool:
    return trace is None and enabled()


def process(prim, args: tuple, params: dict, trace):
    """Record `prim` (None: it runs as without lazy mode, in the next mode)."""
    out = lazy_bind(prim, args, params)
    if out is not None:
        _device.propagate(args, out)
    return out


def lazy_bind(prim, args: tuple, params: dict):
    """Record `prim(*args, **params)`; None when it must run as without lazy mode."""
    if prim.name == "constant":
        return None
    for a in args:
        if a._trace is not None or getattr(a, "_dist", None) is not None:
            return None
    if not args and creation_placement() is not None:
        return None
    if _ops_pending >= _MAX_OPS or (args and is_grad_enabled() and _step_boundary(args)):
        lazy_sync()
    check = _VALUE_CHECKS.get(prim.name)
    if check is not None:
        check(*args, **params)
    out = _new_tensor(_node(prim, args, params))
    return record(prim.name, prim.vjp, args, params, out)


def _check_gather(x, index, *, dim) -> None:
    """The value check of gather's eager kernel (flow.ops.movement), at the call when
    the index is concrete (a pending index is not checked, as in compiled code)."""
    idx = index._buf
    if idx is not None and idx.__class__ is not LazyValue:
        idx = index._data  # (an array; a compiled call's result mapped)
    if isinstance(idx, np.ndarray):
        n = x.shape[dim]
        bad = idx[(idx < 0) | (idx >= n)]
        if bad.size:
            from flow.core.errors import op_error

            raise op_error("gather", f"index {bad.reshape(-1)[0]} is out of bounds for dim "
                           f"{dim} with size {n}", cls=IndexError)  # fmt: skip


_VALUE_CHECKS = {"gather": _check_gather}  # kernels that reject operand values


def _node(prim, args: tuple, params: dict) -> LazyValue:
    global _seq, _ops_pending
    frozen = tuple(sorted(params.items()))
    try:
        hash(frozen)
    except TypeError:
        frozen = _freeze(params)
    ikey = (prim, tuple((a._shape, a._dtype) for a in args), frozen)
    loc = _user_loc()
    result = _infer_cache.get(ikey)
    if result is None:
        result = _infer(prim, args, params, loc)
        if len(_infer_cache) > 20000:
            _infer_cache.clear()
        _infer_cache[ikey] = result
    node = LazyValue()
    node.prim, node.params, node.loc = prim, params, loc
    node.shape, node.dtype = result
    refs = []
    for a in args:
        b = a._buf
        if b.__class__ is LazyValue:
            if b.value is not None:
                b = b.value
                _captured.add(_base_id(b))
        else:
            if b.__class__ is not np.ndarray:  # a compiled call's result, not mapped yet
                b = a._data
            _captured.add(_base_id(b))
        refs.append(b)
    node.args = tuple(refs)
    dt = params.get("dtype") if prim.name == "full" else None
    if dt is not None and dt.is_floating_point:
        node.key = (prim.name, tuple(kv for kv in frozen if kv[0] != "value"))
        node.fvalue = params["value"]
    else:
        node.key, node.fvalue = (prim.name, frozen), _NO
    node.value, node.rebound, node.deferred, node.seq = None, False, False, _seq
    _seq += 1
    _ops_pending += 1
    counters["ops"] += 1
    return node


def _infer(prim, args, params, loc) -> tuple:
    from xdsl.utils.exceptions import VerifyException

    from flow.core.errors import op_error, strip_op_prefix

    try:
        ty = prim.op.infer([a._ir_type() for a in args], **prim.to_ir(params))
    except VerifyException as err:
        raise op_error(prim.name, strip_op_prefix(str(err)), loc) from None
    return tuple(ty.get_shape()), _dtypes.from_ir(ty.element_type)


def rebind(t, node: LazyValue) -> None:
    """Tensor `t` now holds pending `node`'s value (an in-place op under lazy mode)."""
    if (
        not node.args
        and node.prim.name in _CREATION
        and len(node.shape) <= 1
        and (not node.shape or node.shape[0] <= 64)
    ):  # a small tensor filled in place (a learning rate) stays a concrete input
        if node.value is None:
            node._set(_eval(node, ()))
        b = t._buf
        if isinstance(b, np.ndarray) and b.flags.writeable and b.shape == node.shape:
            before_host_write(b)
            b[...] = node.value
        else:
            t._buf = np.array(node.value)
        return
    node.rebound = True
    forget_dead()
    if isinstance(t._buf, np.ndarray) and id(t) not in _homes:
        _homes[id(t)] = t._buf  # written back into when computed, if others share it
    t._buf = node
    track(t)


def settle(key: int, value: np.ndarray, order=(), leaves=()) -> np.ndarray:
    """The array tensor `id == key` holds once its pending value is computed: after an
    in-place update, `value` written into its old array when something besides the flush
    (`order`'s nodes, its `leaves`) references that one — a caller of `from_numpy`, a
    kept `numpy()`, a view, a `detach()`, as eagerly — else `value` itself."""
    home = _homes.pop(key, None)
    if home is None or home.shape != value.shape or home.dtype != value.dtype:
        return value
    held = sum(a is home for n in order for a in n.args) + sum(a is home for a in leaves)
    if sys.getrefcount(home) - 2 - held > 0 and home.flags.writeable:
        home[...] = value
        return home
    return value


def alias(t, copy: bool):
    """A new tensor with pending `t`'s value: sharing its node (`detach`) or a copy (`clone`)."""
    if not copy:
        out = _new_tensor(t._buf)
        return out
    from flow import primitives as P

    return _new_tensor(_node(P.cast, (t,), {"dtype": t._dtype}))


def before_host_write(array: np.ndarray) -> None:
    """Called before numpy writes into `array`: pending work reading it is computed first."""
    if _pending_work() and _base_id(array) in _captured:
        lazy_sync()


register_host_write_hook(before_host_write)


def _eval(n: LazyValue, args) -> np.ndarray:
    """One node on numpy, as `bind` runs it eagerly."""
    with np.errstate(all="ignore"):
        out = np.asarray(n.prim.impl(*args, **n.params))
    expected = n.dtype.np_dtype
    return out if out.dtype == expected else out.astype(expected)
