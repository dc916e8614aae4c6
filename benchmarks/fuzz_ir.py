"""Fuzz flow's IR front door: mutated lit inputs through parse, verify, lowering, IREE's parser.

    python benchmarks/fuzz_ir.py --cases 10000 --seed 0 [--jobs 1] [--show 3]

Cases come from `flow.tools.irfuzz` (the generator of tests/tools/test_fuzz_ir.py).
They run in worker subprocesses, so that a crash (a signal) or a hang in native
code is counted against its case and the run goes on with a fresh worker.
Prints one row per outcome; every row but clean diagnostics, lowering
diagnostics and accepted is a bug, and the exit code is 1 if any case hit one.
"""

from __future__ import annotations

import argparse
import json
import selectors
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from _bench import machine

from flow.tools import irfuzz

LIT = Path(__file__).resolve().parents[1] / "tests" / "lit"
STALL_S = 30.0
"""A worker silent this long is stuck outside Python (the per-case alarm did not fire): a hang."""

LABELS = {
    "clean": "clean diagnostics (file:line:col: error:)",
    "lowering": "lowering diagnostics (a pass names the op)",
    "accepted": "accepted (IREE parses the hand-off)",
    "internal": "internal errors",
    "crash": "crashes (worker killed by a signal)",
    "hang": "hangs (over the per-case bound)",
    "iree-rejected": "accepted then rejected by IREE",
}


def worker(seed: int, start: int, count: int, time_limit: float) -> None:
    """Run cases [start, start + count) and print one JSON line per case."""
    corpus = irfuzz.load_corpus(LIT)
    for i, data in irfuzz.cases(corpus, seed, start, count):
        began = time.perf_counter()
        outcome = irfuzz.run_case(data, f"case{i}.mlir", time_limit)
        took = time.perf_counter() - began
        rec = {"i": i, "kind": outcome.kind, "s": took, "detail": outcome.detail[-2000:]}
        print(json.dumps(rec))
        sys.stdout.flush()


def _spawn(seed: int, start: int, count: int, time_limit: float) -> subprocess.Popen:
    cmd = [sys.executable, __file__, "--worker", "--seed", str(seed), "--start", str(start),
           "--cases", str(count), "--time-limit", str(time_limit)]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def run_range(seed: int, start: int, count: int, time_limit: float, results: dict) -> None:
    """Cases [start, start + count) in workers; a dead or stuck worker costs its current case."""
    next_case, end = start, start + count
    while next_case < end:
        proc = _spawn(seed, next_case, end - next_case, time_limit)
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        stalled = False
        while next_case < end:
            if not sel.select(timeout=STALL_S):
                stalled = True
                break
            line = proc.stdout.readline()
            if not line:
                break
            if not line.startswith('{"i": '):  # something the code under test printed
                continue
            rec = json.loads(line)
            results[rec["i"]] = (rec["kind"], rec["detail"], rec["s"])
            next_case = rec["i"] + 1
        if next_case >= end:
            proc.wait()
            break
        if stalled:
            proc.kill()
        rc = proc.wait()
        kind = "hang" if stalled else "crash"
        why = "stalled" if stalled else f"exited with {rc}"
        results[next_case] = (kind, f"worker {why}", STALL_S)
        next_case += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes at a time")
    parser.add_argument("--time-limit", type=float, default=2.0, help="seconds per case")
    parser.add_argument("--show", type=int, default=3, help="failing inputs to print per kind")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.seed, args.start, args.cases, args.time_limit)
        return 0

    from concurrent.futures import ThreadPoolExecutor

    results: dict[int, tuple[str, str, float]] = {}
    jobs = max(1, args.jobs)
    share = -(-args.cases // jobs)
    began = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        for j in range(jobs):
            lo = args.start + j * share
            n = min(share, args.start + args.cases - lo)
            if n > 0:
                pool.submit(run_range, args.seed, lo, n, args.time_limit, results)
    elapsed = time.perf_counter() - began

    counts = Counter(kind for kind, _, _ in results.values())
    corpus = irfuzz.load_corpus(LIT)
    for kind in irfuzz.BUGS:
        bad = sorted(i for i, (k, _, _) in results.items() if k == kind)
        for i in bad[: args.show]:
            data = irfuzz.make_case(corpus, args.seed, i)
            print(f"--- case {i} ({kind}): {data[:400]!r}\n{results[i][1][-1500:]}\n")
    print(f"IR fuzz: {len(results)} cases, seed {args.seed}, {elapsed:.0f} s, "
          f"{jobs} worker(s) [{machine()}]")  # fmt: skip
    for kind in irfuzz.KINDS:
        print(f"  {LABELS[kind]:<46} {counts[kind]:>6}")
    times = sorted(s for _, _, s in results.values())
    if times:
        p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
        print(f"  seconds per case (parse to IREE parse): median {times[len(times) // 2]:.3f}, "
              f"99th percentile {p99:.3f}, max {times[-1]:.3f}")  # fmt: skip
    return 1 if any(counts[k] for k in irfuzz.BUGS) else 0


if __name__ == "__main__":
    sys.exit(main())
