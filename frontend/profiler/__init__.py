"""`flow.profiler`: what flow does, as a Chrome / Perfetto trace and a torch-like table.

    with flow.profiler.profile(schedule=flow.profiler.schedule(wait=1, warmup=1, active=3),
                               on_trace_ready=lambda p: p.export_chrome_trace("t.json")) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=20))

It records host spans: tracing, each lowering pass, IREE compiles (the background compile
thread on its own track), module loads, every compiled call, interpreted runs, eager ops,
DataLoader batches, collectives (group, bytes, and the time spent waiting for the other
ranks), `prof.step()` intervals and `record_function` spans; with
`iree_dispatches=True`, IREE's own per-dispatch timings of a replay of each cpu program
(flow/profiler/_dispatches.py). Under `flow-run -n N` every rank records its own spans and
`export_chrome_trace` writes one file with a process track per rank. While no profile
records, each instrumented path costs one test of a module-level global.

Per-step metrics (step time split into compute, communication and host time, bytes per
collective kind, peak memory, compiles): `enable_metrics()` or `FLOW_METRICS=path`
(flow/profiler/_metrics.py).
"""

from __future__ import annotations

import os as _os

from ._metrics import StepMetrics, disable_metrics, enable_metrics, format_summary
from ._profile import ProfilerAction, profile, record_function, schedule

__all__ = ["ProfilerAction", "StepMetrics", "disable_metrics", "enable_metrics",
           "format_summary", "profile", "record_function", "schedule"]  # fmt: skip

if _os.environ.get("FLOW_METRICS", "").strip():  # every step as a JSON line / CSV row
    enable_metrics(_os.environ["FLOW_METRICS"].strip())
