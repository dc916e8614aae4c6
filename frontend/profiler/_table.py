"""`key_averages()`: one row per span name, and the torch-like table that prints them.

A span's self time is its duration less that of the spans directly inside it (on the same
thread); total times add up a name's spans, so a span nested in one of the same name counts
twice, as in torch's table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EventAverages", "KeyAverages", "key_averages"]


@dataclass
class EventAverages:
    """The spans of one name: times in microseconds of host (wall-clock) time."""

    key: str
    category: str
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    cpu_time_min: float = float("inf")
    cpu_time_max: float = 0.0
    args: list[dict] = field(default_factory=list, repr=False)

    @property
    def cpu_time(self) -> float:  # torch's name for the average
        return self.cpu_time_total / self.count if self.count else 0.0

    cpu_time_avg = cpu_time

    @property
    def self_cpu_time_avg(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0


_SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cpu_time", "cpu_time_avg",
              "self_cpu_time_avg", "cpu_time_max", "cpu_time_min", "count")  # fmt: skip


class KeyAverages(list):
    """The rows of `key_averages()` (a list of `EventAverages`)."""

    def table(self, sort_by: str = "cpu_time_total", row_limit: int = 100,
              max_name_column_width: int = 55) -> str:  # fmt: skip
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"table: cannot sort by {sort_by!r}; known: {', '.join(_SORT_KEYS)}")
        rows = sorted(self, key=lambda r: getattr(r, sort_by), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        self_sum = sum(r.self_cpu_time_total for r in self) or 1.0
        w = max([4, *(min(len(r.key), max_name_column_width) for r in rows)])
        heads = ["Self CPU %", "Self CPU", "CPU total", "CPU time avg", "CPU min", "CPU max",
                 "# of Calls", "Category"]  # fmt: skip
        line = "-" * w + "  " + "  ".join("-" * 12 for _ in heads)
        out = [line, f"{'Name':<{w}}  " + "  ".join(f"{h:>12}" for h in heads), line]
        for r in rows:
            name = r.key if len(r.key) <= w else r.key[: w - 3] + "..."
            cells = [f"{100 * r.self_cpu_time_total / self_sum:.2f}%",
                     _us(r.self_cpu_time_total), _us(r.cpu_time_total), _us(r.cpu_time),
                     _us(r.cpu_time_min), _us(r.cpu_time_max), str(r.count),
                     r.category]  # fmt: skip
            out.append(f"{name:<{w}}  " + "  ".join(f"{c:>12}" for c in cells))
        out.append(line)
        out.append(f"Self CPU time total: {_us(sum(r.self_cpu_time_total for r in self))}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()


def _us(t: float) -> str:
    if t >= 1e6:
        return f"{t / 1e6:.3f}s"
    if t >= 1e3:
        return f"{t / 1e3:.3f}ms"
    return f"{t:.3f}us"


def key_averages(events: list[dict]) -> KeyAverages:
    """Rows by span name over `events` (dicts as `flow.profiler.profile.events()` gives)."""
    self_time = _self_times(events)
    rows: dict[str, EventAverages] = {}
    for i, e in enumerate(events):
        r = rows.get(e["name"])
        if r is None:
            r = rows[e["name"]] = EventAverages(e["name"], e["cat"])
        d = e["dur"]
        r.count += 1
        r.cpu_time_total += d
        r.self_cpu_time_total += self_time[i]
        r.cpu_time_min = min(r.cpu_time_min, d)
        r.cpu_time_max = max(r.cpu_time_max, d)
        r.args.append(e["args"])
    return KeyAverages(rows.values())


def _self_times(events: list[dict]) -> list[float]:
    """Each span's duration less its direct children's, per thread (spans nest on a thread)."""
    out = [e["dur"] for e in events]
    by_thread: dict[object, list[int]] = {}
    for i, e in enumerate(events):
        by_thread.setdefault(e["tid"], []).append(i)
    for idx in by_thread.values():
        idx.sort(key=lambda i: (events[i]["ts"], -events[i]["dur"]))
        stack: list[int] = []
        for i in idx:
            e = events[i]
            while stack and events[stack[-1]]["ts"] + events[stack[-1]]["dur"] <= e["ts"]:
                stack.pop()
            if stack:
                out[stack[-1]] -= e["dur"]
            stack.append(i)
    return out
