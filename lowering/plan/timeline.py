"""Timelines of pipeline slots per rank: the schedule's, and the place for a measured one.

A `Timeline` is rows of `Slot`s (rank, start, end, label, kind). `schedule_timeline` makes
the schedule's: each stage runs its slots in flow-pipeline-schedule's order (the facts hold
`schedule_slots`), a forward of micro-batch k after the previous stage's forward of k, a
backward after the next stage's backward of k, each slot one time unit, so the bubbles of
1F1B and GPipe show. A profile's spans become a timeline through `Timeline.from_events`
(or `from_chrome_trace` for a Chrome / Perfetto trace with one track per rank); a plan
draws every timeline it is given (`Plan.add_timeline`), in the unit each one names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from .facts import PlanFacts

__all__ = ["Slot", "Timeline", "schedule_timeline"]

KINDS = ("forward", "backward", "update", "other")


@dataclass(frozen=True)
class Slot:
    """One span of one rank: `start` to `end` in the timeline's unit, a short label ("F0")
    and its kind (one of `KINDS`), which picks its colour."""

    rank: int
    start: float
    end: float
    label: str
    kind: str = "other"


@dataclass
class Timeline:
    """A titled set of slots; `unit` names the time axis ("slot", "ms")."""

    title: str
    unit: str
    slots: list[Slot] = field(default_factory=list)

    def ranks(self) -> list[int]:
        return sorted({s.rank for s in self.slots})

    def span(self) -> tuple[float, float]:
        if not self.slots:
            return (0.0, 1.0)
        return (min(s.start for s in self.slots), max(s.end for s in self.slots))

    @classmethod
    def from_events(cls, events: Iterable[Mapping], title: str = "measured",
                    unit: str = "ms") -> Timeline:  # fmt: skip
        """A timeline of measured spans: each event a mapping with `rank`, `name`, `start` and
        `end` (in `unit`) and optionally `kind`; a name such as `F3` / `B3` / `U` gives the
        kind when none is named."""
        slots = []
        for e in events:
            kind = e.get("kind") or _kind_of(str(e["name"]))
            slots.append(Slot(int(e["rank"]), float(e["start"]), float(e["end"]),
                              str(e["name"]), kind))  # fmt: skip
        return cls(title, unit, sorted(slots, key=lambda s: (s.rank, s.start)))

    @classmethod
    def from_chrome_trace(cls, trace: Mapping | list, title: str = "measured",
                          select: Callable[[Mapping], bool] | None = None) -> Timeline:  # fmt: skip
        """A timeline of a Chrome / Perfetto trace's complete events (`"ph": "X"`, `ts` and
        `dur` in microseconds), the rank being the event's `pid`: those `select` keeps, by
        default the pipeline slots (named `F<k>`, `B<k>` or `U`, or with a `micro_batch`
        argument)."""
        events = trace.get("traceEvents", []) if isinstance(trace, Mapping) else trace
        keep = select or _is_slot
        spans = [
            {"rank": e.get("pid", 0), "name": e.get("name", "?"), "start": e["ts"] / 1000.0,
             "end": (e["ts"] + e.get("dur", 0)) / 1000.0,
             "kind": (e.get("args") or {}).get("phase")}
            for e in events if e.get("ph") == "X" and keep(e)
        ]  # fmt: skip
        return cls.from_events(spans, title, "ms")


_SLOT = re.compile(r"^(F|B)\d+$|^U$")


def _is_slot(event: Mapping) -> bool:
    return bool(_SLOT.match(str(event.get("name", "")))) or "micro_batch" in (
        event.get("args") or {})  # fmt: skip


def _kind_of(name: str) -> str:
    return {"F": "forward", "B": "backward", "U": "update"}.get(name[:1], "other")


def slot_label(phase: str, micro_batch: int) -> str:
    """`F0`, `B3`, `U` (the update)."""
    return "U" if phase == "update" else f"{phase[:1].upper()}{micro_batch}"


def schedule_timeline(facts: PlanFacts) -> Timeline | None:
    """The schedule's timeline (see the module docstring); None without pipeline stages."""
    stages = facts.stages
    if not stages:
        return None
    p = len(stages)
    done: dict[tuple[int, str, int], float] = {}
    free = [0.0] * p
    nxt = [0] * p
    placed: list[tuple[int, float, str, int]] = []
    while any(nxt[s] < len(stages[s].slots) for s in range(p)):
        progressed = False
        for s in range(p):
            if nxt[s] >= len(stages[s].slots):
                continue
            phase, k = stages[s].slots[nxt[s]]
            if phase == "forward":
                dep = done.get((s - 1, "forward", k), 0.0) if s > 0 else 0.0
                ready = s == 0 or (s - 1, "forward", k) in done
            elif phase == "backward":
                dep = done.get((s + 1, "backward", k), 0.0) if s < p - 1 else 0.0
                ready = s == p - 1 or (s + 1, "backward", k) in done
            else:
                dep, ready = 0.0, True
            if not ready:
                continue
            start = max(free[s], dep)
            done[(s, phase, k)] = free[s] = start + 1.0
            placed.append((s, start, phase, k))
            nxt[s] += 1
            progressed = True
        if not progressed:
            raise ValueError("plan: the pipeline schedule's slots wait on each other")
    slots = [Slot(rank, start, start + 1.0, slot_label(phase, k), phase)
             for s, start, phase, k in placed for rank in stages[s].ranks]  # fmt: skip
    title = (f"{facts.schedule.upper()} schedule: {p} stages x {facts.micro_batches} "
             "micro-batches (flow-pipeline-schedule's order, one time unit a slot)")  # fmt: skip
    return Timeline(title, "slot", sorted(slots, key=lambda s: (s.rank, s.start)))
