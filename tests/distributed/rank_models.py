"""The small model and training step that rank scripts train on several ranks and compare with
single-device training."""

from __future__ import annotations

import flow
import flow.nn as nn
import flow.nn.functional as F


def mlp() -> nn.Module:
    """6 -> 8 -> 3 with ReLU, the same weights on every call (seed 0)."""
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


class Step(nn.Graph):
    """One cross-entropy training step with `opt`, returning the loss."""

    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, xb, yb):
        loss = F.cross_entropy(self.model(xb), yb)
        loss.backward()
        return loss
