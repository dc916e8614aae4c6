"""Rank 0 launches a run of its own (argv[1]: "launch_env", through flow's launch_env; or
"inherit", a plain mpiexec given this rank's environment, less its MPI variables) while rank 1
waits; then both go on with collectives of their own run. With "child" the script is that
inner run: a barrier and a sum, and its rank 1 ends first."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

import flow
from flow.distributed.launch import _INHERITED_MPI_VARS, find_mpiexec, launch_command, launch_env


def summed(value: np.ndarray) -> list[float]:
    """The sum over the ranks of each rank's `value` (a partial sum made whole)."""
    part = flow.tensor(value).to_global(flow.placement("cpu", [0, 1]), flow.sbp.partial_sum)
    return part.to_global(sbp=flow.sbp.broadcast).to_local().numpy().tolist()


def inner() -> None:
    flow.env.barrier()
    total = summed(np.ones(3, np.float32) * (flow.env.get_rank() + 1))
    if flow.env.get_rank() == 0:
        time.sleep(0.5)  # rank 1 has ended by now
    from flow.targets import faults

    board, enclosing = faults.board(), os.environ.get(faults.RUN_DIR_ENV, "-")
    own = board is not None and not board.path.startswith(enclosing)
    print(f"inner rank {flow.env.get_rank()} sum {total} own board {own}", flush=True)


def outer(how: str) -> None:
    from mpi4py import MPI

    for _ in range(8):  # more of this run's collectives than the inner run makes
        flow.env.barrier()
    if flow.env.get_rank() == 0:
        if how == "launch_env":
            cmd, env = launch_command(2, __file__, ["child"]), launch_env(2)
        else:
            env = {k: v for k, v in os.environ.items() if k not in _INHERITED_MPI_VARS}
            cmd = [find_mpiexec(), "-n", "2", sys.executable, __file__, "child"]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        print(run.stdout, end="", flush=True)
        sys.stderr.write(run.stderr)
        print(f"inner run exit {run.returncode}", flush=True)
    req = MPI.COMM_WORLD.Ibarrier()  # rank 1 waits without spinning
    while not req.Test():
        time.sleep(0.01)
    if flow.env.get_rank() == 1:
        time.sleep(3.0)  # at work: rank 0 waits in the barrier, watching rank 1's record
    flow.env.barrier()
    total = summed(np.full(2, 10.0, np.float32))
    print(f"outer rank {flow.env.get_rank()} sum {total}", flush=True)


if __name__ == "__main__":
    inner() if sys.argv[1] == "child" else outer(sys.argv[1])
