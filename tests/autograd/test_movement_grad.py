"""VJPs of the movement primitives (slice, pad, concat, gather) against finite differences."""

from __future__ import annotations

import numpy as np
from gradcheck import gradcheck, jit_grads_match_eager

import flow


def test_slices_with_steps_and_negative_strides(rng):
    x = rng.standard_normal((5, 7))
    gradcheck(lambda t: t[1:4, ::2], x)
    gradcheck(lambda t: t[::-1, 5:0:-3], x)
    gradcheck(lambda t: t[-1, 1::3] * 2, x)
    gradcheck(lambda t: t[:, 2], x)


def test_pad_concat_and_gather(rng):
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
    gradcheck(lambda t: flow.nn.functional.pad(t, (1, 2, 0, 1), value=3.0), x)
    gradcheck(lambda t: flow.nn.functional.pad(t, (1, 1), mode="reflect"), x)
    gradcheck(lambda a, b: flow.cat([a, b, a], 1), x, y)
    index = np.array([[0, 2, 2], [1, 1, 0]])
    gradcheck(lambda t: flow.gather(t, 1, flow.tensor(index)), x)
    gradcheck(lambda t: flow.gather(t, 0, flow.tensor(np.array([[1, 0, 1]]))), x)
    gradcheck(lambda t: t[flow.tensor([1, 0, 1])], x)  # advanced indexing through gather


def test_embedding_gradient_accumulates_repeated_ids(rng):
    weight = flow.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    ids = flow.tensor([0, 3, 3, 1])
    flow.nn.functional.embedding(ids, weight).sum().backward()
    expected = np.zeros((5, 3))
    for i in (0, 3, 3, 1):
        expected[i] += 1
    np.testing.assert_array_equal(weight.grad.numpy(), expected)


def test_movement_gradients_inside_jit(rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    jit_grads_match_eager(lambda t: flow.cat([t[::2, 1:], t[1::2, :5]], 0).exp(), x)
