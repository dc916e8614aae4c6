"""Dynamic dims from two static programs (lowering/dynamic_dims.py), on lowered programs of
traced functions: which dims become dynamic, which sizes the dynamic program serves, and
which pairs of programs it refuses. No IREE compile here (tests/frontend/test_dynamic.py
runs the dynamic programs)."""

from __future__ import annotations

import numpy as np
import pytest

import flow
from flow.lowering import run_pipeline, to_iree_text
from flow.lowering.dynamic_dims import NotDynamic, generalize


def lowered(fn, *shapes):
    """`fn` traced on zeros of `shapes` and lowered to IREE input."""
    args = [flow.zeros(*s) for s in shapes]
    return run_pipeline(flow.jit(fn).lower(*args).module, "flow-to-iree-input")


W = flow.tensor(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32))


def mlp(x, y):
    """A batch through a layer, a mean over the batch (a divisor that is the batch size)."""
    h = flow.relu(x @ W)
    return (h - y).square().mean(), h.reshape(-1).sum(0, keepdim=True)


def test_batch_dim_of_both_arguments_is_one_symbol():
    dyn = generalize(lowered(mlp, (4, 16), (4, 8)), lowered(mlp, (6, 16), (6, 8)))
    assert dyn.dynamic_args == {0: (0,), 1: (0,)}
    assert len(dyn.sources) == 1  # x and y share the batch size
    text = to_iree_text(dyn.module)
    assert "tensor<?x16xf32>" in text and "tensor<?x8xf32>" in text
    assert "tensor.dim" in text
    for n in (1, 5, 33):
        assert dyn.matches(lowered(mlp, (n, 16), (n, 8)))


def test_independent_sizes_are_separate_symbols():
    def f(x, y):
        return x.sum(1), y.sum(0)

    dyn = generalize(lowered(f, (4, 3), (5, 2)), lowered(f, (6, 3), (9, 2)))
    assert dyn.dynamic_args == {0: (0,), 1: (0,)}
    assert len(dyn.sources) == 2
    assert dyn.matches(lowered(f, (7, 3), (2, 2)))
    assert not dyn.matches(lowered(f, (7, 4), (2, 2)))  # a dim that was static changed


def test_derived_sizes_are_linear_forms():
    def f(x):  # a flatten (2 * n) and a concatenation (n + 3)
        return x.reshape(-1), flow.cat([x[:, 0], flow.zeros(3)])

    dyn = generalize(lowered(f, (4, 2)), lowered(f, (7, 2)))
    forms = {(form.k, form.c) for form in dyn.forms.values()}
    assert {(1, 0), (2, 0), (1, 3)} <= forms
    assert dyn.matches(lowered(f, (11, 2)))


def test_a_branch_on_the_size_is_not_served():
    def f(x):
        return x * 2 if x.shape[0] > 4 else x.sum(0)

    dyn = generalize(lowered(f, (6, 3)), lowered(f, (8, 3)))
    assert dyn.matches(lowered(f, (9, 3)))
    assert not dyn.matches(lowered(f, (3, 3)))


def test_a_nonlinear_size_is_not_served():
    def f(x):  # n * n elements: two sizes fit a line through them, a third does not
        n = x.shape[0]
        return flow.zeros(n * n) + x.sum()

    dyn = generalize(lowered(f, (4, 2)), lowered(f, (6, 2)))
    assert dyn.matches(lowered(f, (6, 2)))
    assert not dyn.matches(lowered(f, (5, 2)))


def test_a_size_in_a_float_constant():
    def divided(x):
        return x / x.shape[0]  # the divisor 4.0 / 6.0 is the size: a slot

    dyn = generalize(lowered(divided, (4, 2)), lowered(divided, (6, 2)))
    assert dyn.matches(lowered(divided, (5, 2)))

    def scaled(x):
        return x * (1 / x.shape[0])  # 0.25 vs 0.1666...: no integer in the program

    with pytest.raises(NotDynamic, match="differ in more than sizes"):
        generalize(lowered(scaled, (4, 2)), lowered(scaled, (6, 2)))


def test_other_programs_are_refused():
    with pytest.raises(NotDynamic, match="differ in more than sizes"):
        generalize(lowered(lambda x: x * 2, (4,)), lowered(lambda x: x + 2, (6,)))
    with pytest.raises(NotDynamic, match="no argument dim differs"):
        generalize(lowered(lambda x: x * 2, (4,)), lowered(lambda x: x * 2, (4,)))
