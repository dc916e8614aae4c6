"""flow.optim.lr_scheduler: lr sequences against hand-computed lists and closed forms,
chaining, SequentialLR/WarmupLR composition, checkpoints and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import flow
from flow import optim
from flow.optim import lr_scheduler as sched

R2 = math.sqrt(2) / 4  # (1 + cos(pi / 4)) / 2 - 1 / 2


def make_opt(lr=1.0, groups=1) -> optim.SGD:
    params = [flow.tensor([1.0, 2.0], requires_grad=True) for _ in range(groups)]
    return optim.SGD([{"params": [p]} for p in params], lr=lr)


def lrs(scheduler, epochs: int) -> list[float]:
    """The lr of group 0 at epochs 0 .. epochs - 1 (construction is epoch 0)."""
    out = [scheduler.optimizer.param_groups[0]["lr"]]
    for _ in range(epochs - 1):
        scheduler.optimizer.step()
        scheduler.step()
        out.append(scheduler.optimizer.param_groups[0]["lr"])
    return out


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "make, expected",
    [(lambda o: sched.StepLR(o, step_size=3, gamma=0.1), [1, 1, 1, 0.1, 0.1, 0.1, 0.01, 0.01]),
     (lambda o: sched.MultiStepLR(o, milestones=[2, 5, 5], gamma=0.5),
      [1, 1, 0.5, 0.5, 0.5, 0.125, 0.125]),
     (lambda o: sched.ExponentialLR(o, gamma=0.5), [1, 0.5, 0.25, 0.125]),
     (lambda o: sched.ConstantLR(o, factor=0.5, total_iters=3), [0.5, 0.5, 0.5, 1, 1]),
     (lambda o: sched.LinearLR(o, start_factor=0.25, total_iters=4),
      [0.25, 0.4375, 0.625, 0.8125, 1, 1, 1]),
     (lambda o: sched.LinearLR(o, start_factor=1.0, end_factor=0.5, total_iters=2),
      [1, 0.75, 0.5, 0.5]),
     (lambda o: sched.CosineAnnealingLR(o, T_max=4),
      [1, 0.5 + R2, 0.5, 0.5 - R2, 0, 0.5 - R2, 0.5, 0.5 + R2, 1]),
     (lambda o: sched.LambdaLR(o, lambda e: 0.9**e), [1, 0.9, 0.81, 0.729]),
     (lambda o: sched.CosineDecayLR(o, decay_steps=4, alpha=0.2),
      [1, 0.2 + 0.8 * (0.5 + R2), 0.6, 0.2 + 0.8 * (0.5 - R2), 0.2, 0.2])],
    ids=["step", "multistep", "exponential", "constant", "linear-warmup", "linear-decay",
         "cosine", "lambda", "cosine-decay"],
)  # fmt: skip
def test_lr_sequences(make, expected):
    scheduler = make(make_opt(lr=1.0))
    close(lrs(scheduler, len(expected)), expected)
    assert scheduler.last_epoch == len(expected) - 1
    close(scheduler.get_last_lr(), [expected[-1]])


@pytest.mark.parametrize(
    "make",
    [lambda o: sched.StepLR(o, step_size=3, gamma=0.5),
     lambda o: sched.MultiStepLR(o, milestones=[3, 7, 7, 12], gamma=0.3),
     lambda o: sched.ExponentialLR(o, gamma=0.8),
     lambda o: sched.ConstantLR(o, factor=0.25, total_iters=6),
     lambda o: sched.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=7),
     lambda o: sched.CosineAnnealingLR(o, T_max=6, eta_min=0.01)],
    ids=["step", "multistep", "exponential", "constant", "linear", "cosine"],
)  # fmt: skip
def test_recursive_form_matches_closed_form(make):
    scheduler = make(make_opt(lr=0.3, groups=2))
    seq = lrs(scheduler, 30)  # three cosine periods and a half
    closed = [scheduler._closed_form(0.3, e) for e in range(30)]
    np.testing.assert_allclose(seq, closed, rtol=1e-9, atol=1e-12)


def test_cosine_annealing_closed_form_values():
    scheduler = sched.CosineAnnealingLR(make_opt(lr=0.1), T_max=10, eta_min=0.001)
    seq = lrs(scheduler, 21)
    close(seq[5], (0.1 + 0.001) / 2)
    close(seq[10], 0.001)
    close(seq[20], 0.1)


def test_schedulers_chain():
    """The recursive forms compose: two schedulers stepping one optimizer multiply."""
    opt = make_opt(lr=1.0)
    a, b = sched.ExponentialLR(opt, gamma=0.9), sched.StepLR(opt, step_size=2, gamma=0.1)
    out = [opt.param_groups[0]["lr"]]
    for _ in range(3):
        a.step()
        b.step()
        out.append(opt.param_groups[0]["lr"])
    close(out, [1, 0.9, 0.081, 0.0729])


def test_per_group_base_lrs_and_initial_lr():
    opt = optim.SGD([{"params": [flow.tensor([1.0], requires_grad=True)], "lr": 0.1},
                     {"params": [flow.tensor([1.0], requires_grad=True)], "lr": 0.02}])  # fmt: skip
    scheduler = sched.LambdaLR(opt, [lambda e: 0.5**e, lambda e: e + 1])
    assert scheduler.base_lrs == [0.1, 0.02]
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.02]
    scheduler.step()
    scheduler.step()
    close(scheduler.get_last_lr(), [0.025, 0.06])


def test_sequential_warmup_then_decay():
    opt = make_opt(lr=1.0)
    warmup = sched.LinearLR(opt, start_factor=0.1, total_iters=3)
    decay = sched.ExponentialLR(opt, gamma=0.9)
    scheduler = sched.SequentialLR(opt, [warmup, decay], milestones=[3])
    close(lrs(scheduler, 7), [0.1, 0.4, 0.7, 1.0, 0.9, 0.81, 0.729])


def test_sequential_warmup_then_cosine():
    opt = make_opt(lr=1.0)
    warmup = sched.LinearLR(opt, start_factor=0.1, total_iters=2)
    cosine = sched.CosineAnnealingLR(opt, T_max=4)
    scheduler = sched.SequentialLR(opt, [warmup, cosine], milestones=[2])
    close(lrs(scheduler, 7), [0.1, 0.55, 1.0, 0.5 + R2, 0.5, 0.5 - R2, 0])


def test_sequential_restarts_each_scheduler_at_its_milestone():
    # Each later scheduler starts at its own epoch 0 (the base lr) at its milestone.
    opt = make_opt(lr=1.0)
    constant = sched.ConstantLR(opt, factor=0.1, total_iters=2)
    decay = sched.ExponentialLR(opt, gamma=0.9)
    scheduler = sched.SequentialLR(opt, [constant, decay], milestones=[2])
    close(lrs(scheduler, 5), [0.1, 0.1, 1.0, 0.9, 0.81])


def test_sequential_with_a_zero_milestone_starts_with_the_second_scheduler():
    opt = make_opt(lr=1.0)
    constant = sched.ConstantLR(opt, factor=0.5, total_iters=10)
    decay = sched.ExponentialLR(opt, gamma=0.5)
    close(lrs(sched.SequentialLR(opt, [constant, decay], milestones=[0]), 3), [1, 0.5, 0.25])


def test_warmup_lr():
    constant = sched.WarmupLR(make_opt(lr=1e-3), warmup_factor=0.5, warmup_iters=5,
                              warmup_method="constant")  # fmt: skip
    close(lrs(constant, 7), [5e-4] * 5 + [1e-3] * 2)
    linear = sched.WarmupLR(make_opt(lr=1e-3), warmup_factor=0.5, warmup_iters=5)
    close(lrs(linear, 7), [5e-4, 6e-4, 7e-4, 8e-4, 9e-4, 1e-3, 1e-3])


def test_warmup_lr_wrapping_a_scheduler():
    def decay(e):  # CosineDecayLR(decay_steps=5, alpha=0.1) as a factor of the base lr
        return 0.1 + 0.9 * (1 + math.cos(math.pi * min(e, 5) / 5)) / 2

    opt = make_opt(lr=1e-3)
    cosine = sched.CosineDecayLR(opt, decay_steps=5, alpha=0.1)
    scheduler = sched.WarmupLR(cosine, warmup_factor=0.5, warmup_iters=2)
    # The ramp ends at the decay's value at epoch 2, which continues on the global epoch.
    expected = [5e-4, 1e-3 * (0.5 + (decay(2) - 0.5) / 2)] + [1e-3 * decay(e) for e in range(2, 7)]
    close(lrs(scheduler, 7), expected)
    np.testing.assert_allclose(expected[2:4], [0.000689, 0.000410], atol=1e-6)  # OneFlow's doc

    opt = make_opt(lr=1.0)
    step = sched.StepLR(opt, step_size=2, gamma=0.1)
    prefixed = sched.WarmupLR(step, warmup_factor=0.5, warmup_iters=2, warmup_prefix=True)
    close(lrs(prefixed, 6), [0.5, 0.75, 1.0, 1.0, 0.1, 0.1])


def test_tensor_lr_is_updated_in_place():
    lr = flow.tensor(1.0, dtype=flow.float64)
    opt = optim.SGD([flow.tensor([1.0], requires_grad=True)], lr=lr)
    scheduler = sched.ExponentialLR(opt, gamma=0.5)
    scheduler.step()
    assert opt.param_groups[0]["lr"] is lr and lr.item() == 0.5
    assert scheduler.get_last_lr() == [0.5]


def test_step_with_epoch_uses_closed_form_and_warns():
    scheduler = sched.StepLR(make_opt(lr=1.0), step_size=2, gamma=0.5)
    with pytest.warns(UserWarning, match="deprecated"):
        scheduler.step(5)
    assert scheduler.last_epoch == 5 and scheduler.get_last_lr() == [0.25]


# --------------------------------------------------------------------------- checkpoints


class Halve:
    """A callable object, whose attributes LambdaLR checkpoints."""

    def __init__(self, base: float):
        self.base = base

    def __call__(self, epoch: int) -> float:
        return self.base * 0.5**epoch


@pytest.mark.parametrize(
    "make",
    [lambda o: sched.StepLR(o, step_size=2, gamma=0.5),
     lambda o: sched.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
     lambda o: sched.LambdaLR(o, Halve(1.0)),
     lambda o: sched.SequentialLR(o, [sched.LinearLR(o, start_factor=0.2, total_iters=2),
                                      sched.ExponentialLR(o, gamma=0.7)], milestones=[2])],
    ids=["step", "cosine", "lambda", "sequential"],
)  # fmt: skip
def test_state_dict_round_trip(make):
    opt = make_opt(lr=0.5)
    scheduler = make(opt)
    lrs(scheduler, 4)
    saved_opt, saved = opt.state_dict(), scheduler.state_dict()
    assert "optimizer" not in saved

    opt2 = make_opt(lr=0.5)
    scheduler2 = make(opt2)
    opt2.load_state_dict(saved_opt)
    scheduler2.load_state_dict(saved)
    assert scheduler2.last_epoch == scheduler.last_epoch
    close(lrs(scheduler2, 6), lrs(scheduler, 6))


def test_lambda_state_dict_keeps_callable_object_state():
    opt = make_opt()
    fn = Halve(1.0)
    scheduler = sched.LambdaLR(opt, fn)
    fn.base = 3.0
    saved = scheduler.state_dict()
    assert saved["lr_lambdas"] == [{"base": 3.0}]
    other = Halve(1.0)
    sched.LambdaLR(make_opt(), other).load_state_dict(saved)
    assert other.base == 3.0
    assert sched.LambdaLR(make_opt(), lambda e: 1.0).state_dict()["lr_lambdas"] == [None]


# --------------------------------------------------------------------------- errors


def test_errors():
    opt = make_opt()
    with pytest.raises(TypeError, match="expected a flow.optim.Optimizer, got list"):
        sched.StepLR([], step_size=1)
    with pytest.raises(ValueError, match="step_size must be a positive int, got 0"):
        sched.StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="start_factor must be in"):
        sched.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="end_factor must be in"):
        sched.LinearLR(opt, end_factor=1.5)
    with pytest.raises(ValueError, match="T_max must be positive"):
        sched.CosineAnnealingLR(opt, T_max=0)
    with pytest.raises(ValueError, match="expected 2 lr_lambdas"):
        sched.LambdaLR(make_opt(groups=2), [lambda e: 1.0])
    with pytest.raises(KeyError, match="initial_lr"):
        sched.StepLR(make_opt(), step_size=1, last_epoch=3)
    other = make_opt()
    a, b = sched.ExponentialLR(opt, 0.9), sched.ExponentialLR(other, 0.9)
    with pytest.raises(ValueError, match="scheduler 1 belongs to a different optimizer"):
        sched.SequentialLR(opt, [a, b], milestones=[2])
    with pytest.raises(ValueError, match="one milestone fewer than schedulers"):
        sched.SequentialLR(opt, [a], milestones=[2])
    with pytest.raises(ValueError, match="warmup_method must be"):
        sched.WarmupLR(opt, warmup_method="cosine")
    with pytest.raises(TypeError, match="no closed form"):
        sched.WarmupLR(sched.LambdaLR(opt, lambda e: 1.0))


def test_resume_with_last_epoch():
    opt = make_opt(lr=1.0)
    lrs(sched.StepLR(opt, step_size=2, gamma=0.5), 3)  # leaves initial_lr in the groups
    resumed = sched.CosineAnnealingLR(opt, T_max=4, last_epoch=1)
    assert resumed.last_epoch == 2
    close(resumed.get_last_lr(), [0.5])  # the closed form at epoch 2, from initial_lr
