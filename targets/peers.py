"""What a rank learns of its peers from the board of :mod:`.faults`: where each one is, for
the watchdog's report of a collective that cannot complete, and when the last of them arrived
in a collective, for the wait a profile records (`wait_us` on a collective's span)."""

from __future__ import annotations

from collections.abc import Sequence

from . import faults
from .faults import _IN, _KEY, _NAME, SLOT_WORDS, Call, arrival_word

__all__ = ["gone_message", "head", "not_arrived", "timeout_message", "waited", "where"]


def where(r: int, call: Call) -> str:
    """What member ``r`` is doing, for a report."""
    b = faults._state.board
    if b is None:
        return "unknown (no arrival record: the run was not started by flow's launcher)"
    ending = b.ending(r)
    if ending:
        return ending
    entered = b.count(r, call.group.key)
    so_far = "" if entered is None else f"; it has entered {entered} of this group's collectives"
    if b.word(r, _IN):
        name = faults._name_of.get(b.word(r, _NAME), "an unknown call")
        other = faults._by_key.get(b.word(r, _KEY))
        on = f" ({other.describe()})" if other is not None else ""
        return f"waiting in '{name}'{on}{so_far}"
    return f"running, not in a collective{so_far}"


def not_arrived(call: Call) -> list[int]:
    b = faults._state.board
    peers = [r for r in call.group.ranks if r != faults._state.rank]
    if b is None or not call.count:
        return peers
    out = []
    for r in peers:
        entered = b.count(r, call.group.key) if 0 <= r < b.size else None
        if entered is None or entered < call.count:
            out.append(r)
    return out


def head(call: Call) -> str:
    if not call.count:
        return f"the point-to-point call '{call.name}' ({call.group.describe()})"
    return f"the collective '{call.name}' #{call.count} ({call.group.describe()})"


def gone_message(call: Call, gone: Sequence[int]) -> str:
    who = "; ".join(f"rank {r} {where(r, call)}" for r in gone)
    return (
        f"flow: rank {faults._state.rank} is waiting in {head(call)}; ranks not arrived: "
        f"{list(gone)}, and they never will: {who}. Aborting every rank."
    )


def timeout_message(call: Call, seconds: float) -> str:
    missing = not_arrived(call)
    if missing:
        detail = "ranks not arrived: " + str(missing) + " (" + "; ".join(
            f"rank {r}: {where(r, call)}" for r in missing
        ) + ")"
    else:
        detail = "every rank of the group has arrived, in other calls: " + "; ".join(
            f"rank {r}: {where(r, call)}" for r in call.group.ranks if r != faults._state.rank
        )
    return (
        f"flow: rank {faults._state.rank} waited {seconds:.0f} s in {head(call)}; {detail}. The "
        f"ranks' programs disagree on their collectives, or a peer is stuck. Aborting every "
        f"rank; {faults._mpi().TIMEOUT_ENV} sets this bound in seconds."
    )


def waited(call: Call) -> int | None:
    """Nanoseconds from this rank's entry into `call` to the latest entry of a peer into the
    same collective, as the board holds them (0 when this rank came last); None without a
    board or a count. A peer not yet arrived (the others of a broadcast need not be) did not
    hold this rank back."""
    s = faults._state
    b = s.board
    if b is None or not call.count or not call.t0:
        return None
    latest, key = call.t0, call.group.key
    w = b.words
    for r in call.group.ranks:
        if r == s.rank or not 0 <= r < b.size:
            continue
        i = b.entry(r, key)
        if i < 0:
            continue
        at = r * SLOT_WORDS + arrival_word(i, call.count)
        if w[at] == call.count:
            latest = max(latest, w[at + 1])
    return latest - call.t0
