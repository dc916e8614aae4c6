"""A profile's spans as Chrome / Perfetto trace JSON, one process track per rank.

Timestamps are wall-clock microseconds (each rank's `perf_counter_ns` spans shifted by the
wall-clock offset it took when its profile started), written relative to the earliest span
of all ranks; `otherData.wall_clock_origin_us` is that origin. Ranks on one machine share
its clock; ranks on several machines are as aligned as their clocks are.

Under several ranks `export` is collective: every rank sends its spans to rank 0 over the
world communicator and rank 0 writes the file. Merging matches the ranks' spans of each
collective (the same group and `seq`) and sets `wait_us`, how long this rank waited for the
last member to arrive (the latest start among the members, less its own; ranks on one node
record it already, from the arrival times `flow.targets.faults` shares).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

__all__ = ["chrome_trace", "export", "rank_events"]

_MAIN_THREAD = "MainThread"


def rank_events(rec: Any) -> list[dict]:
    """A recorder's spans as dicts: name, cat, ts / dur (wall-clock us), tid, thread, args."""
    out = []
    main = threading.main_thread().ident
    off = rec.wall_offset_ns
    for name, cat, t0, t1, tid, args in rec.events:
        thread = rec.threads.get(tid, str(tid))
        out.append({"name": name, "cat": cat, "ts": (t0 + off) / 1e3, "dur": (t1 - t0) / 1e3,
                    "tid": tid, "thread": thread if tid != main else _MAIN_THREAD,
                    "args": args})  # fmt: skip
    out.sort(key=lambda e: (e["ts"], -e["dur"]))
    return out


def _add_waits(by_rank: list[list[dict]]) -> None:
    """`wait_us` on each collective span that other ranks' spans of one collective match."""
    members: dict[tuple, list[dict]] = {}
    for events in by_rank:
        for e in events:
            a = e["args"]
            if e["cat"] == "collective" and a.get("seq"):
                members.setdefault((a.get("label"), tuple(a["group"]), a["seq"]), []).append(e)
    for (_, group, _), spans in members.items():
        if len(spans) == len(group) > 1:
            last = max(e["ts"] for e in spans)
            for e in spans:
                e["args"]["wait_us"] = round(last - e["ts"], 3)


def chrome_trace(by_rank: list[list[dict]]) -> dict:
    """The trace of every rank's events (`by_rank[r]`: rank r's, from `rank_events`)."""
    _add_waits(by_rank)
    starts = [e["ts"] for events in by_rank for e in events]
    origin = min(starts) if starts else 0.0
    out: list[dict] = []
    for rank, events in enumerate(by_rank):
        out.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                    "args": {"name": f"rank {rank}"}})  # fmt: skip
        out.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0,
                    "args": {"sort_index": rank}})  # fmt: skip
        tids: dict[Any, int] = {}
        for e in events:  # the main thread first, then in order of appearance
            if e["thread"] == _MAIN_THREAD:
                tids.setdefault(e["tid"], 0)
        for e in events:
            tids.setdefault(e["tid"], len(tids) + (0 if tids else 1))
        names = {e["tid"]: e["thread"] for e in events}
        for tid, n in tids.items():
            out.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": n,
                        "args": {"name": names[tid]}})  # fmt: skip
            out.append({"ph": "M", "name": "thread_sort_index", "pid": rank, "tid": n,
                        "args": {"sort_index": n}})  # fmt: skip
        for e in events:
            out.append({"ph": "X", "name": e["name"], "cat": e["cat"], "pid": rank,
                        "tid": tids[e["tid"]], "ts": round(e["ts"] - origin, 3),
                        "dur": round(e["dur"], 3), "args": e["args"]})  # fmt: skip
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"producer": "flow.profiler", "ranks": len(by_rank),
                          "wall_clock_origin_us": origin}}  # fmt: skip


def _world() -> tuple[int, int]:
    import sys

    env = sys.modules.get("flow.distributed.env")
    if env is None:
        return 0, 1
    return env.get_rank(), env.get_world_size()


def export(rec: Any, path: str) -> str | None:
    """Write the trace of `rec` (every rank's, gathered on rank 0) to `path`; the path on the
    rank that wrote it, None on the others."""
    events = rank_events(rec) if rec is not None else []
    rank, size = _world()
    if size > 1:
        from flow.targets import groups

        gathered = groups.world().gather(events, root=0)
        if rank != 0:
            return None
        by_rank = gathered
    else:
        by_rank = [events]
    trace = chrome_trace(by_rank)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(trace, f, default=str)
    os.replace(tmp, path)
    return path
