"""One full training step of an MLP and of a CNN: nn.Graph equals eager (parameters after)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import flow
import flow.nn as nn


def _mlp():
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(),
                         nn.Linear(16, 5))  # fmt: skip


def _cnn():
    # no conv bias before BatchNorm: its gradient is zero up to rounding, which Adam amplifies
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
        nn.Dropout(0.0), nn.Linear(6, 5),
    )  # fmt: skip


class Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


@pytest.mark.parametrize("make,shape", [(_mlp, (8, 12)), (_cnn, (8, 1, 8, 8))], ids=["mlp", "cnn"])
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_training_steps_match_eager(make, shape, optimizer):
    flow.manual_seed(0)
    eager = make()
    graph_model = copy.deepcopy(eager)

    def opt_for(m):
        if optimizer == "sgd":
            return flow.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
        return flow.optim.AdamW(m.parameters(), lr=0.01)

    opt_e, opt_g = opt_for(eager), opt_for(graph_model)
    step = Step(graph_model, opt_g)
    rng = np.random.default_rng(1)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    for _ in range(3):
        x = rng.standard_normal(shape).astype(np.float32)
        y = rng.integers(0, 5, shape[0]).astype(np.int64)
        opt_e.zero_grad()
        loss_e = loss_fn(eager(flow.tensor(x)), flow.tensor(y))
        loss_e.backward()
        opt_e.step()
        loss_g = step(x, y)
        np.testing.assert_allclose(loss_g.numpy(), loss_e.numpy(), rtol=1e-4, atol=1e-5)
    state_e, state_g = eager.state_dict(), graph_model.state_dict()
    assert state_e.keys() == state_g.keys()
    for key in state_e:  # parameters and BatchNorm running statistics
        np.testing.assert_allclose(state_g[key].numpy(), state_e[key].numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=key)  # fmt: skip
