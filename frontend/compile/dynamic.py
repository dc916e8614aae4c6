"""Shape polymorphism: one compiled program serves every size of a dim that varies.

A staged function (`flow.jit`, `nn.Graph`) keys its programs by the exact shapes of a call
(compile/staging.py). Calls whose keys differ only in some sizes form a `Family`. As with
torch.compile's automatic dynamic shapes, the first size compiles a static program; at the
second distinct size the two traces, lowered, are generalized into one program with those
dims dynamic (lowering/dynamic_dims.py), which is compiled once and serves that size and
every later one. A dim the user marks (`dynamic=` of `flow.jit` / `nn.Graph`) is dynamic
from the first call: the function is traced once more at a companion size (`n + 1`), and
the first call already uses the dynamic program.

Every new size is still traced and lowered (milliseconds next to a compile), and uses the
dynamic program only if its own lowered program is the dynamic one at its sizes
(`Dynamic.matches`); otherwise it compiles a static program of its own. So Python code that
branches on a size, or a size the program depends on otherwise than linearly, never gets a
wrong answer from the dynamic program. Two traces that are not one program at two sizes
leave the family static (a marked one warns, naming why), as does a dynamic program IREE
cannot compile. Global programs stay static: a rank's shard size is not linear in the global
size its program also uses (a mean's divisor). So do cuda and rocm, where no dynamic program
has run yet.

The dynamic program compiles like any other (compile/tiers.py): in the background while the
calls of its sizes run interpreted, or first with `sync_compile`; it is kept in the compile
cache under its own IREE input, so a later process finds it after tracing two sizes again.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from flow.core import tensor as _tensor
from flow.core.pytree import unflatten

from .signature import is_array
from .stages import Compiled, Lowered, Program

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

__all__ = ["Family", "family_key", "marked_dims", "parse_dynamic"]

# The targets a dynamic program runs on: IREE's cpu and SPIR-V codegen take dynamic dims
# throughout (vulkan checked on lavapipe, tests/frontend/test_dynamic.py).
TARGETS = ("cpu", "vulkan")


def parse_dynamic(option, what: str):
    """The `dynamic=` option of `what`: None (automatic), False (never), or the marked dims:
    a tuple of dims of every array argument, or a dict argument name -> tuple of dims."""
    if option is None or option is False:
        return option
    if option is True:
        raise TypeError(f"{what}: dynamic=True does not say which dims vary; name them "
                        "(dynamic=0 for the first dim of every argument, or "
                        "dynamic={'x': (0, 1)}), or leave dynamic=None to make a dim "
                        "dynamic once a second size of it is seen")  # fmt: skip
    if isinstance(option, dict):
        return {str(name): _dims(dims, what, f"dynamic[{name!r}]")
                for name, dims in option.items()}  # fmt: skip
    return _dims(option, what, "dynamic")


def _dims(dims, what: str, where: str) -> tuple[int, ...]:
    items = (dims,) if isinstance(dims, int) else dims
    try:
        items = tuple(items)
    except TypeError:
        items = (dims,)
    if not items or not all(isinstance(d, int) and not isinstance(d, bool) for d in items):
        raise TypeError(f"{what}: {where} must be a dim (int) or a tuple of dims, got {dims!r}")
    return items


def marked_dims(spec, names: list[str], leaves: list, what: str) -> dict[int, tuple[int, ...]]:
    """The marked dims of a call: leaf index -> dims (non-negative), from `spec` (see
    `parse_dynamic`); `names` holds each leaf's argument name. A dict entry must name an
    argument and dims it has; a plain tuple applies to every array argument with those dims."""
    if not spec:
        return {}
    out: dict[int, tuple[int, ...]] = {}
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - set(names))
        if unknown:
            raise TypeError(f"{what}: dynamic= names {', '.join(map(repr, unknown))}, which "
                            f"is no argument (arguments: {', '.join(dict.fromkeys(names))})")  # fmt: skip
    for i, (x, name) in enumerate(zip(leaves, names)):
        if not is_array(x):
            continue
        rank = len(x.shape)
        if isinstance(spec, dict):
            if name not in spec:
                continue
            bad = [d for d in spec[name] if not -rank <= d < rank]
            if bad:
                raise IndexError(f"{what}: dynamic= marks dim {bad[0]} of argument {name!r}, "
                                 f"which has {rank} dim{'s' if rank != 1 else ''}")  # fmt: skip
            dims = spec[name]
        else:
            dims = tuple(d for d in spec if -rank <= d < rank)
        if dims:
            out[i] = tuple(sorted({d % rank for d in dims}))
    return out


def family_key(key: tuple) -> tuple:
    """The key of a call with the sizes of its arrays left out (their ranks kept)."""
    sig, *rest = key
    return (tuple((e[0], len(e[1]), *e[2:]) if isinstance(e, tuple) and e[:1] == ("T",) else e
                  for e in sig), *rest)  # fmt: skip


def _linalg(lowered: Lowered) -> ModuleOp:
    """`lowered` lowered to IREE input (a clone: the traced module is left as it is)."""
    from flow.lowering import run_pipeline

    return run_pipeline(lowered.module.clone(), "flow-to-iree-input")


class Family:
    """The programs of calls that differ only in sizes: at most one dynamic program."""

    def __init__(self, what: str):
        self.what = what
        self.first: Lowered | None = None  # the first size's program, while static
        self._first_linalg: ModuleOp | None = None
        self.dynamic = None  # lowering.dynamic_dims.Dynamic, once generalized
        self.refused: str | None = None  # why this family stays static
        self.vmfb: bytes | None = None
        self._job = None  # the dynamic program's background compile (tiers._Job)
        self._text: str | None = None

    def program(self, lowered: Lowered, target, *, sync: bool, marked: dict,
                leaves: list, retrace: Callable | None,
                forget: Callable[[], None]) -> Program | None:  # fmt: skip
        """The program of the new size `lowered` (compiled for `target`, an execution
        target) when the family's dynamic program serves it, else None (compile it static)."""
        if self.refused is not None or target.name not in TARGETS:
            return None
        if self.dynamic is None and self.first is None and not (marked and retrace is not None):
            self.first = lowered  # static: a second size makes the family dynamic
            return None
        from flow.lowering.dynamic_dims import NotDynamic, generalize

        if self.dynamic is None:
            try:
                if self.first is None:
                    pair = _companions(lowered, leaves, marked, retrace, self.what)
                else:
                    if self._first_linalg is None:
                        self._first_linalg = _linalg(self.first)
                    pair = (self._first_linalg, _linalg(lowered))
                self.dynamic = generalize(*pair)
            except NotDynamic as err:
                self._refuse(str(err), warn=bool(marked))
                return None
            self.first = self._first_linalg = None
            self._text = None
        if not self.dynamic.matches(_linalg(lowered)):
            return None
        return self._bind(lowered, target, sync, forget)

    def _refuse(self, why: str, *, warn: bool) -> None:
        self.refused = why
        self.first = self._first_linalg = self.dynamic = None
        if warn:
            warnings.warn(f"{self.what}: the marked dims cannot be dynamic ({why}); each size "
                          "compiles a program of its own", stacklevel=5)  # fmt: skip

    def _iree_text(self) -> str:
        if self._text is None:
            from flow.lowering import to_iree_text

            self._text = to_iree_text(self.dynamic.module)
        return self._text

    def _build(self, target, *, in_child: bool) -> bytes:
        from flow.targets import compile_mlir

        from . import progress

        with progress.status(f"compiling {self.what} with dynamic dims for {target.name}") \
                if not in_child else contextlib.nullcontext():  # fmt: skip
            return compile_mlir(self._iree_text(), target, in_child=in_child)

    def _cached(self, target) -> bytes | None:
        from flow.targets import cache, compile_flags

        if cache.cache_dir() is None:
            return None
        return cache.lookup(cache.cache_key(self._iree_text(), target.name,
                                            compile_flags(target)))  # fmt: skip

    def _bind(self, lowered: Lowered, target, sync: bool, forget) -> Program | None:
        """`lowered`'s program on the dynamic module: compiled, compiling, or None when
        IREE rejects the dynamic module (the family then stays static)."""
        from flow.targets import CompileError

        from . import tiers
        from .interpret import Interpreter, NotInterpretable

        job = self._job
        if self.vmfb is None and job is not None and job.done.is_set() and job.error is None:
            self.vmfb = job.result[0]
        if self.vmfb is None:
            self.vmfb = self._cached(target)
        if self.vmfb is None and not sync and self._job is None:
            self._job = tiers.submit(lambda: (self._build(target, in_child=True), None))
        interpreter = None
        if self.vmfb is None and not sync:
            try:
                interpreter = Interpreter(lowered)
            except NotInterpretable:
                pass
        if self.vmfb is None and interpreter is None:
            try:
                self.vmfb = self._job_result() if self._job is not None else \
                    self._build(target, in_child=False)  # fmt: skip
            except CompileError as err:
                self._refuse(f"IREE rejected the dynamic program: {err}", warn=False)
                return None
        if self.vmfb is not None:
            return Compiled(lowered, target.name, self.vmfb)
        return tiers.Tiered(lowered, target, interpreter, forget, job=self._job,
                            fallback=self._fallback(lowered, target))  # fmt: skip

    def _job_result(self) -> bytes:
        self._job.done.wait()
        if self._job.error is not None:
            raise self._job.error
        return self._job.result[0]

    def _fallback(self, lowered: Lowered, target) -> Callable:
        """What a tiered size compiles instead when the dynamic compile fails: its own
        static program (the family stays static from then on)."""
        from . import tiers

        def static():
            if self._job is not None and self._job.error is not None:
                self._refuse(f"IREE rejected the dynamic program: {self._job.error}", warn=False)
                self._job = None
            return tiers.submit(lambda: (lowered.build_vmfb(target, in_child=True), None))

        return static


def _companions(lowered: Lowered, leaves: list, marked: dict, retrace: Callable,
                what: str) -> tuple:  # fmt: skip
    """The lowered programs to generalize a marked family from at its first call: this
    call's, and the function traced with every marked dim of size `n` at `n + 1` (a size of
    0 or 1 may trace differently, so it is not used: the companions are then sizes 2, 3)."""
    small = any(x.shape[d] < 2 for i, x in ((i, leaves[i]) for i in marked) for d in marked[i])
    if small:
        return (_linalg(_retraced(lowered, leaves, marked, retrace, what, 2)),
                _linalg(_retraced(lowered, leaves, marked, retrace, what, 3)))  # fmt: skip
    return (_linalg(lowered), _linalg(_retraced(lowered, leaves, marked, retrace, what, None)))


def _retraced(lowered: Lowered, leaves: list, marked: dict, retrace: Callable, what: str,
              size: int | None) -> Lowered:  # fmt: skip
    """The function traced on zeros of this call's shapes with the marked dims at `size`
    (None: one more than their size here)."""
    from flow.ops.construct import zeros

    fake = list(leaves)
    for i, dims in marked.items():
        x = leaves[i]
        shape = list(x.shape)
        for d in dims:
            shape[d] = size if size is not None else shape[d] + 1
        fake[i] = zeros(*shape, dtype=x.dtype) if isinstance(x, _tensor.Tensor) else \
            np.zeros(shape, x.dtype)  # fmt: skip
    try:
        return retrace(tuple(unflatten(lowered.in_tree, fake)))
    except Exception as err:  # noqa: BLE001  (the user's function, at a size it refuses)
        raise ValueError(f"{what}: dynamic= marks dims that cannot vary: the function fails "
                         f"when traced at another size of them ({type(err).__name__}: {err})"
                         ) from err  # fmt: skip
