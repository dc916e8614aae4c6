"""`nn.MultiheadAttention` and the Transformer layers, with PyTorch's constructor arguments,
forward signatures, parameter names (so a PyTorch state_dict loads) and initialization.

`TransformerEncoderLayer` / `TransformerDecoderLayer` are post-norm by default
(`norm_first=False`: `x = norm(x + block(x))`) and pre-norm with `norm_first=True`
(`x = x + block(norm(x))`). `TransformerEncoder` / `TransformerDecoder` stack deep
copies of one layer; `Transformer` is the encoder-decoder model of Vaswani et al.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

from flow.core import dtypes as _dtypes
from flow.core.tensor import Tensor
from flow.ops import basic as O
from flow.ops.movement import cat, narrow, pad

from . import functional as F
from . import init
from ._attention import _NEG_INF, _attend, _float_tensor
from ._containers import ModuleList
from ._layers import Dropout, Linear, _factory
from ._module import Module, Parameter
from ._norm_layers import LayerNorm




def _additive_mask(op: str, name: str, mask, dtype: _dtypes.dtype) -> Tensor | None:
    """An MHA mask as a float bias: bool True (masked out) becomes -inf, floats are kept."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"{op}: expected {name} to be a tensor, got {type(mask).__name__}")
    if mask.dtype is _dtypes.bool_:
        return O.where(mask, _NEG_INF, O.zeros(*mask.shape, dtype=dtype))
    if not mask.dtype.is_floating_point:
        raise TypeError(f"{op}: expected {name} to be bool or floating point, got "
                        f"{mask.dtype!r}")  # fmt: skip
    return O.to(mask, dtype)


class MultiheadAttention(Module):
    """Attention over `num_heads` heads of `embed_dim // num_heads` features each.

    Parameters and their state_dict names are PyTorch's: `in_proj_weight` (3E, E) and
    `in_proj_bias` (3E,) when key and value have `embed_dim` features (else
    `q_proj_weight`, `k_proj_weight`, `v_proj_weight`), `out_proj.weight` / `.bias`, and
    `bias_k` / `bias_v` with `add_bias_kv`. Inputs are (L, N, E), or (N, L, E) with
    `batch_first`, or unbatched (L, E).
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be positive, "
                             f"got embed_dim={embed_dim} and num_heads={num_heads}")  # fmt: skip
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim must be divisible by num_heads, "
                             f"got embed_dim={embed_dim} and num_heads={num_heads}")  # fmt: skip
        if not 0 <= dropout <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout}")
        dt = _factory("MultiheadAttention", device, dtype)
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim, self.batch_first = embed_dim // num_heads, batch_first
        self.add_zero_attn = add_zero_attn
        e = embed_dim

        def new(*shape):
            return Parameter(O.zeros(*shape, dtype=dt))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = new(3 * e, e)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight, self.k_proj_weight = new(e, e), new(e, self.kdim)
            self.v_proj_weight = new(e, self.vdim)
            self.register_parameter("in_proj_weight", None)
        self.register_parameter("in_proj_bias", new(3 * e) if bias else None)
        self.out_proj = Linear(e, e, bias=bias, dtype=dt)
        self.register_parameter("bias_k", new(1, 1, e) if add_bias_kv else None)
        self.register_parameter("bias_v", new(1, 1, e) if add_bias_kv else None)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's: xavier_uniform_ projections, zero biases, xavier_normal_ bias_k/v."""
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight,
                  self.v_proj_weight):  # fmt: skip
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def _projection(self, i: int) -> tuple[Tensor, Tensor | None]:
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            w = narrow(self.in_proj_weight, 0, i * e, e)
        else:
            w = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)[i]
        b = None if self.in_proj_bias is None else narrow(self.in_proj_bias, 0, i * e, e)
        return w, b

    def _check(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        op = "MultiheadAttention"
        for name, t in (("query", query), ("key", key), ("value", value)):
            _float_tensor(op, name, t)
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(f"{op}: expected query, key and value all 3-D (batched) or all "
                             f"2-D (unbatched), got shapes {list(query.shape)}, "
                             f"{list(key.shape)}, {list(value.shape)}")  # fmt: skip
        feats = (query.shape[-1], key.shape[-1], value.shape[-1])
        if feats != (self.embed_dim, self.kdim, self.vdim):
            raise ValueError(f"{op}: expected query, key and value with {self.embed_dim}, "
                             f"{self.kdim} and {self.vdim} features, got "
                             f"{list(feats)}")  # fmt: skip
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(f"{op}: key shape {list(key.shape)} does not match value shape "
                             f"{list(value.shape)}")  # fmt: skip

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """(attn_output, attn_weights); weights (N, L, S), or (N, H, L, S) unaveraged."""
        op = "MultiheadAttention"
        self._check(query, key, value)
        batched = query.ndim == 3
        if batched and self.batch_first:
            query, key, value = (O.transpose(t, 0, 1) for t in (query, key, value))
        if not batched:
            query, key, value = (O.unsqueeze(t, 1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = O.unsqueeze(key_padding_mask, 0)
        length, n, e = query.shape
        source, h, hd = key.shape[0], self.num_heads, self.head_dim
        if key.shape[1] != n:
            raise ValueError(f"{op}: query batch size {n} does not match key batch size "
                             f"{key.shape[1]}")  # fmt: skip
        if is_causal and attn_mask is None:
            raise RuntimeError(f"{op}: is_causal is a hint that attn_mask is causal; pass the "
                               "causal attn_mask too")  # fmt: skip
        mask = _additive_mask(op, "attn_mask", attn_mask, query.dtype)
        if mask is not None:
            if mask.ndim == 2:
                want = (length, source)
            else:
                want = (n * h, length, source)
            if tuple(mask.shape) != want:
                raise ValueError(f"{op}: expected attn_mask of shape {list(want[-2:])} or "
                                 f"{[n * h, length, source]}, got "
                                 f"{list(attn_mask.shape)}")  # fmt: skip
        kpm = _additive_mask(op, "key_padding_mask", key_padding_mask, query.dtype)
        if kpm is not None and tuple(kpm.shape) != (n, source):
            raise ValueError(f"{op}: expected key_padding_mask of shape {[n, source]}, got "
                             f"{list(key_padding_mask.shape)}")  # fmt: skip
        q, k, v = (F.linear(t, *self._projection(i)) for i, t in enumerate((query, key, value)))
        if self.bias_k is not None:
            k = cat([k, O.expand(self.bias_k, 1, n, e)], 0)
            v = cat([v, O.expand(self.bias_v, 1, n, e)], 0)
            mask = None if mask is None else pad(mask, (0, 1))
            kpm = None if kpm is None else pad(kpm, (0, 1))
        # (T, N, E) -> (N, H, T, hd)
        q, k, v = (O.permute(O.reshape(t, t.shape[0], n, h, hd), 1, 2, 0, 3) for t in (q, k, v))
        if self.add_zero_attn:
            k = cat([k, O.zeros(n, h, 1, hd, dtype=k.dtype)], 2)
            v = cat([v, O.zeros(n, h, 1, hd, dtype=v.dtype)], 2)
            mask = None if mask is None else pad(mask, (0, 1))
            kpm = None if kpm is None else pad(kpm, (0, 1))
        s = k.shape[2]
        bias = None
        if mask is not None:
            bias = O.reshape(mask, 1, 1, length, s) if mask.ndim == 2 else (
                O.reshape(mask, n, h, length, s))  # fmt: skip
        if kpm is not None:
            kb = O.reshape(kpm, n, 1, 1, s)
            bias = kb if bias is None else bias + kb
        p = self.dropout if self.training else 0.0
        out, w = _attend(q, k, v, None, bias, p, 1.0 / math.sqrt(hd))
        out = self.out_proj(O.reshape(O.permute(out, 2, 0, 1, 3), length, n, e))
        if batched and self.batch_first:
            out = O.transpose(out, 0, 1)
        if not batched:
            out = O.squeeze(out, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            w = O.mean(w, 1)
        return out, (w if batched else O.squeeze(w, 0))

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"



# --------------------------------------------------------------------------- Transformer layers


def _activation(activation) -> Callable:
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise TypeError(f"activation should be 'relu', 'gelu' or a callable, got "
                        f"{type(activation).__name__}")  # fmt: skip
    return activation


def _check_heads(op: str, d_model: int, nhead: int) -> None:
    if nhead <= 0 or d_model % nhead:
        raise ValueError(f"{op}: d_model must be divisible by nhead, got d_model={d_model} "
                         f"and nhead={nhead}")  # fmt: skip


class _Layer(Module):
    """What the encoder and decoder layers share: attention blocks (`n` of them with the
    feed-forward block: the encoder has 2, the decoder 3), each with dropout, residual and
    LayerNorm, under PyTorch's submodule names."""

    def _build(self, op: str, n: int, d_model: int, nhead: int, dim_feedforward: int,
               dropout: float, activation, layer_norm_eps: float, batch_first: bool,
               norm_first: bool, bias: bool, device, dtype) -> None:  # fmt: skip
        _check_heads(op, d_model, nhead)
        kw = {"device": device, "dtype": dtype}
        attn = {"dropout": dropout, "bias": bias, "batch_first": batch_first, **kw}
        self.self_attn = MultiheadAttention(d_model, nhead, **attn)
        if n == 3:
            self.multihead_attn = MultiheadAttention(d_model, nhead, **attn)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        for i in range(1, n + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        for i in range(1, n + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)
        self._last = f"dropout{n}"

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]  # fmt: skip
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        out = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, self._last)(out)


class TransformerEncoderLayer(_Layer):
    """Self-attention then a feed-forward block, each with dropout, residual and LayerNorm."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        self._build("TransformerEncoderLayer", 2, d_model, nhead, dim_feedforward, dropout,
                    activation, layer_norm_eps, batch_first, norm_first, bias, device, dtype)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool = False) -> Tensor:  # fmt: skip
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerDecoderLayer(_Layer):
    """Self-attention, attention over the encoder's memory, then a feed-forward block."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        self._build("TransformerDecoderLayer", 3, d_model, nhead, dim_feedforward, dropout,
                    activation, layer_norm_eps, batch_first, norm_first, bias, device, dtype)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:  # fmt: skip
        x = tgt
        sa = (tgt_mask, tgt_key_padding_mask, tgt_is_causal)
        mha = (memory_mask, memory_key_padding_mask, memory_is_causal)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), *sa)
            x = x + self._mha_block(self.norm2(x), memory, *mha)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, *sa))
        x = self.norm2(x + self._mha_block(x, memory, *mha))
        return self.norm3(x + self._ff_block(x))

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal) -> Tensor:
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)[0]  # fmt: skip
        return self.dropout2(x)


def _clones(layer: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


class TransformerEncoder(Module):
    """`num_layers` deep copies of `encoder_layer`, then the optional final `norm`."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:  # fmt: skip
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:  # fmt: skip
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal) and mask is not None)  # fmt: skip
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """`num_layers` deep copies of `decoder_layer`, then the optional final `norm`."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:  # fmt: skip
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:  # fmt: skip
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal) and tgt_mask is not None,
                      memory_is_causal=memory_is_causal)  # fmt: skip
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """An encoder-decoder Transformer; weights with more than one dim start xavier_uniform_."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable = F.relu, custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:  # fmt: skip
        super().__init__()
        _check_heads("Transformer", d_model, nhead)
        kw = {"device": device, "dtype": dtype}
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                batch_first, norm_first, bias)  # fmt: skip
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            layer = TransformerEncoderLayer(*args, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            layer = TransformerDecoderLayer(*args, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:  # fmt: skip
        batched = src.ndim == 3
        b = 0 if self.batch_first else 1
        if batched and src.shape[b] != tgt.shape[b]:
            raise RuntimeError(f"the batch number of src and tgt must be equal, got "
                               f"{src.shape[b]} and {tgt.shape[b]}")  # fmt: skip
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"the feature number of src and tgt must be equal to d_model "
                               f"({self.d_model}), got {src.shape[-1]} and "
                               f"{tgt.shape[-1]}")  # fmt: skip
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)  # fmt: skip
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)  # fmt: skip

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """An (sz, sz) float mask: -inf above the diagonal (future positions), 0 elsewhere."""
        import numpy as np

        dt = _factory("generate_square_subsequent_mask", device, dtype)
        m = np.triu(np.full((sz, sz), -np.inf), k=1).astype(dt.np_dtype)
        return O.tensor(m)


__all__ = [
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer",
    "TransformerEncoder", "TransformerDecoder", "Transformer",
]  # fmt: skip
