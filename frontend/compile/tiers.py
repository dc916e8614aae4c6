"""Execution tiers: a program not compiled yet runs at once on the eager kernels while IREE
compiles it in the background; later calls switch to the compiled program once it is ready.

    program = tiers.program(lowered, target, sync=False, forget=...)
    program.call_flat(leaves)      # interpreted until the background compile is done

`program` picks the tier of a newly traced program: a module in the compile cache is loaded
at once; otherwise the program is interpreted (compile/interpret.py: the eager kernels, so
eager numerics) and one background thread lowers it and runs `iree-compile` as a child
process (at interpreter exit the queue is dropped and a running compile killed, and the
thread is waited for, so that nothing it holds outlives IREE's runtime). The first call after
the compile is done loads the module and runs compiled from then on. Parameters, optimizer
state and random-key counters live in the caller's tensors, which both tiers read and write
the same way (`Program.call_flat`), so they carry over exactly. A failed background compile
raises its `CompileError` at the next call, and forgets the program, so the call after it
starts over. `sync` (the `sync_compile` option of `flow.jit` / `nn.Graph`, else
`FLOW_SYNC_COMPILE=1`) compiles before the first call instead, as does a program with an op
the interpreter cannot run.

A global program tiers per rank: each rank interprets it on global values (gathered from
the shards at each call, so every interpreted call communicates) while its background thread
compiles the rank's partition (`Lowered.build_for_rank`, which communicates with no rank;
a global program is never loaded from the cache before it is lowered, so even a cached one
runs interpreted until its background lowering finds it). Every interpreted call begins
with one agreement over the world (`world_allgather` of each rank's compile state), so all
ranks switch to their compiled programs at the same call, and when any rank's compile
failed every rank raises (the failed one its `CompileError`) and forgets the program: no
rank is left waiting in a collective the others never enter. Hence `sync`, and the code
that calls a program, must be the same on every rank, as for any global program.
"""

from __future__ import annotations

import atexit
import os
import queue
import sys
import threading
from collections.abc import Callable

from flow.core import device as _device

from .interpret import Interpreter, NotInterpretable
from .stages import Compiled, Lowered, Program

__all__ = ["Interpreted", "Tiered", "program", "submit", "sync_compile"]


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
    if sync:
        return lowered.compile(target)
    tgt = lowered.execution_target(target)
    vmfb = None if lowered.is_global else lowered.cached_vmfb(tgt)
    if vmfb is not None:
        return Compiled(lowered, tgt.name, vmfb)
    try:
        interpreter = Interpreter(lowered)
    except NotInterpretable:
        return lowered.compile(target)
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
    calls the interpreter ran; `wait()` blocks until the compiled program runs. Of a global
    program, every rank switches at the same call (the module docstring), and `wait()` is
    collective: every rank calls it."""

    def __init__(self, lowered: Lowered, target, interpreter: Interpreter,
                 forget: Callable[[], None] | None, *, job: _Job | None = None,
                 fallback: Callable[[], _Job] | None = None):  # fmt: skip
        """`job`: a compile already under way that makes this program's module (a dynamic
        program shared by several sizes, compile/dynamic.py), else one is started;
        `fallback()` starts another compile when `job` fails, instead of raising."""
        super().__init__(lowered, target.name, interpreter)
        self.interpreted_calls = 0
        self.compiled: Compiled | None = None
        self._forget = forget
        self._fallback = fallback
        self._failed_ranks: list[int] = []  # of a global program: ranks whose compile failed
        if job is not None:
            self._job = job
        elif lowered.is_global:
            self._job = submit(lambda: lowered.build_for_rank(target, in_child=True))
        else:
            self._job = submit(lambda: (lowered.build_vmfb(target, in_child=True), None))

    @property
    def tier(self) -> str:
        return "interpreted" if self.compiled is None else "compiled"

    def call_flat(self, leaves: list):
        compiled = self.compiled
        if compiled is not None:
            return compiled.call_flat(leaves)
        if self._ready():
            self._switch()
            if self.compiled is not None:
                return self.compiled.call_flat(leaves)
        self.interpreted_calls += 1
        return super().call_flat(leaves)

    def wait(self) -> Compiled:
        """Block until the background compile is done and switch to it (raises its error)."""
        while self.compiled is None:
            self._job.done.wait()
            self._ready()
            self._switch()
        return self.compiled

    def _ready(self) -> bool:
        """Whether to switch now: this rank's compile is done; of a global program, every
        rank's is, or some rank's failed (one agreement over the world, on every rank)."""
        if not self.lowered.is_global:
            return self._job.done.is_set()
        from flow.distributed.boxing import world_allgather

        job = self._job
        state = "failed" if job.error is not None else "done" if job.done.is_set() else "busy"
        states = world_allgather(state, "all_gather (background compile states)")
        self._failed_ranks = [r for r, s in enumerate(states) if s == "failed"]
        return bool(self._failed_ranks) or all(s == "done" for s in states)

    def _switch(self) -> None:
        err = self._job.error
        if err is not None and self._fallback is not None:  # compile the fallback instead
            self._job, self._fallback = self._fallback(), None
            return
        failed = self._failed_ranks
        if err is None and failed:  # another rank's compile failed: every rank raises
            ranks = ", ".join(map(str, failed))
            err = RuntimeError(f"the background compile of {self.lowered.name} failed on rank"
                               f"{'s' if len(failed) > 1 else ''} {ranks} (its error is raised "
                               "there); every rank drops the program")  # fmt: skip
        if err is not None:
            if self._forget is not None:
                self._forget()
            if hasattr(err, "add_note"):
                err.add_note(f"(from the background compile of {self.lowered.name}, which ran "
                             f"interpreted for {self.interpreted_calls} call(s) meanwhile)")  # fmt: skip
            raise err
        vmfb, groups = self._job.result
        self.compiled = Compiled(self.lowered, self.target, vmfb, groups)
        self.vmfb = self.compiled.vmfb
        self.groups = groups
        self._fn = self.compiled.entry


class _Job:
    def __init__(self, work: Callable[[], tuple[bytes, list | None]]):
        self.work = work
        self.done = threading.Event()
        self.result: tuple[bytes, list | None] | None = None  # the module and its groups
        self.error: BaseException | None = None


_jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
_worker: threading.Thread | None = None
_worker_lock = threading.Lock()


_closing = False  # set at exit: queued compiles are dropped


def submit(work: Callable[[], tuple[bytes, list | None]]) -> _Job:
    """Queue `work` for the one background compile thread (compiles run one at a time: on a
    machine of few cores, two would slow each other and the interpreted steps)."""
    global _worker
    job = _Job(work)
    _jobs.put(job)
    with _worker_lock:
        if _worker is None:
            _worker = threading.Thread(target=_run_jobs, name="flow-compile", daemon=True)
            _worker.start()
            atexit.register(_stop_worker)
    return job


def _stop_worker() -> None:
    """At exit: drop the queued compiles, kill the running one's `iree-compile` and wait
    (boundedly) for the thread to let go of its program. A frame left running at
    finalization would keep the program's captured tensors, which may hold IREE device
    buffers, past the runtime's shutdown: IREE's bindings then report them leaked."""
    global _closing
    _closing = True
    compiler = sys.modules.get("flow.targets.compiler")
    if compiler is not None:
        compiler.stop_children()
    if _worker is not None:
        _jobs.put(_Job(lambda: (b"", None)))  # wakes a worker waiting for a job
        _worker.join(timeout=_EXIT_WAIT_S)


_EXIT_WAIT_S = 10.0  # the lowering of a large program, which does not stop when asked


def _run_jobs() -> None:
    while not _closing:
        job = _jobs.get()
        if _closing:
            job.error = RuntimeError("not compiled: the interpreter is exiting")
            job.done.set()
            break
        try:
            job.result = job.work()
        except BaseException as err:  # noqa: BLE001  (raised at the program's next call)
            job.error = err
        finally:
            job.work = None
            job.done.set()
