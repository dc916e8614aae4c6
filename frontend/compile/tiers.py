"""Execution tiers: a program not compiled yet runs at once on the eager kernels while IREE
compiles it in the background; later calls switch to the compiled program once it is ready.

    program = tiers.program(lowered, target, sync=False, forget=...)
    program.call_flat(leaves)      # interpreted until the background compile is done

`program` picks the tier of a newly traced program: a module in the compile cache is loaded
at once; otherwise the program is interpreted (compile/interpret.py: the eager kernels, so
eager numerics) and one background thread lowers it and runs `iree-compile` as a child
process (which the interpreter's exit stops; nobody waits for it). The first call after
the compile is done loads the module and runs compiled from then on. Parameters, optimizer
state and random-key counters live in the caller's tensors, which both tiers read and write
the same way (`Program.call_flat`), so they carry over exactly. A failed background compile
raises its `CompileError` at the next call, and forgets the program, so the call after it
starts over. `sync` (the `sync_compile` option of `flow.jit` / `nn.Graph`, else
`FLOW_SYNC_COMPILE=1`) compiles before the first call instead, as does a global program
(its ranks must agree on when to switch) and one with an op no primitive emitted.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

from flow.core import device as _device

from .interpret import Interpreter, NotInterpretable
from .stages import Compiled, Lowered, Program

__all__ = ["Interpreted", "Tiered", "program", "sync_compile"]


def sync_compile(option: bool | None = None) -> bool:
    """Whether programs compile before their first call: `option` when given (a `jit` /
    `nn.Graph` setting), else `FLOW_SYNC_COMPILE` (off by default)."""
    if option is not None:
        return bool(option)
    value = os.environ.get("FLOW_SYNC_COMPILE", "").strip().lower()
    return value not in ("", "0", "false", "off", "no")


def program(lowered: Lowered, target: str, *, sync: bool, once: bool = False,
            forget: Callable[[], None] | None = None) -> Program:  # fmt: skip
    """The runnable form of a newly traced `lowered` for `target` (see the module docstring).
    `once`: the program runs a single time (a first step that creates optimizer state), so
    without `sync` it is interpreted and never compiled. `forget` drops the program from
    its cache when its background compile fails."""
    if sync or lowered.is_global:
        return lowered.compile(target)
    tgt = lowered.execution_target(target)
    vmfb = lowered.cached_vmfb(tgt)
    if vmfb is not None:
        return Compiled(lowered, tgt.name, vmfb)
    try:
        interpreter = Interpreter(lowered)
    except NotInterpretable:
        return Compiled(lowered, tgt.name, lowered.build_vmfb(tgt))
    if once:
        return Interpreted(lowered, tgt.name, interpreter)
    return Tiered(lowered, tgt, interpreter, forget)


class Interpreted(Program):
    """A program run by the interpreter only."""

    def __init__(self, lowered: Lowered, target: str, interpreter: Interpreter):
        self.lowered = lowered
        self.target = target
        self.device = _device.of_target(target)
        self._fn = interpreter


class Tiered(Interpreted):
    """Interpreted until its background compile is done, compiled from the next call on.

    `tier` says which runs now ("interpreted" or "compiled"), `interpreted_calls` how many
    calls the interpreter ran; `wait()` blocks until the compiled program runs."""

    def __init__(self, lowered: Lowered, target, interpreter: Interpreter,
                 forget: Callable[[], None] | None):  # fmt: skip
        super().__init__(lowered, target.name, interpreter)
        self.interpreted_calls = 0
        self.compiled: Compiled | None = None
        self._forget = forget
        self._job = _submit(lambda: lowered.build_vmfb(target, in_child=True))

    @property
    def tier(self) -> str:
        return "interpreted" if self.compiled is None else "compiled"

    def call_flat(self, leaves: list):
        if self.compiled is None and self._job.done.is_set():
            self._switch()
        if self.compiled is None:
            self.interpreted_calls += 1
        return super().call_flat(leaves)

    def wait(self) -> Compiled:
        """Block until the background compile is done and switch to it (raises its error)."""
        if self.compiled is None:
            self._job.done.wait()
            self._switch()
        return self.compiled

    def _switch(self) -> None:
        if self._job.error is not None:
            if self._forget is not None:
                self._forget()
            err = self._job.error
            if hasattr(err, "add_note"):
                err.add_note(f"(from the background compile of {self.lowered.name}, which ran "
                             f"interpreted for {self.interpreted_calls} call(s) meanwhile)")  # fmt: skip
            raise err
        self.compiled = Compiled(self.lowered, self.target, self._job.result)
        self.vmfb = self.compiled.vmfb
        self._fn = self.compiled.entry


class _Job:
    def __init__(self, work: Callable[[], bytes]):
        self.work = work
        self.done = threading.Event()
        self.result: bytes | None = None
        self.error: BaseException | None = None


_jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
_worker: threading.Thread | None = None
_worker_lock = threading.Lock()


def _submit(work: Callable[[], bytes]) -> _Job:
    """Queue `work` for the one background compile thread (compiles run one at a time: on a
    machine of few cores, two would slow each other and the interpreted steps)."""
    global _worker
    job = _Job(work)
    _jobs.put(job)
    with _worker_lock:
        if _worker is None:
            _worker = threading.Thread(target=_run_jobs, name="flow-compile", daemon=True)
            _worker.start()
    return job


def _run_jobs() -> None:
    while True:
        job = _jobs.get()
        try:
            job.result = job.work()
        except BaseException as err:  # noqa: BLE001  (raised at the program's next call)
            job.error = err
        finally:
            job.work = None
            job.done.set()
