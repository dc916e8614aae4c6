"""One MPI world from OneFlow's launcher variables, for processes that no MPI launcher started.

``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK`` and ``LOCAL_RANK``, as
``python -m oneflow.distributed.launch``, torchrun, Slurm or Kubernetes set them, describe a world
whose processes were started one by one, on one machine or many. Each process gets mpich's own
process manager first (hydra's ``mpiexec`` in its singleton mode, :func:`start_process_manager`):
mpich 5.0 names every process without one "singinit", and refuses to connect two processes of the
same name. Then MPI's dynamic connections join them (:func:`form_world`): rank 0 opens an MPI port
and tells each rank its name over TCP at ``MASTER_ADDR:MASTER_PORT`` (the name is all that travels
outside MPI), and the ranks join one at a time in RANK order (``MPI_Comm_accept`` on the world
grown so far, ``MPI_Comm_connect`` from the rank joining, ``MPI_Intercomm_merge``). Every wait is
bounded by ``FLOW_COLLECTIVE_TIMEOUT``. Standard library only; the caller passes ``mpi4py.MPI``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["ENV_VARS", "EnvWorld", "WorldError", "form_world", "from_environ",
           "start_process_manager"]  # fmt: skip

ENV_VARS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK")
"""OneFlow's (and PyTorch's) launcher variables."""

PMI_VARS = ("PMI_FD", "PMI_RANK", "PMI_SIZE")
"""What :func:`start_process_manager` sets for MPI's initialisation (removed after it)."""

_HELLO = "flow-world"


class WorldError(RuntimeError):
    """The launcher variables do not describe one world, or its ranks did not all arrive."""


@dataclass(frozen=True)
class EnvWorld:
    """The world the variables describe: rank 0 listens at ``addr:port``."""

    addr: str
    port: int
    size: int
    rank: int
    local_rank: int | None  # None: LOCAL_RANK not set (then MPI tells the ranks of a node)


def _int(env: Mapping[str, str], name: str, low: int, high: int | None = None) -> int:
    raw = env.get(name, "").strip()
    bound = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
    try:
        value = int(raw)
    except ValueError:
        raise WorldError(f"{name}={raw!r}: expected {bound}") from None
    if value < low or (high is not None and value > high):
        raise WorldError(f"{name}={value}: expected {bound}")
    return value


def from_environ(environ: Mapping[str, str] | None = None) -> EnvWorld | None:
    """The world of OneFlow's launcher variables; None when ``WORLD_SIZE`` is unset or 1 (a world
    of one process, as without a launcher). Raises :class:`WorldError` naming what is missing or
    inconsistent."""
    env = os.environ if environ is None else environ
    if not env.get("WORLD_SIZE", "").strip():
        if env.get("RANK", "").strip() not in ("", "0"):
            raise WorldError(f"RANK={env['RANK']} is set but WORLD_SIZE is not: set both")
        return None
    size = _int(env, "WORLD_SIZE", 1)
    if size == 1:
        if env.get("RANK", "").strip() not in ("", "0"):
            raise WorldError(f"RANK={env['RANK']} is outside the world of WORLD_SIZE=1")
        return None
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT", "RANK") if not env.get(v, "").strip()]
    if missing:
        raise WorldError(
            f"WORLD_SIZE={size} asks for a world of {size} processes, but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not set: every process needs MASTER_ADDR, "
            "MASTER_PORT, WORLD_SIZE and RANK (LOCAL_RANK optional)"
        )
    rank = _int(env, "RANK", 0)
    if rank >= size:
        raise WorldError(f"RANK={rank} is outside the world of WORLD_SIZE={size}: "
                         f"expected 0 <= RANK < {size}")  # fmt: skip
    port = _int(env, "MASTER_PORT", 1, 65535)
    local = _int(env, "LOCAL_RANK", 0) if env.get("LOCAL_RANK", "").strip() else None
    if local is not None and local > rank:
        raise WorldError(f"LOCAL_RANK={local} is larger than RANK={rank}: expected the rank "
                         "among the processes of this node")  # fmt: skip
    return EnvWorld(env["MASTER_ADDR"].strip(), port, size, rank, local)


# ---------------------------------------------------------------------------------------------
# mpich's process manager for this process.


def start_process_manager(mpiexec: str, timeout: float) -> subprocess.Popen:
    """Before MPI initialises: start hydra's ``mpiexec`` as this process's process manager, as
    mpich does itself for a singleton that needs one (``mpiexec -pmi_args``, then the
    ``singinit`` handshake), and hand MPI the connection (``PMI_FD``). The manager ends when this
    process does."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(timeout or None)
        port = listener.getsockname()[1]
        # Process id -1: the manager sends this process no signals. With its id, the manager
        # kills this process's whole process group (the launcher, the other ranks) when this
        # process ends without finalising MPI; flow's launchers stop the ranks themselves.
        argv = [mpiexec, "-pmi_args", str(port), "default_interface", "default_key", "-1"]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        try:
            conn, _ = listener.accept()
        except OSError as err:
            proc.kill()
            raise WorldError(f"mpich's process manager ({mpiexec}) did not connect back: {err}")
    finally:
        listener.close()
    with conn:
        conn.settimeout(timeout or None)
        reader = conn.makefile("rb")
        hello = reader.readline()
        if not hello.startswith(b"cmd=singinit"):
            raise WorldError(f"unexpected greeting from mpich's process manager: {hello!r}")
        conn.sendall(b"cmd=singinit pmi_version=1 pmi_subversion=1 stdio=no authtype=none\n")
        info = reader.readline()
        if b"versionok=yes" not in info:
            raise WorldError(f"mpich's process manager refused this process: {info!r}")
        reader.close()
        conn.setblocking(True)  # the timeout made the descriptor non-blocking; MPI reads it
        fd = os.dup(conn.fileno())  # not inherited by child processes
    os.environ.update({"PMI_FD": str(fd), "PMI_RANK": "0", "PMI_SIZE": "1"})
    return proc


def _die_with_parent() -> None:
    """In the manager's process: end it when this process ends, however it ends (a normal end
    finalises MPI, which ends the manager anyway)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass


# ---------------------------------------------------------------------------------------------
# Forming the world.


def form_world(MPI: Any, spec: EnvWorld, timeout: float) -> Any:
    """The intracommunicator of the ``spec.size`` processes, where this one has rank
    ``spec.rank``; ``timeout`` (seconds, 0: none) bounds the whole of it."""
    deadline = time.monotonic() + timeout if timeout else None
    if spec.rank == 0:
        world = _host(MPI, spec, deadline)
    else:
        world = _join(MPI, spec, deadline)
    if (world.rank, world.size) != (spec.rank, spec.size):
        raise WorldError(f"joined as rank {world.rank} of {world.size}, expected RANK="
                         f"{spec.rank} of WORLD_SIZE={spec.size}")  # fmt: skip
    return world


def _where(spec: EnvWorld) -> str:
    return f"MASTER_ADDR:MASTER_PORT={spec.addr}:{spec.port}"


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


def _host(MPI: Any, spec: EnvWorld, deadline: float | None) -> Any:
    """Rank 0: wait for every other rank at MASTER_PORT, then let them join in RANK order."""
    try:
        server = socket.create_server(("", spec.port))
    except OSError as err:
        raise WorldError(
            f"rank 0 cannot listen on MASTER_PORT={spec.port}: {err.strerror or err} (another "
            "process, or a second process with RANK=0, holds the port)"
        ) from None
    peers: dict[int, socket.socket] = {}
    start = time.monotonic()
    try:
        while len(peers) < spec.size - 1:
            left = _left(deadline)
            if left == 0:
                missing = [r for r in range(1, spec.size) if r not in peers]
                raise WorldError(
                    f"rank 0 waited {time.monotonic() - start:.0f} s at {_where(spec)} for "
                    f"ranks {missing} of WORLD_SIZE={spec.size}, which never connected; "
                    "FLOW_COLLECTIVE_TIMEOUT sets this bound in seconds"
                )
            server.settimeout(min(left or 1.0, 1.0))
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            rank = _admit(conn, spec, peers, _left(deadline))
            if rank is not None:
                peers[rank] = conn
        port_name = MPI.Open_port()
        world = MPI.COMM_SELF
        for rank in range(1, spec.size):
            _send(peers[rank], f"port {port_name}")
            with _bounded(deadline, f"rank 0 waited for rank {rank} to join the world"):
                world = _grow(world, world.Accept(port_name, root=0), high=False)
        MPI.Close_port(port_name)
        return world
    except WorldError as err:
        for conn in peers.values():
            _send(conn, f"error {err}", quiet=True)
        raise
    finally:
        for conn in peers.values():
            conn.close()
        server.close()


def _admit(conn: socket.socket, spec: EnvWorld, peers: dict[int, socket.socket],
           left: float | None) -> int | None:  # fmt: skip
    """The rank that ``conn`` announces; a world size or rank that does not fit is an error
    here and there."""
    conn.settimeout(left if left else 5.0)
    try:
        words = conn.makefile("rb").readline().decode(errors="replace").split()
    except OSError:
        conn.close()
        return None  # not one of ours (a port probe): ignore it
    if len(words) != 3 or words[0] != _HELLO or not (words[1] + words[2]).isdigit():
        conn.close()
        return None
    rank, size = int(words[1]), int(words[2])
    problem = ""
    if size != spec.size:
        problem = (f"rank {rank} has WORLD_SIZE={size} but rank 0 has WORLD_SIZE={spec.size}: "
                   "every rank needs the same WORLD_SIZE")  # fmt: skip
    elif not 0 < rank < spec.size:
        problem = f"a process announced RANK={rank}, outside [1, {spec.size})"
    elif rank in peers:
        problem = f"two processes have RANK={rank}: every rank needs its own RANK"
    if problem:
        _send(conn, f"error {problem}", quiet=True)
        conn.close()
        raise WorldError(problem)
    return rank


def _join(MPI: Any, spec: EnvWorld, deadline: float | None) -> Any:
    """A rank other than 0: get the port name from rank 0, connect, then help the later ranks
    join."""
    start = time.monotonic()
    while True:
        try:
            conn = socket.create_connection((spec.addr, spec.port), timeout=5.0)
            break
        except OSError as err:
            if _left(deadline) == 0:
                raise WorldError(
                    f"rank {spec.rank} found no rank 0 at {_where(spec)} in "
                    f"{time.monotonic() - start:.0f} s ({err.strerror or err}); start a process "
                    "with RANK=0 there. FLOW_COLLECTIVE_TIMEOUT sets this bound in seconds"
                ) from None
            time.sleep(0.1)
    with conn:
        _send(conn, f"{_HELLO} {spec.rank} {spec.size}")
        conn.settimeout(_left(deadline))
        try:
            line = conn.makefile("rb").readline().decode(errors="replace").strip()
        except OSError as err:
            raise WorldError(f"rank {spec.rank}: rank 0 at {_where(spec)} did not answer: "
                             f"{err}") from None  # fmt: skip
    kind, _, text = line.partition(" ")
    if kind != "port":
        raise WorldError(text if kind == "error" else
                         f"rank 0 at {_where(spec)} closed the connection before this rank "
                         f"(RANK={spec.rank}) joined")  # fmt: skip
    with _bounded(deadline, f"rank {spec.rank} waited to connect to rank 0's MPI port"):
        world = _grow(MPI.COMM_SELF, MPI.COMM_SELF.Connect(text, root=0), high=True)
        for rank in range(spec.rank + 1, spec.size):
            where = f"rank {spec.rank} waited for rank {rank} to join the world"
            with _bounded(deadline, where):
                world = _grow(world, world.Accept(None, root=0), high=False)
    return world


def _grow(world: Any, inter: Any, high: bool) -> Any:
    """The intracommunicator of ``world`` and the other side of ``inter``, ``world`` first
    unless ``high``."""
    merged = inter.Merge(high=high)
    inter.Free()
    if world.Get_size() > 1:  # not COMM_SELF: a world grown before
        world.Free()
    return merged


def _send(conn: socket.socket, line: str, quiet: bool = False) -> None:
    try:
        conn.sendall(line.encode() + b"\n")
    except OSError:
        if not quiet:
            raise


@contextmanager
def _bounded(deadline: float | None, what: str) -> Iterator[None]:
    """MPI's connect and accept have no timeout: past ``deadline``, say ``what`` and end this
    process (a peer that never comes must not leave it waiting)."""
    if deadline is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        if not done.wait(max(deadline - time.monotonic(), 0.0)):
            print(f"flow: {what} until the bound of FLOW_COLLECTIVE_TIMEOUT; the world of the "
                  "launcher variables did not form. Exiting.", file=sys.stderr, flush=True)
            os._exit(1)

    thread = threading.Thread(target=watch, name="flow-world-watchdog", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
