"""Train a LeNet-style CNN on scikit-learn's handwritten digits (8x8 images, 10 classes).

    python examples/train_digits.py                # eager mode
    python examples/train_digits.py --graph        # OneFlow's nn.Graph: one compiled step
    python examples/train_digits.py --graph --resume   # continue from the saved checkpoint

The data ships inside scikit-learn (no download). Each epoch shows a progress
bar; the script prints the test accuracy, saves a checkpoint (model,
optimizer, scheduler, epoch) with flow.save, and `--resume` continues from it.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm

import flow
import flow.nn as nn
from flow.utils.data import DataLoader, TensorDataset


class LeNet(nn.Module):
    """conv(1→8) → pool → conv(8→16) → pool → fc(64→64) → fc(64→10)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * 2 * 2, 64),
            nn.ReLU(),
            nn.Linear(64, 10),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


class TrainGraph(nn.Graph):
    """The whole training step — forward, loss, backward, SGD update — compiled once."""

    def __init__(self, model, loss_fn, optimizer, scheduler):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn
        self.add_optimizer(optimizer, lr_sch=scheduler)

    def build(self, images, labels):
        loss = self.loss_fn(self.model(images), labels)
        loss.backward()
        return loss


class EvalGraph(nn.Graph):
    """Predicted classes; the batch dim is dynamic, so one program serves the last batch."""

    def __init__(self, model):
        super().__init__(dynamic={"images": 0})
        self.model = model

    def build(self, images):
        return self.model(images).argmax(1)


def load_data(seed: int):
    """Digits scaled to [0, 1], split 80/20 with a fixed permutation."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]  # (N, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    split = int(0.8 * len(labels))
    train, test = order[:split], order[split:]
    return (images[train], labels[train]), (images[test], labels[test])


def evaluate(model, predict, images, labels, batch_size: int) -> float:
    """Test accuracy; `predict` is a compiled EvalGraph or None for eager mode."""
    model.eval()
    correct = 0
    with flow.no_grad():
        for start in range(0, len(labels), batch_size):
            x = flow.tensor(images[start : start + batch_size])
            pred = (predict(x) if predict is not None else model(x).argmax(1)).numpy()
            correct += int((pred == labels[start : start + batch_size]).sum())
    model.train()
    return correct / len(labels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", action="store_true", help="train with a compiled nn.Graph")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default="digits_checkpoint.safetensors")
    parser.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    args = parser.parse_args()

    flow.manual_seed(args.seed)
    (train_x, train_y), (test_x, test_y) = load_data(args.seed)
    model = LeNet()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = flow.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = flow.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=args.epochs * (len(train_y) // args.batch_size)
    )
    start_epoch = 0
    if args.resume:
        if not os.path.exists(args.checkpoint):
            raise SystemExit(
                f"--resume: no checkpoint at {args.checkpoint}; train without it first"
            )
        state = flow.load(args.checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start_epoch = state["epoch"]
        print(f"resumed from {args.checkpoint} at epoch {start_epoch}")

    loader = DataLoader(TensorDataset(flow.tensor(train_x), flow.tensor(train_y)),
                        batch_size=args.batch_size, shuffle=True, drop_last=True,
                        generator=np.random.default_rng(args.seed + start_epoch))  # fmt: skip
    step = TrainGraph(model, loss_fn, optimizer, scheduler) if args.graph else None
    predict = EvalGraph(model) if args.graph else None
    mode = "nn.Graph" if args.graph else "eager"
    metrics = flow.profiler.enable_metrics()  # per-step time, communication, memory
    for epoch in range(start_epoch, args.epochs):
        t0, mark = time.perf_counter(), len(metrics.steps)
        total, batches = 0.0, 0
        bar = tqdm(
            loader, desc=f"epoch {epoch + 1}/{args.epochs} ({mode})", leave=False, mininterval=0.5
        )
        for images, labels in bar:
            if step is not None:
                loss = step(images, labels)
            else:
                optimizer.zero_grad()
                loss = loss_fn(model(images), labels)
                loss.backward()
                optimizer.step()
                scheduler.step()
            total += loss.item()
            batches += 1
            bar.set_postfix(loss=f"{total / batches:.4f}", refresh=False)
        acc = evaluate(model, predict, test_x, test_y, 64)
        print(f"epoch {epoch + 1}: loss {total / batches:.4f}, test accuracy {acc:.4f} "
              f"({time.perf_counter() - t0:.1f} s)")  # fmt: skip
        print(f"  {flow.profiler.format_summary(metrics.summary(since=mark))}")
        flow.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                   "scheduler": scheduler.state_dict(), "epoch": epoch + 1}, args.checkpoint)  # fmt: skip
    final = evaluate(model, predict, test_x, test_y, 64)
    print(f"test accuracy ({mode}): {final:.4f}")
    print(f"checkpoint: {args.checkpoint}")


if __name__ == "__main__":
    main()
