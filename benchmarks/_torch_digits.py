"""examples/train_digits.py in PyTorch eager: the same LeNet, data, epochs, batches and schedule.

    python benchmarks/_torch_digits.py --checkpoint DIR/ck.pt

The peer of flow's main job in benchmarks/first_step.py, which times it as a whole process
(import included). Same work per epoch as the flow script: a tqdm bar over a shuffled
DataLoader (batch 32, last partial batch dropped), SGD lr 0.05 momentum 0.9 with a cosine
schedule stepped per batch, test accuracy in batches of 64, and a checkpoint saved.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm


def lenet() -> nn.Module:
    """conv(1→8) → pool → conv(8→16) → pool → fc(64→64) → fc(64→10), as train_digits.LeNet."""
    return nn.Sequential(
        nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 2 * 2, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip


def load_data(seed: int):
    """Digits scaled to [0, 1], split 80/20 with the permutation train_digits.py uses."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    split = int(0.8 * len(labels))
    train, test = order[:split], order[split:]
    return (images[train], labels[train]), (images[test], labels[test])


def evaluate(model: nn.Module, images, labels, batch_size: int) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(labels), batch_size):
            pred = model(torch.from_numpy(images[start : start + batch_size])).argmax(1)
            correct += int((pred.numpy() == labels[start : start + batch_size]).sum())
    model.train()
    return correct / len(labels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", required=True, help="where to save the checkpoint")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    (train_x, train_y), (test_x, test_y) = load_data(args.seed)
    model = lenet()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=args.epochs * (len(train_y) // args.batch_size)
    )
    loader = DataLoader(TensorDataset(torch.from_numpy(train_x), torch.from_numpy(train_y)),
                        batch_size=args.batch_size, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(args.seed))  # fmt: skip
    for epoch in range(args.epochs):
        total, batches = 0.0, 0
        bar = tqdm(loader, desc=f"epoch {epoch + 1}/{args.epochs} (torch eager)", leave=False,
                   mininterval=0.5)  # fmt: skip
        for images, labels in bar:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            scheduler.step()
            total += loss.item()
            batches += 1
            bar.set_postfix(loss=f"{total / batches:.4f}", refresh=False)
        acc = evaluate(model, test_x, test_y, 64)
        print(f"epoch {epoch + 1}: loss {total / batches:.4f}, test accuracy {acc:.4f}")
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "epoch": epoch + 1}  # fmt: skip
        torch.save(state, args.checkpoint)
    print(f"test accuracy (torch eager): {evaluate(model, test_x, test_y, 64):.4f}")


if __name__ == "__main__":
    main()
