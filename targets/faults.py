"""Bounded waits for every collective, eager or compiled, and dead-rank detection.

MPI has no timed wait and no notice of a peer that has gone, so every call that waits for peers
(flow's eager boxing, ``flow.env.barrier()``, the ``comm`` imports of compiled programs) goes
through :func:`begin` / :func:`end` (or :class:`watch`): they count, per communicator, the
collectives this rank has entered, and a watchdog thread (blocking MPI calls release the GIL)
checks the call in progress five times a second. It aborts every rank, naming the collective,
its group and the ranks that did not arrive,

* at once when a member of the group has ended (exited, killed, finished its script) before
  entering this collective: it never will;
* after ``FLOW_COLLECTIVE_TIMEOUT`` seconds (default 300; 0 turns the bound off) otherwise.

What each rank has entered is shared through the *board*: a small file in the run directory
(``FLOW_RUN_DIR``, made by the launcher; on one node) that every rank maps and writes to with a
few stores per collective. The launcher starts each rank under :func:`supervise` (this file run
as a script, standard library only), which records how the rank's process ended, so the
launcher can say which rank ended, how and with which code.
"""

from __future__ import annotations

import mmap
import os
import signal
import sys
import threading
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# The profile's recorder while one records (flow.targets.events sets it); a global of this
# module, which imports nothing of ours: it also runs as the launcher's supervisor script.
RECORDER: Any = None

RUN_DIR_ENV = "FLOW_RUN_DIR"
BOARD_FILE = "ranks.board"
POLL_S = 0.2

# Board slot: int64 words per rank. The rank writes 0-8 and the table; its supervisor 9-11.
RUNNING, FINISHED, ABORTING = 0, 1, 2
_STATE, _CODE, _HOW, _TIME, _PID, _IN, _NAME, _KEY, _COUNT = range(9)
_ENDED, _END_STATUS, _END_TIME = 9, 10, 11
_TABLE, _TABLE_SIZE = 12, 16  # (group key, collectives entered) pairs
# Per table entry, while a profile or metrics record: the last two collectives' (count, entry
# time in perf_counter_ns) by the count's parity, from which a rank that leaves a collective
# learns when the last of its peers arrived (a peer is at most one collective further on).
_ARRIVALS = _TABLE + 2 * _TABLE_SIZE
SLOT_WORDS = _ARRIVALS + 4 * _TABLE_SIZE


def arrival_word(entry: int, count: int) -> int:
    """The word (in a slot) of the (count, entry time) pair of table entry ``entry``'s
    collective number ``count``."""
    return _ARRIVALS + 4 * entry + 2 * (count & 1)
HOW = {0: "the end of its script", 1: "sys.exit", 2: "interpreter exit"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _crc(text: str) -> int:
    return zlib.crc32(text.encode()) or 1  # 0 means "none" on the board


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


# ---------------------------------------------------------------------------------------------
# The board.


class Board:
    """The shared record of the ranks of one run: one slot of int64 words per rank."""

    def __init__(self, path: str, size: int, create: bool = False):
        nbytes = size * SLOT_WORDS * 8
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, nbytes)
            elif os.fstat(fd).st_size < nbytes:
                raise ValueError(f"{path}: a board for fewer than {size} ranks")
            self._map = mmap.mmap(fd, nbytes)
        finally:
            os.close(fd)
        self.words = memoryview(self._map).cast("q")
        self.path, self.size = path, size
        self._tables: dict[int, dict[int, int]] = {}  # rank -> group key -> word index

    @classmethod
    def create(cls, run_dir: str, size: int) -> Board:
        return cls(os.path.join(run_dir, BOARD_FILE), size, create=True)

    def word(self, rank: int, index: int) -> int:
        return self.words[rank * SLOT_WORDS + index]

    def set(self, rank: int, index: int, value: int) -> None:
        self.words[rank * SLOT_WORDS + index] = value

    def set_state(self, rank: int, state: int, code: int = 0, how: int = 0) -> None:
        base = rank * SLOT_WORDS
        w = self.words
        w[base + _CODE], w[base + _HOW] = code, how
        w[base + _TIME] = time.monotonic_ns()
        w[base + _STATE] = state

    def foreign(self, rank: int, pid: int) -> bool:
        """Whether ``rank``'s slot is another live process's (``pid`` is the rank's): the
        board of an enclosing run, whose variables a nested launch inherited."""
        held = self.word(rank, _PID)
        return held not in (0, pid) and _alive(held)

    def set_ended(self, rank: int, status: int) -> None:
        """What the supervisor saw: exit code ``status`` (>= 0), or killed by signal -status."""
        base = rank * SLOT_WORDS
        self.words[base + _END_STATUS] = status
        self.words[base + _END_TIME] = time.monotonic_ns()
        self.words[base + _ENDED] = 1

    def table_index(self, rank: int, key: int) -> int:
        """The word holding ``rank``'s count for group ``key`` (allocated on first use;
        -1 when the table is full)."""
        table = self._tables.setdefault(rank, {})
        index = table.get(key)
        if index is None:
            base = rank * SLOT_WORDS
            index = -1
            for i in range(_TABLE_SIZE):
                k = self.words[base + _TABLE + 2 * i]
                if k in (0, key):
                    self.words[base + _TABLE + 2 * i] = key
                    index = _TABLE + 2 * i + 1
                    break
            table[key] = index
        return index

    def entry(self, rank: int, key: int) -> int:
        """The table entry (0.._TABLE_SIZE-1) of group ``key`` in ``rank``'s slot, -1 if it has
        none yet (read only: a peer's table is the peer's to allocate)."""
        table = self._tables.setdefault(rank, {})
        found = table.get(key)
        if found is None:
            base = rank * SLOT_WORDS + _TABLE
            for i in range(_TABLE_SIZE):
                if self.words[base + 2 * i] == key:
                    table[key] = found = _TABLE + 2 * i + 1
                    break
            else:
                return -1
        return (found - _TABLE - 1) // 2 if found >= 0 else -1

    def count(self, rank: int, key: int) -> int | None:
        """How many collectives of group ``key`` ``rank`` has entered (None: not recorded)."""
        base = rank * SLOT_WORDS
        for i in range(_TABLE_SIZE):
            if self.words[base + _TABLE + 2 * i] == key:
                return self.words[base + _TABLE + 2 * i + 1]
        return 0 if self.words[base + _TABLE + 2 * _TABLE_SIZE - 2] == 0 else None

    def gone(self, rank: int) -> bool:
        """Whether ``rank`` will enter no more collectives: finished, or its process ended."""
        return self.word(rank, _STATE) == FINISHED or self.word(rank, _ENDED) == 1

    def ending(self, rank: int, ago: bool = True) -> str:
        """How ``rank`` ended, in words ("" while it runs); ``ago``: and when."""
        now = time.monotonic_ns()
        state = self.word(rank, _STATE)
        code = self.word(rank, _CODE)
        if state == ABORTING:
            said = f"aborted the run with exit code {code}"
        elif state == FINISHED:
            said = f"finished ({HOW.get(self.word(rank, _HOW), 'exit')}, exit code {code})"
        else:
            said = ""
        when = self.word(rank, _TIME)
        if self.word(rank, _ENDED):
            status = self.word(rank, _END_STATUS)
            if status < 0:
                how = f"was killed by {signal_name(-status)}"
            else:
                how = f"exited with code {status}"
            if not said and status >= 0:
                how += " without finishing its script (os._exit, or an exit from native code)"
            said = f"{said}, then its process {how}" if said else how
            when = self.word(rank, _END_TIME)
        if said and ago:
            said += f" {(now - when) / 1e9:.1f} s ago"
        return said


# ---------------------------------------------------------------------------------------------
# Groups and calls.


@dataclass(frozen=True)
class Group:
    """A communicator as the watchdog names it: a label and its world ranks in group order."""

    label: str
    ranks: tuple[int, ...]
    key: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", _crc(f"{self.label}:{self.ranks}"))

    def describe(self) -> str:
        return f"{self.label}: ranks {list(self.ranks)}"


WORLD = "world"  # the label of the world communicator, whoever calls on it
_groups: dict[tuple[str, tuple[int, ...]], Group] = {}
_by_key: dict[int, Group] = {}


def group(label: str, ranks: Iterable[int]) -> Group:
    """The Group of a communicator (cached): ``label`` tells communicators over the same ranks
    apart (collectives on different communicators do not match each other)."""
    ranks = tuple(int(r) for r in ranks)
    g = _groups.get((label, ranks))
    if g is None:
        g = _groups[(label, ranks)] = Group(label, ranks)
        _by_key[g.key] = g
    return g


_names: dict[str, int] = {}
_name_of: dict[int, str] = {}


def _name_crc(name: str) -> int:
    crc = _names.get(name)
    if crc is None:
        crc = _names[name] = _crc(name)
        _name_of[crc] = name
    return crc


def known_names(names: Iterable[str]) -> None:
    """Collective names other ranks may be in (to name them in reports)."""
    for n in names:
        _name_crc(n)


# The calls flow's frontend watches (a peer's name is read off the board as a checksum).
known_names(("init", "barrier", "all_reduce", "reduce_scatter", "all_gather", "all_to_all",
             "broadcast", "create_group", "recv", "send", "all_gather (shard shapes)",
             "all_gather (random tensor digests)", "register_group", "register_mesh",
             "send (delivery at exit)"))  # fmt: skip


class Call:
    """A call in progress: ``count`` is its number among this rank's calls on ``group``
    (0 for point-to-point calls, which peers do not count). A plain class: one is made for
    every collective, so it must be cheap."""

    __slots__ = ("name", "group", "count", "start", "prev", "seen_gone", "t0", "nbytes")

    def __init__(self, name: str, grp: Group, count: int, start: float, prev: Call | None):
        self.name, self.group, self.count, self.start, self.prev = name, grp, count, start, prev
        self.seen_gone: set[int] | None = None  # members seen gone at the last poll
        # while a profile records: the start (perf_counter_ns) and the bytes this rank
        # contributes, which the caller may set (flow.targets.events)
        self.t0 = time.perf_counter_ns() if RECORDER is not None else 0
        self.nbytes = 0


class _State:
    def __init__(self) -> None:
        self.board: Board | None = None
        self.rank = -1
        self.current: Call | None = None
        self.counts: dict[int, int] = {}
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()


_state = _State()


def attach(run_dir: str | None, rank: int, size: int) -> Board | None:
    """Join the run's board (``run_dir`` or ``$FLOW_RUN_DIR``) as ``rank`` of ``size``; None
    when there is none (then peers' arrivals are unknown, and only the timeout applies)."""
    run_dir = run_dir or os.environ.get(RUN_DIR_ENV)
    _state.rank = rank
    if not run_dir:
        return None
    try:
        board = Board(os.path.join(run_dir, BOARD_FILE), size)
    except (OSError, ValueError):
        return None  # e.g. ranks on another node: no shared record there
    if board.foreign(rank, os.getpid()):
        return None
    board.set(rank, _PID, os.getpid())
    _state.board = board
    return board


def foreign_board(run_dir: str, rank: int, size: int) -> bool:
    """Whether the board in ``run_dir`` is an enclosing run's (see `Board.foreign`)."""
    try:
        return Board(os.path.join(run_dir, BOARD_FILE), size).foreign(rank, os.getpid())
    except (OSError, ValueError):
        return False


def board() -> Board | None:
    return _state.board


def finished(code: int = 0, how: int = 2) -> None:
    """Record that this rank enters no more collectives (it is exiting); first record wins."""
    b = _state.board
    if b is not None and b.word(_state.rank, _STATE) == RUNNING:
        b.set_state(_state.rank, FINISHED, code, how)


def aborting(code: int, reason: str = "") -> None:
    """Record that this rank is about to abort the run, and why (the launcher repeats the
    reason's last line: mpiexec may drop a rank's last output when it aborts)."""
    b = _state.board
    if b is None or b.word(_state.rank, _STATE) == ABORTING:
        return
    if reason:
        try:
            with open(reason_path(os.path.dirname(b.path), _state.rank), "w") as f:
                f.write(reason)
        except OSError:
            pass
    b.set_state(_state.rank, ABORTING, code)


def reason_path(run_dir: str, rank: int) -> str:
    return os.path.join(run_dir, f"rank{rank}.reason")


def reason(run_dir: str, rank: int) -> str:
    """The last line of the reason ``rank`` gave for aborting ("" if none)."""
    try:
        with open(reason_path(run_dir, rank)) as f:
            lines = [line.strip() for line in f.read().splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def begin(name: str, grp: Group, p2p: bool = False) -> Call:
    """Enter a call that waits for the peers in ``grp`` (for a point-to-point call, ``p2p``:
    just the peers it waits for); pair with :func:`end`."""
    s = _state
    if s.thread is None:
        _start_watchdog()
    count = 0
    if not p2p:
        count = s.counts.get(grp.key, 0) + 1
        s.counts[grp.key] = count
    call = Call(name, grp, count, time.monotonic(), s.current)
    s.current = call
    b = s.board
    if b is not None:
        base = s.rank * SLOT_WORDS
        w = b.words
        w[base + _NAME] = _names.get(name) or _name_crc(name)
        w[base + _KEY] = grp.key
        w[base + _COUNT] = count
        w[base + _IN] = 1
        if count:
            index = b.table_index(s.rank, grp.key)
            if index >= 0:
                w[base + index] = count
                if call.t0:  # the time first: a peer that reads the count reads it too
                    at = base + arrival_word((index - _TABLE - 1) // 2, count)
                    w[at + 1] = call.t0
                    w[at] = count
    return call


def end(call: Call) -> None:
    """Leave ``call``."""
    if call.t0 and RECORDER is not None:
        _record(call)
    s = _state
    s.current = call.prev
    b = s.board
    if b is not None:
        base = s.rank * SLOT_WORDS
        prev = call.prev
        if prev is None:
            b.words[base + _IN] = 0
        else:
            b.words[base + _NAME], b.words[base + _KEY] = _name_crc(prev.name), prev.group.key
            b.words[base + _COUNT] = prev.count


def _record(call: Call) -> None:
    """The profile's span of a collective: its group (world ranks), its number among this
    rank's calls on the group (`seq`, 0 for point-to-point; ranks' spans of one collective
    share it), the bytes this rank sends, the time it was blocked (the span itself) and, on
    one node, `wait_us`: how much of that it waited for the last of its peers to arrive."""
    grp = call.group
    args = {"op": call.name, "group": list(grp.ranks), "label": grp.label, "seq": call.count,
            "bytes": call.nbytes}  # fmt: skip
    from flow.targets import peers  # (the supervisor runs this file with nothing of flow)

    waited = peers.waited(call)
    if waited is not None:
        args["wait_us"] = round(waited / 1e3, 3)
    RECORDER.add(call.name, "collective", call.t0, time.perf_counter_ns(), args)


class watch:
    """``with watch(name, group):`` around a blocking MPI call."""

    __slots__ = ("name", "group", "p2p", "call")

    def __init__(self, name: str, grp: Group, p2p: bool = False):
        self.name, self.group, self.p2p = name, grp, p2p

    def __enter__(self) -> Call:
        self.call = begin(self.name, self.group, self.p2p)
        return self.call

    def __exit__(self, *exc: Any) -> None:
        end(self.call)


# ---------------------------------------------------------------------------------------------
# The watchdog.


def _mpi():
    """flow.targets.mpi, which owns the wait bound and the world (imported on first use: the
    supervisor below runs this file as a script, with nothing of flow importable)."""
    from flow.targets import mpi

    return mpi


def _start_watchdog() -> None:
    _mpi().collective_timeout()  # a malformed value fails in the caller, not in the thread
    with _state.lock:
        if _state.thread is None:
            _state.thread = threading.Thread(
                target=_watch_loop, name="flow-collective-watchdog", daemon=True
            )
            _state.thread.start()


def _watch_loop() -> None:
    from flow.targets import peers

    while True:
        time.sleep(POLL_S)
        call = _state.current
        if call is None:
            continue
        try:
            timeout = _mpi().collective_timeout()
        except ValueError:
            timeout = _mpi().DEFAULT_TIMEOUT
        gone = _gone_members(call)
        waited = time.monotonic() - call.start
        if gone:
            short = f"ranks {gone} will never arrive in {peers.head(call)}"
            _fatal(peers.gone_message(call, gone), short)
        elif timeout and waited >= timeout:
            short = (f"waited {waited:.0f} s in {peers.head(call)} for ranks "
                     f"{peers.not_arrived(call)}")  # fmt: skip
            _fatal(peers.timeout_message(call, waited), short)


def _gone_members(call: Call) -> list[int]:
    """Members of the call's group that will never arrive: gone before entering it. A member
    whose process ended inside it, or (point-to-point) a peer gone and not in a call itself,
    counts once seen so in two polls in a row: the call did not complete in between."""
    b = _state.board
    if b is None:
        return []
    out, seen = [], set()
    for r in call.group.ranks:
        if r == _state.rank or not 0 <= r < b.size or not b.gone(r):
            continue
        ended = b.word(r, _ENDED) == 1
        if call.count:
            entered = b.count(r, call.group.key)
            if entered is not None and entered < call.count:
                out.append(r)
                continue
        elif not b.word(r, _IN):
            ended = True
        if ended:
            seen.add(r)
            if call.seen_gone and r in call.seen_gone:
                out.append(r)
    call.seen_gone = seen
    return out


def _fatal(message: str, short: str) -> None:
    """Print ``message``, record ``short`` as this rank's reason, abort every rank."""
    aborting(1, short)
    print(message, file=sys.stderr, flush=True)
    time.sleep(0.1)  # let mpiexec forward the message before it stops every rank
    _mpi().world().Abort(1)


# ---------------------------------------------------------------------------------------------
# The supervisor: ``python faults.py COMMAND...`` runs COMMAND as this rank and records on the
# board how it ended, then ends the same way (an exit code or the same signal).


def _set_parent_death_signal(sig: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass


def supervise(argv: Sequence[str]) -> int:
    """Run ``argv`` as a child, forward termination signals to it, record its end."""
    _set_parent_death_signal(signal.SIGKILL)  # mpiexec's proxy gone: go too
    pid = os.fork()
    if pid == 0:
        _set_parent_death_signal(signal.SIGKILL)  # this supervisor gone: the rank goes too
        try:
            os.execv(argv[0], list(argv))
        finally:
            os._exit(127)

    def forward(sig: int, _frame: Any) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
        signal.signal(sig, forward)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)  # -N for signal N
    run_dir, rank = os.environ.get(RUN_DIR_ENV), os.environ.get("PMI_RANK", "")
    if run_dir and rank.isdigit():
        size = int(os.environ.get("PMI_SIZE", "0") or 0)
        try:
            board = Board(os.path.join(run_dir, BOARD_FILE), max(size, int(rank) + 1))
            if not board.foreign(int(rank), pid):  # the rank's own run, not an enclosing one
                board.set_ended(int(rank), code)
        except (OSError, ValueError):
            pass
    if code < 0:
        try:
            signal.signal(-code, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL and SIGSTOP keep their default anyway
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(supervise(sys.argv[1:]))
