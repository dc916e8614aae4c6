"""OneFlow's tensor tutorial, with `import oneflow as flow` changed to `import flow`.

The statements follow the tutorial's sections (creating tensors, Tensor vs
tensor, attributes, operations, indexing and slicing, joining, arithmetic);
each printed value of the tutorial is asserted here instead.
"""

from __future__ import annotations

import numpy as np

import flow


def test_creating_tensors():
    x1 = flow.tensor([[1, 2], [3, 4]])
    x2 = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x1.dtype is flow.int64 and x2.dtype is flow.float32
    assert repr(x1) == "tensor([[1, 2],\n        [3, 4]], dtype=flow.int64)"

    x3 = flow.tensor(np.ones((2, 3)))
    x4 = flow.tensor(np.random.rand(2, 3))
    assert x3.dtype is flow.float64 and x4.shape == flow.Size([2, 3])

    x5 = flow.ones(2, 3)
    x6 = flow.zeros(2, 3)
    x7 = flow.eye(3)
    np.testing.assert_array_equal(x5.numpy(), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(x6.numpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(x7.numpy(), np.eye(3, dtype=np.float32))
    x8 = flow.randn(2, 3)
    assert x8.shape == (2, 3) and x8.dtype is flow.float32


def test_tensor_class_and_factory():
    t = flow.Tensor(2, 3)  # sizes: a float32 tensor of that shape
    assert t.shape == (2, 3) and t.dtype is flow.float32
    t = flow.Tensor([[1, 2], [3, 4]])  # data: always float32
    assert t.dtype is flow.float32 and t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert flow.tensor([[1, 2], [3, 4]]).dtype is flow.int64


def test_attributes():
    x9 = flow.randn(1, 4)
    assert x9.shape == flow.Size([1, 4])
    assert x9.dtype is flow.float32
    assert x9.device == "cpu"


def test_operations():
    x10 = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(x10.numpy(), [[1.0, 2.0], [3.0, 4.0]])
    x11 = flow.ones(2, 3).to("cpu")
    assert x11.shape == (2, 3)

    tensor = flow.ones(4, 4)
    np.testing.assert_array_equal(tensor[0].numpy(), np.ones(4))  # first row
    np.testing.assert_array_equal(tensor[:, 0].numpy(), np.ones(4))  # first column
    np.testing.assert_array_equal(tensor[..., -1].numpy(), np.ones(4))  # last column
    tensor[:, 1] = 0
    expected = np.ones((4, 4), np.float32)
    expected[:, 1] = 0
    np.testing.assert_array_equal(tensor.numpy(), expected)

    t1 = flow.cat([tensor, tensor, tensor], dim=1)
    np.testing.assert_array_equal(t1.numpy(), np.concatenate([expected] * 3, 1))

    y1 = tensor @ tensor.T
    y2 = tensor.matmul(tensor.T)
    np.testing.assert_array_equal(y1.numpy(), expected @ expected.T)
    np.testing.assert_array_equal(y2.numpy(), y1.numpy())
    z1 = tensor * tensor
    z2 = tensor.mul(tensor)
    np.testing.assert_array_equal(z1.numpy(), expected * expected)
    np.testing.assert_array_equal(z2.numpy(), z1.numpy())

    agg = tensor.sum()
    assert agg.item() == 12.0 and isinstance(agg.item(), float)

    tensor.add_(5)
    np.testing.assert_array_equal(tensor.numpy(), expected + 5)


def test_reshaping():
    x = flow.arange(12)
    assert x.dtype is flow.int64
    y = x.reshape(3, 4)
    assert y.view(-1, 6).shape == (2, 6)
    assert y.permute(1, 0).shape == (4, 3) and y.transpose(0, 1).shape == (4, 3)
    assert y.unsqueeze(0).shape == (1, 3, 4) and y.unsqueeze(0).squeeze(0).shape == (3, 4)
    assert y.flatten().tolist() == list(range(12))
    np.testing.assert_array_equal(y[1:, ::2].numpy(), np.arange(12).reshape(3, 4)[1:, ::2])
