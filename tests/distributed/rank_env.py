"""Prints what flow.env says on this rank, after a barrier."""

from __future__ import annotations

import os
import sys

import flow.env

flow.env.barrier()
sys.stdout.write(
    f"rank={flow.env.get_rank()} size={flow.env.get_world_size()} "
    f"local_rank={flow.env.get_local_rank()} nodes={flow.env.get_node_size()} "
    f"distributed={flow.env.is_distributed()} driver={os.environ.get('FLOW_CPU_DRIVER', '')} "
    f"pmi_size_hidden={'PMI_SIZE' not in os.environ}\n"
)
