"""Faults in a 2-rank run: how long from a rank's death or hang to every process being gone,
the run's exit code and what it says; and what bounding a collective costs.

    python benchmarks/faults.py [--repeat 1]

Each fault row launches ``python -m flow.distributed.launch --nproc-per-node 2`` on this file
(``--rank FAULT``): both ranks pass a barrier, then rank 1 faults while rank 0 waits in the next
barrier (``hang``: rank 1 sleeps, with ``FLOW_COLLECTIVE_TIMEOUT=5``). Rank 1 prints the time
of the fault; the row's time runs from it to the moment no process of the run's session is
left. The overhead rows (``--overhead``, run on 2 ranks too) time a 4-float
``MPI_Allreduce`` bare and inside ``flow.targets.faults.watch`` (what every eager and compiled
collective now goes through), in alternating rounds.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

from _bench import machine

FAULTS = {
    "os._exit(3)": "exit3",
    "sys.exit(0) mid-run": "sysexit0",
    "SIGKILL": "sigkill",
    "hang (timeout 5 s)": "hang",
    "exception": "raise",
}


def rank_main(fault: str) -> None:
    """The body of each rank of a fault row."""
    import flow.env

    flow.env.barrier()
    if flow.env.get_rank() == 1:
        time.sleep(0.5)  # rank 0 is in the barrier by now
        print(f"FAULT_AT {time.time():.6f}", flush=True)
        if fault == "exit3":
            os._exit(3)
        if fault == "sysexit0":
            sys.exit(0)
        if fault == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "hang":
            time.sleep(600)
        raise RuntimeError("deliberate failure on rank 1")
    flow.env.barrier()


def _session_gone(pid: int, limit: float) -> float:
    """Wait until no process of session ``pid`` is left; the time.time() when it happened."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return time.time()
        time.sleep(0.01)
    os.killpg(pid, signal.SIGKILL)
    raise RuntimeError(f"processes of the run were left after {limit} s")


def run_fault(fault: str) -> tuple[float, int, list[str]]:
    """(seconds from the fault to every process gone, exit code, the run's flow lines)."""
    env = {**os.environ, "FLOW_COLLECTIVE_TIMEOUT": "5" if fault == "hang" else "300"}
    cmd = [sys.executable, "-m", "flow.distributed.launch", "--nproc-per-node", "2",
           os.path.abspath(__file__), "--rank", fault]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise RuntimeError(f"{fault}: the run hung") from None
    gone = _session_gone(proc.pid, 30)
    at = [float(line.split()[1]) for line in out.splitlines() if line.startswith("FAULT_AT")]
    if not at:
        raise RuntimeError(f"{fault}: rank 1 did not report its fault\n{out}\n{err}")
    said = [line for line in err.splitlines() if line.startswith(("flow", "python -m flow"))]
    return gone - at[0], proc.returncode, said


def watch_cost() -> float:
    """Microseconds that entering and leaving faults.watch costs (one process, no MPI)."""
    from flow.targets import faults

    world = faults.group(faults.WORLD, (0, 1))

    def loop(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            with faults.watch("all_reduce", world):
                pass
        return time.perf_counter() - t0

    return min(loop(20000) for _ in range(5)) / 20000 * 1e6


def overhead_main(iters: int) -> None:
    """Per-call time of a small Allreduce, bare and watched (run on 2 ranks)."""
    import numpy as np

    import flow.env
    from flow.targets import collectives, faults

    comm = collectives.mpi().COMM_WORLD
    world = faults.group(faults.WORLD, range(comm.size))
    a, b = np.ones(4, np.float32), np.empty(4, np.float32)

    def bare() -> None:
        comm.Allreduce(a, b)

    def watched() -> None:
        with faults.watch("all_reduce", world):
            comm.Allreduce(a, b)

    samples: dict[str, list[float]] = {"bare": [], "watched": []}
    flow.env.barrier()
    for _ in range(9):
        for name, fn in (("bare", bare), ("watched", watched)):
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            samples[name].append((time.perf_counter() - t0) / iters)
    med = {k: statistics.median(v) * 1e6 for k, v in samples.items()}
    slowest = comm.allreduce(med["watched"] - med["bare"], op=collectives.mpi().MAX)
    if comm.rank == 0:
        print(f"  4-float Allreduce on 2 ranks, bare:      {med['bare']:8.2f} us/call")
        print(f"  the same inside faults.watch:            {med['watched']:8.2f} us/call")
        print(f"  difference (slowest rank):               {slowest:8.2f} us/call "
              f"({100 * slowest / med['bare']:.0f} %)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", help=argparse.SUPPRESS)
    parser.add_argument("--overhead", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=1, help="runs per fault (median time)")
    ns = parser.parse_args()
    if ns.rank:
        rank_main(ns.rank)
        return 0
    if ns.overhead:
        overhead_main(ns.overhead)
        return 0
    print(f"Faults in a 2-rank run [{machine()}]")
    print(f"  {'fault':<22} {'fault -> all gone':>18} {'exit code':>10}")
    messages = {}
    for label, fault in FAULTS.items():
        times, codes = [], set()
        for _ in range(ns.repeat):
            seconds, code, said = run_fault(fault)
            times.append(seconds)
            codes.add(code)
        messages[label] = said
        code_text = "/".join(map(str, sorted(codes)))
        print(f"  {label:<22} {statistics.median(times):>16.2f} s {code_text:>10}")
    print("Messages shown (lines starting with 'flow' on stderr):")
    for label, said in messages.items():
        print(f"  {label}:")
        for line in said:
            print(f"    {line}")
    print("Cost of bounding a collective:")
    print(f"  faults.watch enter + leave, one process: {watch_cost():8.2f} us/call", flush=True)
    cmd = [sys.executable, "-m", "flow.distributed.launch", "--nproc-per-node", "2",
           os.path.abspath(__file__), "--overhead", "300"]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
