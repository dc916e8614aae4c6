"""nn.Graph: a compiled training step equals the eager one; state stays in the module's tensors."""

from __future__ import annotations

import numpy as np
import pytest

import flow
from flow import optim
from flow.nn._graph import Graph

RNG = np.random.default_rng(7)
X = RNG.standard_normal((8, 4)).astype(np.float32)
Y = RNG.standard_normal((8, 1)).astype(np.float32)


def _params():
    w = flow.tensor(np.full((4, 1), 0.1, np.float32), requires_grad=True)
    b = flow.tensor(np.zeros(1, np.float32), requires_grad=True)
    return w, b


def _loss(x, y, w, b):
    return ((x @ w + b - y) ** 2).mean()


class Regression(Graph):
    def __init__(self, w, b, opt, sch=None, accumulate=1):
        super().__init__()
        self.w, self.b = w, b
        self.add_optimizer(opt, lr_sch=sch)
        self.config.set_gradient_accumulation_steps(accumulate)

    def build(self, x, y):
        loss = _loss(x, y, self.w, self.b)
        loss.backward()
        return loss


@pytest.mark.parametrize("make_opt", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True),
    lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
])  # fmt: skip
def test_graph_steps_equal_eager_steps(make_opt):
    we, be = _params()
    wg, bg = _params()
    opt_e, opt_g = make_opt([we, be]), make_opt([wg, bg])
    sch_e = optim.lr_scheduler.StepLR(opt_e, step_size=2, gamma=0.5)
    sch_g = optim.lr_scheduler.StepLR(opt_g, step_size=2, gamma=0.5)
    graph = Regression(wg, bg, opt_g, sch_g)
    for _ in range(5):
        opt_e.zero_grad()
        loss_e = _loss(flow.tensor(X), flow.tensor(Y), we, be)
        loss_e.backward()
        opt_e.step()
        sch_e.step()
        loss_g = graph(X, Y)
        np.testing.assert_allclose(loss_g.numpy(), loss_e.numpy(), rtol=1e-5)
        np.testing.assert_allclose(wg.numpy(), we.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(bg.numpy(), be.numpy(), rtol=1e-5, atol=1e-7)
    assert float(opt_g.param_groups[0]["lr"]) == pytest.approx(float(opt_e.param_groups[0]["lr"]))
    assert len(graph._compiled) == 1  # the lr is an input: scheduler steps never recompile
    assert wg.grad is None  # gradients live inside the compiled step


def test_gradient_accumulation_matches_the_full_batch_step():
    we, be = _params()
    wg, bg = _params()
    opt_e, opt_g = optim.SGD([we, be], lr=0.1), optim.SGD([wg, bg], lr=0.1)
    graph = Regression(wg, bg, opt_g, accumulate=4)
    for _ in range(3):
        opt_e.zero_grad()
        loss_e = _loss(flow.tensor(X), flow.tensor(Y), we, be)
        loss_e.backward()
        opt_e.step()
        loss_g = graph(X, Y)
        np.testing.assert_allclose(loss_g.numpy(), loss_e.numpy(), rtol=1e-5)  # mean of 4 means
        np.testing.assert_allclose(wg.numpy(), we.numpy(), rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="needs a batch dim divisible by 4"):
        graph(X[:6], Y[:6])


def test_graph_shows_its_ir_and_validates_config():
    w, b = _params()
    graph = Regression(w, b, optim.SGD([w, b], lr=0.1))
    with pytest.raises(RuntimeError, match="not compiled yet"):
        graph.ir()
    graph(X, Y)
    text = graph.ir()
    assert "func.func @Regression(%x: tensor<8x4xf32>, %y: tensor<8x1xf32>" in text
    assert "flow.matmul" in text
    with pytest.raises(ValueError, match="expected an int >= 1"):
        graph.config.set_gradient_accumulation_steps(0)

    class NoBuild(Graph):
        pass

    with pytest.raises(NotImplementedError, match="must define build"):
        NoBuild()(X)
