"""Recurrent layers: `RNN`, `LSTM`, `GRU` and their one-step cells `RNNCell`, `LSTMCell`,
`GRUCell`, with PyTorch's constructor arguments, forward signatures, parameter names (so a
PyTorch state_dict loads), gate order and initialization.

They are composed from existing tensor ops (`F.linear`, `sigmoid`, `tanh`, slicing, `stack`,
`cat`), so autograd, eager mode and traced code (`flow.jit`, `nn.Graph`) need no new
primitive. Each layer projects the inputs of all its time steps with one matmul before the
time loop; the loop itself is unrolled in Python, so in traced code a sequence of length L
becomes L copies of the step, straight-line IR (a new sequence length traces again).

Gate equations (PyTorch's):

- RNN: `h' = act(W_ih x + b_ih + W_hh h + b_hh)`, act tanh or relu;
- LSTM, gates i, f, g, o: `c' = f * c + i * g`, `h' = o * tanh(c')` (times `W_hr` with
  `proj_size`);
- GRU, gates r, z, n: `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`,
  `h' = (1 - z) * n + z * h`.
"""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real

from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops import basic as O
from flow.ops.math import sigmoid
from flow.ops.movement import cat, chunk, stack, unbind

from . import functional as F
from . import init
from ._layers import _empty, _factory
from ._module import Module

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# --------------------------------------------------------------------------- one time step


def _rnn_step(act, xp: Tensor, h: Tensor, w_hh: Tensor) -> Tensor:
    """`xp` is the input projection with both biases already added."""
    return act(xp + F.linear(h, w_hh))


def _lstm_step(xp: Tensor, h: Tensor, c: Tensor, w_hh: Tensor,
               w_hr: Tensor | None) -> tuple[Tensor, Tensor]:  # fmt: skip
    i, f, g, o = chunk(xp + F.linear(h, w_hh), 4, -1)
    c = sigmoid(f) * c + sigmoid(i) * O.tanh(g)
    h = sigmoid(o) * O.tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr)), c


def _gru_step(xp: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    """`xp` is the input projection with only b_ih added: b_hn sits inside `r * (...)`."""
    xr, xz, xn = chunk(xp, 3, -1)
    hr, hz, hn = chunk(F.linear(h, w_hh, b_hh), 3, -1)
    r, z = sigmoid(xr + hr), sigmoid(xz + hz)
    n = O.tanh(xn + r * hn)
    return n + z * (h - n)  # (1 - z) * n + z * h


# --------------------------------------------------------------------------- validation


def _positive_int(op: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value <= 0:
        raise op_error(op, f"{name} should be a positive integer, got {value!r}")
    return int(value)


def _activation(op: str, nonlinearity):
    if nonlinearity == "tanh":
        return O.tanh
    if nonlinearity == "relu":
        return O.relu
    raise op_error(op, f"unknown nonlinearity {nonlinearity!r}; expected 'tanh' or 'relu'")


def _float_input(op: str, name: str, x, dtype) -> Tensor:
    if type(x).__name__ == "PackedSequence":
        raise op_error(op, "PackedSequence inputs are not supported; pass a padded tensor of "
                       "shape (L, N, H_in) (or (N, L, H_in) with batch_first)",
                       cls=TypeError)  # fmt: skip
    if not isinstance(x, Tensor):
        raise op_error(op, f"expected {name} to be a flow.Tensor, got {type(x).__name__}",
                       cls=TypeError)  # fmt: skip
    if not x.dtype.is_floating_point:
        raise op_error(op, f"expected {name} to be floating point, got {x.dtype!r}",
                       cls=TypeError)  # fmt: skip
    if x.dtype is not dtype:
        raise op_error(op, f"expected {name} of dtype {dtype!r} (the parameters' dtype), got "
                       f"{x.dtype!r}", cls=TypeError)  # fmt: skip
    return x


def _state(op: str, name: str, hx, want: tuple[int, ...], batched: bool, dtype) -> Tensor:
    """Check an initial state against its (batched) shape `want`; add the batch dim (dim
    `len(want) - 2`) when the input is unbatched."""
    hx = _float_input(op, name, hx, dtype)
    dim = len(want) - 2
    if not batched:
        want = want[:dim] + want[dim + 1 :]
    if tuple(hx.shape) != want:
        kind = "batched" if batched else "unbatched"
        raise op_error(op, f"expected {name} of shape {list(want)} for this {kind} input, "
                       f"got {list(hx.shape)}")  # fmt: skip
    return hx if batched else O.unsqueeze(hx, dim)


# --------------------------------------------------------------------------- the layers


class RNNBase(Module):
    """What `RNN`, `LSTM` and `GRU` share: parameters, validation and the layer loop.

    For layer k and direction d (suffix `_reverse` for the backward one) the parameters are
    `weight_ih_l{k}` (G*H, H_in) for layer 0 else (G*H, D*H_out), `weight_hh_l{k}`
    (G*H, H_out), `bias_ih_l{k}` and `bias_hh_l{k}` (G*H,), and `weight_hr_l{k}`
    (proj_size, H) with `proj_size`, where G is the number of gates (1, 4 or 3), D is 2 when
    bidirectional and H_out is `proj_size` or else `hidden_size`. All start
    U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        op = "LSTM" if mode == "LSTM" else "GRU" if mode == "GRU" else "RNN"
        if mode not in _GATES:
            raise op_error(op, f"unknown mode {mode!r}; expected one of {list(_GATES)}")
        dt = _factory(op, device, dtype)
        input_size = _positive_int(op, "input_size", input_size)
        hidden_size = _positive_int(op, "hidden_size", hidden_size)
        num_layers = _positive_int(op, "num_layers", num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, Real) or not 0 <= dropout <= 1:
            raise op_error(op, f"dropout should be a number in [0, 1], got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{op}: dropout applies between layers, so dropout={dropout} with "
                          "num_layers=1 has no effect", stacklevel=3)  # fmt: skip
        if isinstance(proj_size, bool) or not isinstance(proj_size, Integral) or proj_size < 0:
            raise op_error(op, f"proj_size should be a non-negative integer, got "
                           f"{proj_size!r}")  # fmt: skip
        if proj_size and mode != "LSTM":
            raise op_error(op, "proj_size is only supported by LSTM")
        if proj_size >= hidden_size:
            raise op_error(op, f"proj_size ({proj_size}) has to be smaller than hidden_size "
                           f"({hidden_size})")  # fmt: skip
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bool(bias), batch_first
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        self.proj_size = int(proj_size)
        gates = _GATES[mode] * hidden_size
        out = proj_size or hidden_size
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            for suffix in self._suffixes():
                fan_in = input_size if layer == 0 else out * len(self._suffixes())
                shapes = {"weight_ih": (gates, fan_in), "weight_hh": (gates, out)}
                if self.bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                for kind, shape in shapes.items():
                    name = f"{kind}_l{layer}{suffix}"
                    self.register_parameter(name, _empty(*shape, dtype=dt))
                    self._flat_weights_names.append(name)
        self.reset_parameters()

    def _suffixes(self) -> tuple[str, ...]:
        return ("", "_reverse") if self.bidirectional else ("",)

    def reset_parameters(self) -> None:
        """Every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    @property
    def all_weights(self) -> list[list[Tensor]]:
        """The parameters of each (layer, direction), in PyTorch's order."""
        per = len(self._flat_weights_names) // (self.num_layers * len(self._suffixes()))
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i : i + per]]
                for i in range(0, len(names), per)]  # fmt: skip

    def _weights(self, layer: int, suffix: str) -> tuple:
        def get(kind):
            return getattr(self, f"{kind}_l{layer}{suffix}", None)

        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get(
            "weight_hr")  # fmt: skip

    def _name(self) -> str:
        return "RNN" if self.mode.startswith("RNN") else self.mode

    def _prepare(self, input, hx: tuple) -> tuple[Tensor, list[Tensor], bool]:
        """The input as (L, N, H_in) and the initial states as (D*num_layers, N, H)."""
        op, dt = self._name(), self.weight_ih_l0.dtype
        x = _float_input(op, "input", input, dt)
        if x.ndim not in (2, 3):
            raise op_error(op, f"expected input of 3 dims (L, N, H_in), 3 dims (N, L, H_in) "
                           f"with batch_first, or 2 dims (L, H_in) unbatched; got shape "
                           f"{list(x.shape)}")  # fmt: skip
        if x.shape[-1] != self.input_size:
            raise op_error(op, f"expected input with {self.input_size} features (input_size) "
                           f"in its last dim, got shape {list(x.shape)}")  # fmt: skip
        batched = x.ndim == 3
        if not batched:
            x = O.unsqueeze(x, 1)
        elif self.batch_first:
            x = O.transpose(x, 0, 1)
        length, n, _ = x.shape
        if length == 0:
            raise op_error(op, f"expected a sequence of at least one step, got input of "
                           f"shape {list(input.shape)}")  # fmt: skip
        layers = self.num_layers * len(self._suffixes())
        sizes = [self.proj_size or self.hidden_size, self.hidden_size][: len(hx)]
        states = []
        for (name, h), size in zip(hx, sizes):
            if h is None:
                states.append(O.zeros(layers, n, size, dtype=dt))
            else:
                states.append(_state(op, name, h, (layers, n, size), batched, dt))
        return x, states, batched

    def _run(self, x: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        """All layers over x (L, N, H_in); returns the output and the final states."""
        mode, d_count = self.mode, len(self._suffixes())
        act = O.relu if mode == "RNN_RELU" else O.tanh
        starts = [unbind(s, 0) for s in states]
        finals: list[list[Tensor]] = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(self._suffixes()):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, suffix)
                xp = F.linear(x, w_ih, b_ih)  # every time step in one matmul
                if b_hh is not None and mode != "GRU":
                    xp = xp + b_hh
                state = [s[layer * d_count + d] for s in starts]
                steps = unbind(xp, 0)
                ys: list[Tensor] = [None] * len(steps)  # type: ignore[list-item]
                for t in reversed(range(len(steps))) if d else range(len(steps)):
                    if mode == "LSTM":
                        state = list(_lstm_step(steps[t], *state, w_hh, w_hr))
                    elif mode == "GRU":
                        state = [_gru_step(steps[t], state[0], w_hh, b_hh)]
                    else:
                        state = [_rnn_step(act, steps[t], state[0], w_hh)]
                    ys[t] = state[0]
                outs.append(stack(ys, 0))
                for f, s in zip(finals, state):
                    f.append(s)
            x = outs[0] if d_count == 1 else cat(outs, 2)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, [stack(f, 0) for f in finals]

    def _forward_one_state(self, op: str, input, hx) -> tuple[Tensor, Tensor]:
        """`forward` of the layers whose state is one tensor h (RNN, GRU)."""
        x, states, batched = self._prepare(input, (("hx", _single_state(op, hx)),))
        out, states = self._run(x, states)
        out, (h,) = self._finish(out, states, batched)
        return out, h

    def _finish(self, out: Tensor, states: list[Tensor], batched: bool):
        if not batched:
            return O.squeeze(out, 1), [O.squeeze(s, 1) for s in states]
        if self.batch_first:
            out = O.transpose(out, 0, 1)
        return out, states

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


def _single_state(op: str, hx):
    if isinstance(hx, (tuple, list)):
        raise op_error(op, f"expected hx to be one tensor (h_0), got a {type(hx).__name__}",
                       cls=TypeError)  # fmt: skip
    return hx


class RNN(RNNBase):
    """A multi-layer Elman RNN, `h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)`.

    `forward(input, hx=None)` takes input (L, N, H_in), or (N, L, H_in) with `batch_first`,
    or unbatched (L, H_in), and h_0 (D*num_layers, N, H) (unbatched (D*num_layers, H));
    it returns `output` (L, N, D*H) (batch-first or unbatched like the input) and `h_n`.
    The time loop is unrolled in Python: traced, it becomes straight-line IR.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None) -> None:  # fmt: skip
        _activation("RNN", nonlinearity)
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)  # fmt: skip
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        return self._forward_one_state("RNN", input, hx)


class GRU(RNNBase):
    """A multi-layer GRU with gates r, z, n (PyTorch's equations and order):
    `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`, `h' = (1 - z) * n + z * h`.

    Shapes as in `RNN`. The time loop is unrolled in Python: traced, it becomes straight-line
    IR.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:  # fmt: skip
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)  # fmt: skip

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        return self._forward_one_state("GRU", input, hx)


class LSTM(RNNBase):
    """A multi-layer LSTM with gates i, f, g, o (PyTorch's order):
    `c' = sigmoid(f) * c + sigmoid(i) * tanh(g)`, `h' = sigmoid(o) * tanh(c')`, and with
    `proj_size > 0` `h' = W_hr h'` (so h has proj_size features).

    `forward(input, hx=None)` takes input as `RNN` does and `hx = (h_0, c_0)`, of shapes
    (D*num_layers, N, H_out) and (D*num_layers, N, hidden_size) (unbatched without N); it
    returns `output, (h_n, c_n)`. The time loop is unrolled in Python: traced, it becomes
    straight-line IR.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device=device,
                         dtype=dtype)  # fmt: skip

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None):
        h0 = c0 = None
        if hx is not None:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise op_error("LSTM", f"expected hx to be a tuple (h_0, c_0), got "
                               f"{type(hx).__name__}", cls=TypeError)  # fmt: skip
            h0, c0 = hx
            if h0 is None or c0 is None:
                raise op_error("LSTM", "expected both h_0 and c_0 in hx, got None",
                               cls=TypeError)  # fmt: skip
        x, states, batched = self._prepare(input, (("h_0", h0), ("c_0", c0)))
        out, states = self._run(x, states)
        out, (h, c) = self._finish(out, states, batched)
        return out, (h, c)


# --------------------------------------------------------------------------- the cells


class RNNCellBase(Module):
    """One time step: parameters `weight_ih` (G*H, H_in), `weight_hh` (G*H, H), `bias_ih`
    and `bias_hh` (G*H,), all from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        op = type(self).__name__
        dt = _factory(op, device, dtype)
        self.input_size = _positive_int(op, "input_size", input_size)
        self.hidden_size = _positive_int(op, "hidden_size", hidden_size)
        self.bias = bool(bias)
        g = self._gates * self.hidden_size
        self.weight_ih = _empty(g, self.input_size, dtype=dt)
        self.weight_hh = _empty(g, self.hidden_size, dtype=dt)
        self.register_parameter("bias_ih", _empty(g, dtype=dt) if self.bias else None)
        self.register_parameter("bias_hh", _empty(g, dtype=dt) if self.bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _prepare(self, input, states: tuple) -> tuple[Tensor, list[Tensor], bool]:
        """The input as (N, H_in) and the states as (N, H)."""
        op, dt = type(self).__name__, self.weight_ih.dtype
        x = _float_input(op, "input", input, dt)
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise op_error(op, f"expected input of shape (N, {self.input_size}) or "
                           f"({self.input_size},), got {list(x.shape)}")  # fmt: skip
        batched = x.ndim == 2
        if not batched:
            x = O.unsqueeze(x, 0)
        n, out = x.shape[0], []
        for name, h in states:
            if h is None:
                out.append(O.zeros(n, self.hidden_size, dtype=dt))
            else:
                out.append(_state(op, name, h, (n, self.hidden_size), batched, dt))
        return x, out, batched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity!r}"
        return s


def _unbatch(t: Tensor, batched: bool) -> Tensor:
    return t if batched else O.squeeze(t, 0)


class RNNCell(RNNCellBase):
    """`h' = act(W_ih x + b_ih + W_hh h + b_hh)`, act tanh or relu; `forward(input, hx=None)`
    with input (N, H_in) or (H_in,) and hx (N, H) or (H,) (zeros when None)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:  # fmt: skip
        act = _activation("RNNCell", nonlinearity)
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self._act, self.nonlinearity = act, nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), batched = self._prepare(input, (("hx", _single_state("RNNCell", hx)),))
        xp = F.linear(x, self.weight_ih, self.bias_ih)
        if self.bias_hh is not None:
            xp = xp + self.bias_hh
        return _unbatch(_rnn_step(self._act, xp, h, self.weight_hh), batched)


class LSTMCell(RNNCellBase):
    """One LSTM step with gates i, f, g, o; `forward(input, hx=None)` with hx = (h, c),
    each (N, H) or (H,) (zeros when None); returns `(h', c')`."""

    _gates = 4

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None):
        h0 = c0 = None
        if hx is not None:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise op_error("LSTMCell", f"expected hx to be a tuple (h, c), got "
                               f"{type(hx).__name__}", cls=TypeError)  # fmt: skip
            h0, c0 = hx
        x, (h, c), batched = self._prepare(input, (("h", h0), ("c", c0)))
        xp = F.linear(x, self.weight_ih, self.bias_ih)
        if self.bias_hh is not None:
            xp = xp + self.bias_hh
        h, c = _lstm_step(xp, h, c, self.weight_hh, None)
        return _unbatch(h, batched), _unbatch(c, batched)


class GRUCell(RNNCellBase):
    """One GRU step with gates r, z, n: `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`,
    `h' = (1 - z) * n + z * h`; `forward(input, hx=None)` as `RNNCell`."""

    _gates = 3

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), batched = self._prepare(input, (("hx", _single_state("GRUCell", hx)),))
        xp = F.linear(x, self.weight_ih, self.bias_ih)
        return _unbatch(_gru_step(xp, h, self.weight_hh, self.bias_hh), batched)


__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
