"""The profiler's cost on the MLP training step (benchmarks/train_step.py's, as an nn.Graph).

    python benchmarks/profiler_overhead.py [--rounds 15] [--steps 10]

Three ways of running the same compiled step: before any profile has ever been started in
the process ("never enabled": the hooks' globals have always been None), inside a recording
`flow.profiler.profile()` ("on"), and after it stopped ("off"). "never" is timed first, then
"on" and "off" in alternating rounds (`--rounds` of `--steps` steps each), so a burst of load
on the machine hits both alike. Prints the median step time of each and its ratio to "never";
the goal is on/never under 1.03 and off/never 1.00 (within the noise: off runs the same code
as never, one test of a global per instrumented path). The minimum of the rounds is printed
too (on a loaded machine it is the steadier figure), and the median ratio of each "on" round
to the "off" round after it. Also prints what one span costs.
"""

from __future__ import annotations

import argparse
import statistics
import time

from _bench import machine, median_time, settle, train_step
from train_step import SIZES, _data, model_and_opt


def _model():
    import flow
    import flow.nn as nn

    x, y, weights = _data()
    model, opt = model_and_opt(weights)
    graph = train_step(model, opt, nn.CrossEntropyLoss())
    return graph, flow.tensor(x), flow.tensor(y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    import flow
    from flow.core import profiling

    graph, xt, yt = _model()
    graph(xt, yt)
    settle(graph)
    t_end = time.perf_counter() + 3.0  # past the first calls, where a cpu program picks its
    while time.perf_counter() < t_end:  # driver, and long enough for the machine to settle
        graph(xt, yt)
    assert profiling.ACTIVE is None

    def steps() -> float:
        t0 = time.perf_counter()
        for _ in range(args.steps):
            graph(xt, yt)
        return (time.perf_counter() - t0) / args.steps

    never = [steps() for _ in range(args.rounds)]
    on, off, spans = [], [], 0
    for _ in range(args.rounds):
        with flow.profiler.profile() as prof:
            on.append(steps())
        spans = len(prof.events()) / args.steps
        off.append(steps())
    rows = {"never enabled": never, "on": on, "off (after a profile)": off}
    base_med, base_min = statistics.median(never), min(never)
    print(f"profiler overhead, MLP train step {SIZES} as nn.Graph [{machine()}]")
    print(f"  {'':24} {'median ms':>10} {'vs never':>9} {'min ms':>9} {'vs never':>9}")
    for name, ts in rows.items():
        med, low = statistics.median(ts), min(ts)
        print(f"  {name:24} {med * 1e3:10.3f} {med / base_med:8.3f}x {low * 1e3:9.3f} "
              f"{low / base_min:8.3f}x")
    print(f"  on / off, round by round (median): "
          f"{statistics.median(a / b for a, b in zip(on, off)):.3f}x")
    print(f"  spans recorded per step while on: {spans:.1f}")

    # the absolute cost per compiled call, where a step is smallest: a 4-element jit call
    tiny = flow.jit(lambda a: a * 2.0, sync_compile=True)
    a = flow.ones(4)
    for _ in range(20):
        tiny(a)

    def tiny_calls() -> float:
        t0 = time.perf_counter()
        for _ in range(200):
            tiny(a)
        return (time.perf_counter() - t0) / 200

    t_on, t_off = [], []
    for _ in range(args.rounds):
        with flow.profiler.profile():
            t_on.append(tiny_calls())
        t_off.append(tiny_calls())
    print(f"  a 4-element jit call: off {min(t_off) * 1e6:.1f} us, on {min(t_on) * 1e6:.1f} us "
          f"(min of rounds; the difference is what the profiler adds to one compiled call)")

    from flow.targets.events import Recorder

    rec = Recorder()

    def hundred_spans():
        for _ in range(100):
            with rec.span("x", "user"):
                pass

    per_span = median_time(hundred_spans, repeat=20) / 100
    print(f"  one span (enter, exit, append): {per_span * 1e6:.2f} us")


if __name__ == "__main__":
    main()
