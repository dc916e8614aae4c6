"""Pipeline-parallel training of an MLP on scikit-learn's digits with a compiled nn.Graph.

    flow-run -n 2 examples/train_digits_pp.py   # stage 0 on rank 0, stage 1 on rank 1
    flow-run -n 4 examples/train_digits_pp.py   # stage 0 on ranks 0-1, stage 1 on ranks 2-3

The MLP is cut in two stages with OneFlow's API: `set_stage(stage_id, placement)` puts the
first Linear+ReLU on the first half of the ranks and the rest on the second half, each
stage's parameters broadcast (`B`) over its ranks. Every batch is cut into micro-batches
(gradient accumulation) that go through the stages in the 1F1B schedule (after a warm-up
forward, each stage alternates one forward and one backward; `--schedule gpipe` runs every
forward first). Activations and their gradients cross the stages as send / recv, which
the compiler inserts where a module's input comes from another placement. With two ranks
per stage (4 ranks) each stage is data parallel: the images enter stage 0, and the
activations and labels enter stage 1, split along the batch (`S(0)`), and the weight
gradients are all-reduced over the stage's two ranks (SBP inference decides the
collectives; `FLOW_COMM_PLAN=1` prints them). Only rank 0 prints.

`--plan plan.svg` (or `.html`, `.png`) draws the step's parallel plan instead of training:
the stages side by side, the boxings between them, and the schedule's timeline per rank.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from train_digits_dp import load_data

import flow
import flow.nn as nn
import flow.nn.functional as F
from flow import placement, sbp


class TrainStep(nn.Graph):
    """One SGD step: forward, loss, backward and update of every micro-batch, pipelined."""

    def __init__(self, first, second, optimizer, stages, args):
        super().__init__()
        self.first, self.second = first, second
        (p0, p1), inner = stages
        self.first.to(nn.graph.GraphModule).set_stage(stage_id=0, placement=p0)
        self.second.to(nn.graph.GraphModule).set_stage(stage_id=1, placement=p1, sbp=inner)
        self.config.set_gradient_accumulation_steps(args.micro_batches)
        self.config.set_pipeline_schedule(args.schedule)
        self.add_optimizer(optimizer)

    def build(self, images, labels):
        loss = F.cross_entropy(self.second(self.first(images)), labels)
        loss.backward()
        return loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--schedule", choices=("1f1b", "gpipe"), default="1f1b")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plan", metavar="PATH", help="draw the step's plan (.svg/.html/.png)")
    parser.add_argument("--profile", nargs="?", const="digits_pp.trace.json", metavar="PATH",
                        help="write a Chrome / Perfetto trace of the training steps to PATH "
                             "(one process track per rank; open it in ui.perfetto.dev)")
    args = parser.parse_args()

    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    if world < 2 or world % 2:
        raise SystemExit("launch on an even number of ranks: flow-run -n 2 " + __file__)
    half = world // 2
    p0, p1 = placement("cpu", list(range(half))), placement("cpu", list(range(half, world)))
    inner = sbp.split(0) if half > 1 else sbp.broadcast  # data parallel inside a stage

    flow.manual_seed(args.seed)  # the same initial model on every rank
    (train_x, train_y), (test_x, test_y) = load_data(args.seed)
    first = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU())
    second = nn.Sequential(nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                           nn.Linear(args.hidden, 10))  # fmt: skip
    first.to_global(p0, sbp.broadcast)
    second.to_global(p1, sbp.broadcast)
    params = [*first.parameters(), *second.parameters()]
    optimizer = flow.optim.SGD(params, lr=args.lr, momentum=0.9)
    step = TrainStep(first, second, optimizer, ((p0, p1), inner), args)

    def on(where: placement, x: np.ndarray) -> flow.Tensor:
        """`x` (the same on every rank) as a global tensor on `where`, split inside the stage."""
        return flow.tensor(x).to_global(where, sbp.broadcast).to_global(sbp=inner)

    if args.plan:  # trace one step, draw it, train nothing
        picture = step.plan(on(p0, train_x[: args.batch_size]), on(p1, train_y[: args.batch_size]))
        if rank == 0:
            picture.save(args.plan)
            print(f"wrote {args.plan}")
        return
    if rank == 0:
        print(f"{world} ranks: stage 0 on ranks {p0.ranks}, stage 1 on ranks {p1.ranks}; "
              f"{args.micro_batches} micro-batches of {args.batch_size // args.micro_batches}, "
              f"{args.schedule}")  # fmt: skip
    shuffle = np.random.default_rng(args.seed)  # the same order on every rank
    start, first_step = time.perf_counter(), None
    prof = flow.profiler.profile() if args.profile else None
    if prof is not None:
        prof.start()
    metrics = flow.profiler.enable_metrics()  # per-step time, communication, memory
    for epoch in range(args.epochs):
        order, mark = shuffle.permutation(len(train_y)), len(metrics.steps)
        total, steps = 0.0, 0
        for i in range(0, len(order) - args.batch_size + 1, args.batch_size):
            idx = order[i : i + args.batch_size]
            loss = step(on(p0, train_x[idx]), on(p1, train_y[idx]))  # compiled on first call
            total += float(loss.numpy())
            steps += 1
            if prof is not None:
                prof.step()
            if first_step is None:
                first_step = time.perf_counter() - start
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {total / steps:.4f}", flush=True)
            print(f"  {flow.profiler.format_summary(metrics.summary(since=mark))}", flush=True)
    if prof is not None:
        prof.stop()
        written = prof.export_chrome_trace(args.profile)  # every rank: rank 0 writes
        if written is not None:
            print(f"profile: {written}")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
    seconds = time.perf_counter() - start - (first_step or 0.0)

    with flow.no_grad():  # eager inference: the hidden activations move to stage 1's ranks
        hidden = first(on(p0, test_x)).to_global(p1, inner)
        pred = second(hidden).argmax(1).numpy()
    accuracy = float((pred == test_y).mean())
    if rank == 0:
        print(f"first step (trace and compile) {first_step:.1f} s, the other steps {seconds:.1f} s")
        print(f"test accuracy (pipeline parallel, {world} ranks): {accuracy:.4f}")


if __name__ == "__main__":
    main()
