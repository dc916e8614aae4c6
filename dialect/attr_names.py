"""Names of the discardable IR attributes that carry flow's facts between layers.

The frontend writes some of them while tracing (pipeline stages and phases) and
reads others after lowering (collective groups); passes of lowering/ write and
read them all. Each name is defined here, once, so that the two sides cannot
drift apart. Every one of them is removed before the IR crosses to IREE.
"""

from __future__ import annotations

SIGNATURE_ATTR = "sbp_signature"
"""Op attribute: the SBP signature flow-infer-sbp chose, e.g. `"[S(0)], [B] -> [S(0)]"`."""

TRANSFER_ATTR = "transfer_tag"
"""Op attribute of a `flow.boxing`: the message tag flow-partition gives each boxing of a
program (the same on every rank), so that a placement change's send and receive pair up
even where the ranks order their transfers differently (pipeline schedules)."""

GROUPS_ATTR = "flow.comm_groups"
"""Module attribute: the rank groups flow-lower-collectives registers, in order (a group's
id is its index + 1; 0 is every rank)."""

MICRO_BATCH_ATTR = "micro_batch"
"""Op attribute: the micro-batch (an i64) a traced op of a pipelined step belongs to."""

PHASE_ATTR = "pipeline_phase"
"""Op attribute: the phase of a pipelined step a traced op belongs to (`PIPELINE_PHASES`)."""

STAGES_ATTR = "pipeline_stages"
"""Module attribute: the placements of a pipeline's stages, in order."""

SCHEDULE_ATTR = "pipeline_schedule"
"""Module attribute: the name of the pipeline schedule (`PIPELINE_SCHEDULES`)."""

PIPELINE_PHASES = ("forward", "backward", "update")
"""The values of `PHASE_ATTR`."""

PIPELINE_SCHEDULES = ("1f1b", "gpipe")
"""The values of `SCHEDULE_ATTR` that flow-pipeline-schedule knows."""

__all__ = [
    "SIGNATURE_ATTR", "TRANSFER_ATTR", "GROUPS_ATTR", "MICRO_BATCH_ATTR", "PHASE_ATTR",
    "STAGES_ATTR", "SCHEDULE_ATTR", "PIPELINE_PHASES", "PIPELINE_SCHEDULES",
]  # fmt: skip
