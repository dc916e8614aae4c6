"""Start an SPMD run: ``python -m flow.distributed.launch --nproc-per-node N script.py [args]``.

Runs ``mpiexec -n N`` from the ``mpich`` Python package, every rank running ``script.py`` with
``flow.env`` initialised first, so that an exception on one rank aborts them all. The
environment is passed through; when ranks are at least as many as the cores, ``FLOW_CPU_DRIVER``
is set to ``local-sync`` (unless already set) so ranks do not compete with each other's
``local-task`` worker threads, and BLAS (numpy's, which eager kernels and compiled GEMMs call)
gets the cores per rank as its thread count (``OPENBLAS_NUM_THREADS``, unless already set). The exit code is the largest of the ranks'.

Each rank runs under a supervisor (``flow.targets.faults``) that records on the run's board
(a file in a run directory made here, ``FLOW_RUN_DIR``) how its process ended. A rank that ends
before the others (an exit code, a signal, ``os._exit``) is reported as it happens, with its
code, and the ranks left are stopped; a failed run ends with a line on how each rank ended.

With OneFlow's multi-node options (``--nnodes``, ``--node_rank``, ``--master_addr``,
``--master_port``) it does what OneFlow's launcher does instead: it starts this node's processes
itself, each with OneFlow's variables, and they form one world with the other nodes' processes
(:func:`spawn`, ``flow.targets.rendezvous``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from flow.targets.mpi import LauncherNotFoundError, find_mpiexec

__all__ = ["Hosts", "LauncherNotFoundError", "find_mpiexec", "launch", "launch_command", "main",
           "spawn"]  # fmt: skip

# Variables of an enclosing MPI launch: a nested mpiexec must not inherit them.
_INHERITED_MPI_VARS = ("PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT", "PMI_ID", "PMI_HOSTNAME",
                       "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "MPIEXEC_HOSTNAME", "PMIX_RANK",
                       "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")  # fmt: skip


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Hosts:
    """Where the ranks run: mpiexec's ``-hosts`` list or ``-f`` host file (one ``host`` or
    ``host:N`` a line), started through ``launcher`` (mpiexec's ``-launcher``: ``ssh`` by
    default) or the command ``launcher_exec`` (``-launcher-exec``, called as ssh would be)."""

    hosts: tuple[str, ...] = ()
    hostfile: str | None = None
    launcher: str | None = None
    launcher_exec: str | None = None

    def __post_init__(self) -> None:
        if self.hosts and self.hostfile:
            raise ValueError("give either a host list or a host file, not both")
        if any(not h or "," in h or h != h.strip() for h in self.hosts):
            raise ValueError(f"host names must be non-empty, without spaces: {list(self.hosts)}")
        if self.hostfile is not None and not os.path.isfile(self.hostfile):
            raise FileNotFoundError(f"host file not found: {self.hostfile}")

    def slots(self) -> list[tuple[str, int]]:
        """(host, ranks it takes) in order; a host file's ``host:N`` takes N."""
        if not self.hostfile:
            return [(h, 1) for h in self.hosts]
        out = []
        with open(self.hostfile) as f:
            for line in f:
                entry = line.split("#", 1)[0].strip()
                if entry:
                    host, _, n = entry.partition(":")
                    if n and not n.isdigit():
                        raise ValueError(f"{self.hostfile}: {entry!r}: expected host or host:N")
                    out.append((host, int(n) if n else 1))
        if not out:
            raise ValueError(f"host file {self.hostfile} names no host")
        return out

    def mpiexec_args(self) -> list[str]:
        if not self.hosts and not self.hostfile:
            return []
        out = ["-hosts", ",".join(self.hosts)] if self.hosts else ["-f", self.hostfile or ""]
        out += ["-launcher", self.launcher or "ssh"]
        if self.launcher_exec:
            out += ["-launcher-exec", self.launcher_exec]
        return out


def launch_command(nproc: int, script: str, args: Sequence[str],
                   hosts: Hosts | None = None) -> list[str]:  # fmt: skip
    """The mpiexec command line that runs ``script`` on ``nproc`` ranks, each under its
    supervisor (standard library only, in isolated mode: it starts in milliseconds), on
    ``hosts`` (this machine when None)."""
    from flow.targets import faults

    bootstrap = "import sys; from flow.distributed.launch import _run_rank; sys.exit(_run_rank())"
    supervisor = [sys.executable, "-I", "-S", os.path.abspath(faults.__file__)]
    rank = [sys.executable, "-c", bootstrap, script, *args]
    where = hosts.mpiexec_args() if hosts else []
    return [find_mpiexec(), *where, "-n", str(nproc), *supervisor, *rank]


def launch_env(nproc: int, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the ranks get: ours, without an enclosing launch's MPI variables, with
    ``FLOW_CPU_DRIVER=local-sync`` when ranks would oversubscribe the cores (``nproc``: the
    ranks on one machine), and ``OPENBLAS_NUM_THREADS`` the cores per rank (unless set)."""
    from flow.targets import faults

    out = {k: v for k, v in (os.environ if env is None else env).items()}
    for var in (*_INHERITED_MPI_VARS, faults.RUN_DIR_ENV):  # the enclosing run's record too
        out.pop(var, None)
    if nproc >= _cpu_count() and not out.get("FLOW_CPU_DRIVER"):
        out["FLOW_CPU_DRIVER"] = "local-sync"
    if not out.get("OPENBLAS_NUM_THREADS"):  # numpy's BLAS (eager kernels, compiled GEMMs)
        out["OPENBLAS_NUM_THREADS"] = str(max(1, _cpu_count() // max(1, nproc)))
    return out


def launch(
    nproc: int,
    script: str,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    prog: str = "python -m flow.distributed.launch",
    hosts: Hosts | None = None,
) -> int:
    """Run ``script`` with ``args`` on ``nproc`` ranks (on ``hosts``: several machines) and
    return the largest exit code (non-zero whenever a rank ended before the others and the run
    was stopped); ``prog`` prefixes the launcher's reports on stderr."""
    from flow.targets import faults

    if nproc < 1:
        raise ValueError(f"the number of processes must be at least 1, got {nproc}")
    if not os.path.isfile(script):
        raise FileNotFoundError(f"script not found: {script}")
    machines = len(hosts.slots()) if hosts is not None else 0
    per_host = -(-nproc // machines) if machines else nproc  # ranks on one machine, at most
    run_dir = tempfile.mkdtemp(prefix="flow-run-")
    try:
        board = faults.Board.create(run_dir, nproc)
        ranks_env = {**launch_env(per_host, env), faults.RUN_DIR_ENV: run_dir}
        cmd = launch_command(nproc, script, args, hosts)
        proc = subprocess.Popen(cmd, env=ranks_env)
        try:
            with _forward_sigterm([proc]):
                return _Monitor(proc, board, prog).run()
        except KeyboardInterrupt:
            # mpiexec forwards the signal to every rank and cleans them up.
            proc.send_signal(signal.SIGINT)
            try:
                return proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.terminate()
                return proc.wait()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@contextlib.contextmanager
def _forward_sigterm(procs: Sequence[subprocess.Popen]) -> Iterator[None]:
    """While the run lasts, SIGTERM to the launcher goes to its children (mpiexec, which stops
    its ranks, or the ranks it started itself), so killing the launcher leaves no rank behind;
    outside the main thread, nothing."""
    try:
        previous = signal.signal(signal.SIGTERM, lambda sig, _frame: _signal_all(procs, sig))
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Monitor:
    """Watches mpiexec and the board: reports the first rank that ends before the others,
    stops the rest if mpiexec does not within ``GRACE_S``, and sums up a failed run."""

    POLL_S = 0.1
    GRACE_S = 3.0

    def __init__(self, proc: subprocess.Popen, board: Any, prog: str):
        from flow.targets import faults

        self.proc, self.board, self.prog, self.faults = proc, board, prog, faults
        self.fault: int | None = None  # the rank reported as ending the run
        self.stop_at: float | None = None

    def say(self, text: str) -> None:
        print(f"{self.prog}: {text}", file=sys.stderr, flush=True)

    def run(self) -> int:
        stopped = 0
        while True:
            try:
                rc = self.proc.wait(timeout=self.POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if self.fault is None:
                self._check()
            elif self.stop_at is not None and time.monotonic() > self.stop_at:
                stopped += 1
                self._stop(signal.SIGTERM if stopped == 1 else signal.SIGKILL)
                self.stop_at = time.monotonic() + self.GRACE_S
        if self.fault is None:
            self._check(final=True)
        code = self.exit_code(rc)
        if code != 0:
            self.say(f"the run failed (exit code {code}): {self._summary()}")
        return code

    def _events(self) -> list[tuple[int, int, bool]]:
        """(time, rank, abnormal) for each rank that aborted or whose process ended. An exit
        with code 0 is normal even without finishing the script (``os._exit(0)`` to skip
        teardown): a peer left waiting for it says so, and aborts the run."""
        b, f = self.board, self.faults
        out = []
        for r in range(b.size):
            state = b.word(r, f._STATE)
            if state == f.ABORTING:
                out.append((b.word(r, f._TIME), r, True))
            elif b.word(r, f._ENDED):
                status = b.word(r, f._END_STATUS)
                out.append((b.word(r, f._END_TIME), r, status != 0))
        return sorted(out)

    def exit_code(self, rc: int) -> int:
        """The run's exit code: the reported rank's (128 + N for signal N), else mpiexec's."""
        b, f, r = self.board, self.faults, self.fault
        if r is None:
            return rc
        if b.word(r, f._STATE) == f.ABORTING:
            return b.word(r, f._CODE) or 1
        status = b.word(r, f._END_STATUS) if b.word(r, f._ENDED) else rc
        return 128 - status if status < 0 else (status or rc or 1)

    def _check(self, final: bool = False) -> None:
        for _, r, abnormal in self._events():
            if not abnormal:
                continue
            self.fault = r
            if not final:
                ending = self.board.ending(r, ago=False)
                self.say(f"rank {r} {ending}; stopping the other ranks")
                self.stop_at = time.monotonic() + self.GRACE_S
            return

    def _stop(self, sig: int) -> None:
        """Signal mpiexec (which signals its ranks) and every rank process still running."""
        try:
            self.proc.send_signal(sig)
        except ProcessLookupError:
            pass
        for r in range(self.board.size):
            pid = self.board.word(r, self.faults._PID)
            if pid > 0 and not self.board.word(r, self.faults._ENDED):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass

    def _summary(self) -> str:
        """How each rank ended, in rank order, with the reason a rank gave for aborting."""
        parts = []
        for r in range(self.board.size):
            ending = self.board.ending(r, ago=False) or "was stopped with the run"
            why = self.faults.reason(os.path.dirname(self.board.path), r)
            parts.append(f"rank {r} {ending}" + (f" ({why})" if why else ""))
        return "; ".join(parts)


ONEFLOW_DEFAULT_PORT = 29500


def spawn(
    nproc_per_node: int,
    script: str,
    args: Sequence[str] = (),
    nnodes: int = 1,
    node_rank: int = 0,
    master_addr: str = "127.0.0.1",
    master_port: int = ONEFLOW_DEFAULT_PORT,
    env: dict[str, str] | None = None,
    prog: str = "python -m flow.distributed.launch",
) -> int:
    """OneFlow's launcher: start this node's ``nproc_per_node`` processes of ``script``, each
    with OneFlow's variables (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``,
    ``LOCAL_RANK``), from which they form one world with the other nodes' processes
    (``flow.targets.rendezvous``). The largest exit code; a rank that fails stops the others."""
    if nproc_per_node < 1 or nnodes < 1:
        raise ValueError(f"--nproc_per_node and --nnodes must be at least 1, got "
                         f"{nproc_per_node} and {nnodes}")  # fmt: skip
    if not 0 <= node_rank < nnodes:
        raise ValueError(f"--node_rank {node_rank} is outside [0, {nnodes}) (--nnodes {nnodes})")
    if not 0 < master_port < 65536:
        raise ValueError(f"--master_port {master_port}: expected a port in [1, 65535]")
    if not os.path.isfile(script):
        raise FileNotFoundError(f"script not found: {script}")
    base = launch_env(nproc_per_node, env)
    base.update(MASTER_ADDR=master_addr, MASTER_PORT=str(master_port),
                WORLD_SIZE=str(nnodes * nproc_per_node))  # fmt: skip
    procs = []
    for local in range(nproc_per_node):
        rank = node_rank * nproc_per_node + local
        ranks_env = {**base, "RANK": str(rank), "LOCAL_RANK": str(local)}
        procs.append((rank, subprocess.Popen([sys.executable, "-u", script, *args], env=ranks_env)))
    try:
        with _forward_sigterm([p for _, p in procs]):
            return _wait_all(procs, prog)
    except KeyboardInterrupt:
        _signal_all([p for _, p in procs], signal.SIGINT)
        return max(_code(p.wait()) for _, p in procs) or 130


def _code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


def _signal_all(procs: Sequence[subprocess.Popen], sig: int) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                p.send_signal(sig)
            except ProcessLookupError:
                pass


def _wait_all(procs: list[tuple[int, subprocess.Popen]], prog: str) -> int:
    """Wait for every rank; the first to fail is reported and the others are stopped
    (SIGTERM, then SIGKILL after ``_Monitor.GRACE_S``)."""
    failed: tuple[int, int] | None = None
    stop_at = None
    while any(p.poll() is None for _, p in procs):
        time.sleep(_Monitor.POLL_S)
        if failed is None:
            for rank, p in procs:
                rc = p.poll()
                if rc:
                    failed = (rank, _code(rc))
                    print(f"{prog}: rank {rank} exited with code {failed[1]}; stopping the "
                          "other ranks", file=sys.stderr, flush=True)  # fmt: skip
                    _signal_all([q for _, q in procs], signal.SIGTERM)
                    stop_at = time.monotonic() + _Monitor.GRACE_S
                    break
        elif stop_at is not None and time.monotonic() > stop_at:
            _signal_all([q for _, q in procs], signal.SIGKILL)
            stop_at = None
    if failed is not None:
        return failed[1]
    return max(_code(p.returncode) for _, p in procs)


def _run_rank() -> int:
    """The body of every rank: ``argv`` is ``[-c, script, args...]``."""
    script, *args = sys.argv[1:]
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    from flow.distributed import env  # initialises MPI and installs the abort-on-exception hook
    from flow.targets import faults

    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None or code == 0:
            faults.finished(0, how=1)  # a peer waiting for this rank is told at once
            return 0
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        env.abort(code, f"sys.exit({exc.code!r})")  # other ranks may be waiting for this one
    except BaseException as exc:  # noqa: BLE001 -- reported like Python would, then all abort
        tb = exc.__traceback__
        target = os.path.abspath(script)
        while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
            tb = tb.tb_next  # the traceback starts at the script, as with `python script.py`
        sys.excepthook(type(exc), exc, tb or exc.__traceback__)
        return 1
    faults.finished(0, how=0)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flow.distributed.launch", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--nproc-per-node", "--nproc_per_node", type=int, default=1, metavar="N",
        help="number of processes (ranks) to start",
    )  # fmt: skip
    oneflow = parser.add_argument_group(
        "OneFlow's multi-node options", "with any of these, this node's processes are started "
        "with OneFlow's variables (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK) and "
        "form one world with the other nodes', instead of running under mpiexec",
    )  # fmt: skip
    oneflow.add_argument("--nnodes", type=int, default=None, help="number of nodes (1)")
    oneflow.add_argument("--node_rank", "--node-rank", type=int, default=None,
                         help="this node's index (0)")  # fmt: skip
    oneflow.add_argument("--master_addr", "--master-addr", default=None,
                         help="the address of node 0 (127.0.0.1)")  # fmt: skip
    oneflow.add_argument("--master_port", "--master-port", type=int, default=None,
                         help=f"a free port on node 0 ({ONEFLOW_DEFAULT_PORT})")  # fmt: skip
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="script.py [args]",
        help="the Python script every rank runs, and its arguments",
    )  # fmt: skip
    ns = parser.parse_args(argv)
    if not ns.command:
        parser.error("missing the script to run")
    try:
        multi = (ns.nnodes, ns.node_rank, ns.master_addr, ns.master_port)
        if any(v is not None for v in multi):
            return spawn(
                ns.nproc_per_node, ns.command[0], ns.command[1:], nnodes=ns.nnodes or 1,
                node_rank=ns.node_rank or 0, master_addr=ns.master_addr or "127.0.0.1",
                master_port=ns.master_port or ONEFLOW_DEFAULT_PORT, prog=parser.prog,
            )  # fmt: skip
        return launch(ns.nproc_per_node, ns.command[0], ns.command[1:], prog=parser.prog)
    except (LauncherNotFoundError, FileNotFoundError, ValueError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
