"""Data-parallel training of an MLP on scikit-learn's digits with eager global tensors.

    flow-run -n 2 examples/train_digits_dp.py [--profile trace.json]

Every rank builds the same model (one seed), `Module.to_global` makes its parameters
broadcast (`B`) global tensors, and each batch is split along the batch dim (`S(0)`), so
every rank computes the forward and backward pass of its share of the batch. The weight
gradients come out of the matmuls as partial sums (`P`) and are all-reduced to the
parameters' `B` when they reach `.grad`; SGD then updates every replica alike. No
collective is written by hand: the SBP signatures of the ops decide them.
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_digits

import flow
import flow.nn as nn
from flow import placement, sbp


def load_data(seed: int):
    """Digits (8x8 images flattened, scaled to [0, 1]), split 80/20 with a fixed permutation."""
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    split = int(0.8 * len(labels))
    train, test = order[:split], order[split:]
    return (images[train], labels[train]), (images[test], labels[test])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", nargs="?", const="digits_dp.trace.json", metavar="PATH",
                        help="write a Chrome / Perfetto trace of the training steps to PATH "
                             "(one process track per rank; open it in ui.perfetto.dev)")
    args = parser.parse_args()

    rank = flow.env.get_rank()
    ranks = placement.all("cpu")
    flow.manual_seed(args.seed)  # the same initial model on every rank
    (train_x, train_y), (test_x, test_y) = load_data(args.seed)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    model.to_global(ranks, sbp.broadcast)
    optimizer = flow.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def batch(x: np.ndarray) -> flow.Tensor:
        """The whole batch (the same on every rank) as a global tensor split along dim 0."""
        return flow.tensor(x).to_global(ranks, sbp.broadcast).to_global(sbp=sbp.split(0))

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
        print(f"test accuracy (data parallel, {len(ranks.ranks)} ranks): {accuracy:.4f}")


if __name__ == "__main__":
    main()
