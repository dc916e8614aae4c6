"""`flow.env`: the process environment of an SPMD run, as in OneFlow (this rank, the world size,
the rank on this node, the number of nodes; `barrier`, `abort`).

Defined in `flow.distributed.env`, below the global tensors that read it; this module is its
public name. A process started without a launcher is rank 0 of a world of size 1, and MPI is
never imported.
"""

from __future__ import annotations

from flow.distributed.env import (
    abort,
    barrier,
    get_local_rank,
    get_node_size,
    get_rank,
    get_world_size,
    is_distributed,
    prepare_iree_for_mpi,
)

__all__ = [
    "abort",
    "barrier",
    "get_local_rank",
    "get_node_size",
    "get_rank",
    "get_world_size",
    "is_distributed",
    "prepare_iree_for_mpi",
]
