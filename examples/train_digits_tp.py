"""Tensor-parallel (Megatron-style) training of an MLP on scikit-learn's digits, eager.

    flow-run -n 2 examples/train_digits_tp.py [--profile trace.json]

The hidden layer is split across the ranks through SBP alone: the first Linear's
weight and bias are split along the output features (`S(0)`, column parallel), so each
rank computes its slice of the hidden activations (`S(1)`); the second Linear's weight
is split along its input features (`S(1)`, row parallel), so the matmul yields partial
sums (`P`) that meet the broadcast bias and the loss. The data is broadcast (`B`). The
backward pass is the mirror image, and every gradient arrives in its parameter's SBP.
No collective is written by hand.

`--plan plan.svg` (or `.html`, `.png`) draws the parallel plan of one training step, traced
as an nn.Graph (forward, backward and update), instead of training.
"""

from __future__ import annotations

import argparse

import numpy as np
from train_digits_dp import load_data

import flow
import flow.nn as nn
from flow import placement, sbp

TENSOR_PARALLEL = {
    "0.weight": sbp.split(0),  # column parallel: out features
    "0.bias": sbp.split(0),
    "2.weight": sbp.split(1),  # row parallel: in features
    "2.bias": sbp.broadcast,
}


class TrainStep(nn.Graph):
    """The eager step below as one compiled step: forward, loss, backward, update."""

    def __init__(self, model, loss_fn, optimizer):
        super().__init__()
        self.model, self.loss_fn = model, loss_fn
        self.add_optimizer(optimizer)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plan", metavar="PATH", help="draw the step's plan (.svg/.html/.png)")
    parser.add_argument("--profile", nargs="?", const="digits_tp.trace.json", metavar="PATH",
                        help="write a Chrome / Perfetto trace of the training steps to PATH "
                             "(one process track per rank; open it in ui.perfetto.dev)")
    args = parser.parse_args()

    rank = flow.env.get_rank()
    ranks = placement.all("cpu")
    flow.manual_seed(args.seed)  # the same initial model on every rank
    (train_x, train_y), (test_x, test_y) = load_data(args.seed)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    model.to_global(ranks, lambda name, _: TENSOR_PARALLEL[name])
    optimizer = flow.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def batch(x: np.ndarray) -> flow.Tensor:
        return flow.tensor(x).to_global(ranks, sbp.broadcast)

    if args.plan:  # trace one step as a graph, draw it, train nothing
        step = TrainStep(model, loss_fn, optimizer)
        picture = step.plan(batch(train_x[: args.batch_size]), batch(train_y[: args.batch_size]))
        if rank == 0:
            picture.save(args.plan)
            print(f"wrote {args.plan}")
        return
    if rank == 0:
        for name, p in model.named_parameters():
            print(f"{name}: global shape {list(p.shape)}, sbp {p.sbp}, "
                  f"this rank's shard {list(p.to_local().shape)}")  # fmt: skip
    shuffle = np.random.default_rng(args.seed)  # the same order on every rank
    prof = flow.profiler.profile() if args.profile else None
    if prof is not None:
        prof.start()
    metrics = flow.profiler.enable_metrics()  # per-step time, communication, memory
    for epoch in range(args.epochs):
        order, mark = shuffle.permutation(len(train_y)), len(metrics.steps)
        total, steps = 0.0, 0
        for start in range(0, len(order) - args.batch_size + 1, args.batch_size):
            idx = order[start : start + args.batch_size]
            loss = loss_fn(model(batch(train_x[idx])), batch(train_y[idx]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.numpy())
            steps += 1
            if prof is not None:
                prof.step()
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {total / steps:.4f}", flush=True)
            print(f"  {flow.profiler.format_summary(metrics.summary(since=mark))}", flush=True)

    if prof is not None:
        prof.stop()
        written = prof.export_chrome_trace(args.profile)  # every rank: rank 0 writes
        if written is not None:
            print(f"profile: {written}")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
    with flow.no_grad():
        pred = model(batch(test_x)).argmax(1).numpy()
    accuracy = float((pred == test_y).mean())
    if rank == 0:
        print(f"test accuracy (tensor parallel, {len(ranks.ranks)} ranks): {accuracy:.4f}")


if __name__ == "__main__":
    main()
