"""Rank 1 fails while rank 0 waits: every rank must exit non-zero quickly, and rank 1 prints
its traceback. Usage: rank_fault.py barrier|recv|collective|callback|stuck

barrier, recv: rank 1 raises while rank 0 is in a barrier / a receive.
collective: rank 1 raises while rank 0 is in a compiled all_reduce.
callback: rank 1's compiled all_reduce fails inside the collective (unknown group id).
stuck: rank 1 never joins rank 0's compiled all_reduce (and raises nothing): rank 0's
    collective deadline (FLOW_COLLECTIVE_TIMEOUT, set short here) aborts both.
exit3, sysexit0, sigkill: rank 1 ends (os._exit(3), sys.exit(0), SIGKILL) while rank 0 waits
    in flow.env.barrier(): the launcher names rank 1 and how it ended; rank 0 is told at once.
hang: rank 1 sleeps while rank 0 waits in an eager global tensor's all-reduce (P -> B): rank
    0's deadline (FLOW_COLLECTIVE_TIMEOUT=3) names the collective and the rank not arrived.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

import flow
import flow.env

where = sys.argv[1]
rank = flow.env.get_rank()
module = None
if where == "stuck":
    os.environ["FLOW_COLLECTIVE_TIMEOUT"] = "2"
if where in ("exit3", "sysexit0", "sigkill"):
    flow.env.barrier()
    if rank == 1:
        time.sleep(0.5)  # let rank 0 block first
        if where == "exit3":
            os._exit(3)
        if where == "sysexit0":
            sys.exit(0)
        os.kill(os.getpid(), signal.SIGKILL)
    flow.env.barrier()
    print("rank 0 was not stopped", flush=True)
    sys.exit(0)
if where == "hang":
    os.environ["FLOW_COLLECTIVE_TIMEOUT"] = "3"
    from flow.distributed.placement import placement, sbp

    x = flow.tensor(np.ones(4, np.float32)).to_global(placement("cpu", [0, 1]), sbp.partial_sum)
    assert (x.to_global(sbp=sbp.broadcast).to_local().numpy() == 2).all()  # both take part
    if rank == 1:
        time.sleep(600)
    x.to_global(sbp=sbp.broadcast)
    print("rank 0 was not stopped", flush=True)
    sys.exit(0)
if where in ("collective", "callback", "stuck"):
    from flow.targets import collectives, compile_mlir, load

    T = "tensor<4xf32>"
    module = load(compile_mlir(f"""
{collectives.declare("all_reduce_sum", T)}
func.func @all_reduce(%x: {T}, %g: i32) -> {T} {{
  %t = arith.constant 0 : i32
  %y, %t1 = func.call @{collectives.import_name("all_reduce_sum", T)}(%x, %t, %g)
      : ({T}, i32, i32) -> ({T}, i32)
  return %y : {T}
}}
""", "cpu"))  # fmt: skip
    flow.env.barrier()

if rank == 1 and where == "stuck":
    time.sleep(600)
if rank == 1:
    time.sleep(0.5)  # let rank 0 block first
    if where == "callback":
        module["all_reduce"](np.ones(4, np.float32), 99)
    raise ValueError("deliberate failure on rank 1")
if where == "barrier":
    flow.env.barrier()
elif where == "recv":
    from mpi4py import MPI

    MPI.COMM_WORLD.Recv(np.empty(4), source=1)
else:
    module["all_reduce"](np.ones(4, np.float32), 0)
print("rank 0 was not stopped", flush=True)
