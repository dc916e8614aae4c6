"""Basic layers: `Linear`, `Embedding`, `Dropout`, `Flatten`, `Identity` and the activations.

Each is a thin Module over `flow.nn.functional`, with PyTorch's constructor
arguments, parameter names and shapes, and default initialization. The
activations' `inplace=` flag is accepted for compatibility; they return a
new tensor either way, which keeps autograd correct.
"""

from __future__ import annotations

import math

from flow.core import dtypes as _dtypes
from flow.ops import basic as O
from flow.core.autograd import no_grad
from flow.core.tensor import Tensor
from . import functional as F
from . import init
from ._module import Module, Parameter


def _factory(op: str, device, dtype) -> _dtypes.dtype:
    """The dtype for a layer's new parameters; eager parameters live on the cpu."""
    if device is not None and str(device).split(":")[0] != "cpu":
        raise RuntimeError(f"{op}: eager parameters live on the host ('cpu'); got device "
                           f"{device!r}. Compile for an accelerator with "
                           "flow.jit(fn, target=...)")  # fmt: skip
    return _dtypes.DEFAULT_FLOAT if dtype is None else _dtypes.as_dtype(dtype)


def _empty(*shape: int, dtype: _dtypes.dtype) -> Parameter:
    return Parameter(O.zeros(*shape, dtype=dtype))


def _fan_in_uniform_(bias: Tensor, weight: Tensor) -> None:
    """PyTorch's default bias init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    init.uniform_(bias, -bound, bound)


class Identity(Module):
    """Returns its input (a placeholder that accepts and ignores any constructor arguments)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """`y = x @ weight.T + bias`, weight (out_features, in_features), bias (out_features,)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device=None, dtype=None) -> None:  # fmt: skip
        super().__init__()
        dt = _factory("Linear", device, dtype)
        self.in_features, self.out_features = in_features, out_features
        self.weight = _empty(out_features, in_features, dtype=dt)
        self.register_parameter("bias", _empty(out_features, dtype=dt) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight from kaiming_uniform_(a=sqrt(5)), bias from U(+-1/sqrt(in_features))."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            _fan_in_uniform_(self.bias, self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")  # fmt: skip


class Bilinear(Module):
    """`y = x1^T A x2 + b` with weight (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None) -> None:  # fmt: skip
        super().__init__()
        dt = _factory("Bilinear", device, dtype)
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        self.weight = _empty(out_features, in1_features, in2_features, dtype=dt)
        self.register_parameter("bias", _empty(out_features, dtype=dt) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        from flow.ops.linalg import einsum

        out = einsum("...i,oij,...j->...o", input1, self.weight, input2)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")  # fmt: skip


class Embedding(Module):
    """A lookup table of `num_embeddings` vectors of size `embedding_dim`, initialized N(0, 1).

    The `padding_idx` row starts at zero (and gets no gradient).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are "
                                      "not supported")  # fmt: skip
        dt = _factory("Embedding", device, dtype)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = _empty(num_embeddings, embedding_dim, dtype=dt)
            self.weight.requires_grad_(not _freeze)
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")  # fmt: skip
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, **kwargs) -> Embedding:  # fmt: skip
        """An Embedding whose weight is `embeddings` (2-D), frozen unless `freeze=False`."""
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, _weight=embeddings, _freeze=freeze, **kwargs)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else f"{s}, padding_idx={self.padding_idx}"


class Dropout(Module):
    """Zero elements with probability `p` while training (scaling the rest by 1/(1-p))."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Flatten(Module):
    """Flatten dims `start_dim..end_dim` into one (keeping the batch dim by default)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return O.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim `dim` into `unflattened_size`."""

    def __init__(self, dim: int, unflattened_size: tuple[int, ...]) -> None:
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        d = O.normalize_dim("Unflatten", self.dim, input.ndim)
        shape = (*input.shape[:d], *self.unflattened_size, *input.shape[d + 1 :])
        return O.reshape(input, *shape)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


# --------------------------------------------------------------------------- activations


class _Activation(Module):
    """An elementwise activation with an accepted-but-unused `inplace` flag."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Activation):
    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input)


class ReLU6(_Activation):
    def forward(self, input: Tensor) -> Tensor:
        return F.relu6(input)


class SiLU(_Activation):
    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input)


class Mish(_Activation):
    def forward(self, input: Tensor) -> Tensor:
        return F.mish(input)


class Hardsigmoid(_Activation):
    def forward(self, input: Tensor) -> Tensor:
        return F.hardsigmoid(input)


class Hardswish(_Activation):
    def forward(self, input: Tensor) -> Tensor:
        return F.hardswish(input)


class SELU(_Activation):
    def forward(self, input: Tensor) -> Tensor:
        return F.selu(input)


class LeakyReLU(_Activation):
    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(_Activation):
    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha)


class Hardtanh(_Activation):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.min_val, self.max_val = min_val, max_val

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else ""
        )


class Threshold(_Activation):
    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.threshold, self.value = threshold, value

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else ""
        )


class GELU(Module):
    """GELU, exact (`approximate="none"`) or with the tanh approximation (`"tanh"`)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


def _stateless(name: str, fn_name: str, doc: str) -> type[Module]:
    """A parameterless activation module calling `F.<fn_name>`."""

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, fn_name)(input)

    return type(name, (Module,), {"forward": forward, "__doc__": doc, "__module__": __name__})


Sigmoid = _stateless("Sigmoid", "sigmoid", "`1 / (1 + exp(-x))`.")
Tanh = _stateless("Tanh", "tanh", "Hyperbolic tangent.")
LogSigmoid = _stateless("LogSigmoid", "logsigmoid", "`log(sigmoid(x))`, computed stably.")
Softsign = _stateless("Softsign", "softsign", "`x / (1 + |x|)`.")
Tanhshrink = _stateless("Tanhshrink", "tanhshrink", "`x - tanh(x)`.")


class _SoftmaxBase(Module):
    _fn = "softmax"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    """`exp(x) / sum(exp(x))` along `dim`."""

    _fn = "softmax"


class LogSoftmax(_SoftmaxBase):
    """`log(softmax(x))` along `dim`, computed stably."""

    _fn = "log_softmax"


class Softmin(_SoftmaxBase):
    """`softmax(-x)` along `dim`."""

    _fn = "softmin"


class PReLU(Module):
    """`max(0, x) + weight * min(0, x)` with a learned slope per channel (dim 1) or one shared."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        dt = _factory("PReLU", device, dtype)
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(O.full((num_parameters,), init, dt))

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        w = self.weight
        if self.num_parameters > 1:
            if input.ndim < 2 or input.shape[1] != self.num_parameters:
                raise ValueError(f"PReLU: expected an input with {self.num_parameters} channels "
                                 f"in dim 1, got shape {list(input.shape)}")  # fmt: skip
            w = O.reshape(w, self.num_parameters, *(1,) * (input.ndim - 2))
        return O.where(input >= 0, input, w * input)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


__all__ = [
    "Identity", "Linear", "Bilinear", "Embedding", "Dropout", "Flatten", "Unflatten", "ReLU",
    "ReLU6", "SiLU", "Mish", "Hardsigmoid", "Hardswish", "SELU", "LeakyReLU", "ELU", "CELU",
    "Hardtanh", "Threshold", "GELU", "Softplus", "Sigmoid", "Tanh", "LogSigmoid", "Softsign",
    "Tanhshrink", "Softmax", "LogSoftmax", "Softmin", "PReLU",
]  # fmt: skip
