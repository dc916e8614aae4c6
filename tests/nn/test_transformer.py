"""Attention and Transformer layers: the core math against numpy, PyTorch's modules (their
state_dict loaded into flow's) for outputs and gradients, flow.jit and an nn.Graph training
step against eager, and the construction errors."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import flow
import flow.nn as nn
import flow.nn.functional as F

# torch notes that its nested-tensor fast path is off for these configurations
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")


def _rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed: the PyTorch comparison needs it (numpy tests "
                    "cover the math)")  # fmt: skip
    return torch


def _np_softmax(s):
    m = np.max(s, -1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    d = e.sum(-1, keepdims=True)
    return e / np.where(d == 0, 1, d)


def _np_sdpa(q, k, v, keep=None, bias=None, scale=None):
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) * scale
    if bias is not None:
        s = s + bias
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    return _np_softmax(s) @ v


# --------------------------------------------------------------------------- numpy reference


@pytest.mark.parametrize("mask", ["none", "bool", "float", "causal", "scale"])
def test_sdpa_matches_numpy(mask):
    q, k, v = _rand(2, 3, 4, 8, seed=1), _rand(2, 3, 6, 8, seed=2), _rand(2, 3, 6, 5, seed=3)
    keep = _rand(4, 6, seed=4) > 0
    keep[1] = False  # a fully masked row: zeros, not NaN
    fbias = np.where(keep, 0.0, -np.inf).astype(np.float32) + _rand(4, 6, seed=5)
    args, want = {}, None
    if mask == "bool":
        args, want = {"attn_mask": flow.tensor(keep)}, _np_sdpa(q, k, v, keep=keep)
    elif mask == "float":
        args, want = {"attn_mask": flow.tensor(fbias)}, _np_sdpa(q, k, v, bias=fbias)
    elif mask == "causal":
        args, want = {"is_causal": True}, _np_sdpa(q, k, v, keep=np.tril(np.ones((4, 6), bool)))
    elif mask == "scale":
        args, want = {"scale": 0.3}, _np_sdpa(q, k, v, scale=0.3)
    else:
        want = _np_sdpa(q, k, v)
    got = F.scaled_dot_product_attention(flow.tensor(q), flow.tensor(k), flow.tensor(v), **args)
    assert got.shape == (2, 3, 4, 5)
    assert np.isfinite(got.numpy()).all()
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    if mask in ("bool", "float"):
        np.testing.assert_array_equal(got.numpy()[:, :, 1], 0.0)


def test_sdpa_gradient_matches_finite_differences():
    q, k, v = (_rand(2, 3, 4, seed=s, dtype=np.float64) for s in (1, 2, 3))
    keep = np.array([[1, 1, 0], [0, 0, 0], [1, 1, 1]], bool)
    w = _rand(2, 3, 4, seed=9, dtype=np.float64)

    def loss(qn):
        return float((_np_sdpa(qn, k, v, keep=keep) * w).sum())

    fq = flow.tensor(q, requires_grad=True)
    out = F.scaled_dot_product_attention(fq, flow.tensor(k), flow.tensor(v),
                                         attn_mask=flow.tensor(keep))  # fmt: skip
    (out * flow.tensor(w)).sum().backward()
    num = np.zeros_like(q)
    for i in np.ndindex(q.shape):
        d = np.zeros_like(q)
        d[i] = 1e-6
        num[i] = (loss(q + d) - loss(q - d)) / 2e-6
    np.testing.assert_allclose(fq.grad.numpy(), num, rtol=1e-5, atol=1e-7)
    assert np.isfinite(fq.grad.numpy()).all()


def _np_mha(m: nn.MultiheadAttention, q, k, v, kpm):
    """Multi-head attention in numpy from m's parameters; inputs (L, N, E), kpm bool (N, S)."""
    e, h = m.embed_dim, m.num_heads
    w, b = m.in_proj_weight.numpy(), m.in_proj_bias.numpy()
    proj = [x @ w[i * e:(i + 1) * e].T + b[i * e:(i + 1) * e] for i, x in enumerate((q, k, v))]
    heads = [p.reshape(p.shape[0], p.shape[1], h, e // h).transpose(1, 2, 0, 3) for p in proj]
    bias = np.where(kpm, -np.inf, 0.0)[:, None, None, :]
    out = _np_sdpa(*heads, bias=bias)  # (N, H, L, hd)
    out = out.transpose(2, 0, 1, 3).reshape(q.shape[0], q.shape[1], e)
    return out @ m.out_proj.weight.numpy().T + m.out_proj.bias.numpy()


def test_multihead_attention_matches_numpy():
    flow.manual_seed(0)
    m = nn.MultiheadAttention(8, 2)
    with flow.no_grad():
        m.in_proj_bias.copy_(flow.tensor(_rand(24, seed=7)))
    q, k, v = _rand(4, 3, 8, seed=1), _rand(5, 3, 8, seed=2), _rand(5, 3, 8, seed=3)
    kpm = np.zeros((3, 5), bool)
    kpm[2, 3:] = True
    out, weights = m(flow.tensor(q), flow.tensor(k), flow.tensor(v),
                     key_padding_mask=flow.tensor(kpm))  # fmt: skip
    np.testing.assert_allclose(out.numpy(), _np_mha(m, q, k, v, kpm), rtol=1e-4, atol=1e-5)
    assert weights.shape == (3, 4, 5)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(weights.numpy()[2, :, 3:], 0.0)


def test_multihead_attention_fully_padded_and_dropout():
    flow.manual_seed(0)
    m = nn.MultiheadAttention(4, 2, dropout=0.5)
    x = flow.tensor(_rand(3, 2, 4))
    kpm = np.zeros((2, 3), bool)
    kpm[1] = True  # every key of batch element 1 is padding
    m.eval()
    out, w = m(x, x, x, key_padding_mask=flow.tensor(kpm))
    assert np.isfinite(out.numpy()).all() and np.isfinite(w.numpy()).all()
    np.testing.assert_array_equal(w.numpy()[1], 0.0)
    bias = m.out_proj.bias.numpy()  # no value reaches the output projection but its bias
    np.testing.assert_allclose(out.numpy()[:, 1], np.broadcast_to(bias, (3, 4)), atol=1e-7)
    ref, ref_w = m(x, x, x, average_attn_weights=False)
    m.train()
    drop, dw = m(x, x, x, average_attn_weights=False)
    assert not np.allclose(drop.numpy(), ref.numpy()) and np.isfinite(drop.numpy()).all()
    dw, ref_w = dw.numpy(), ref_w.numpy()
    dropped = dw == 0  # the others are scaled by 1 / (1 - p)
    assert 0 < dropped.mean() < 1
    np.testing.assert_allclose(dw[~dropped], 2 * ref_w[~dropped], rtol=1e-5)
    m.eval()
    np.testing.assert_array_equal(m(x, x, x)[0].numpy(), ref.numpy())


def test_square_subsequent_mask():
    m = nn.Transformer.generate_square_subsequent_mask(3).numpy()
    np.testing.assert_array_equal(m, np.triu(np.full((3, 3), -np.inf), 1))


# --------------------------------------------------------------------------- against PyTorch


def _load(fm: nn.Module, tm) -> None:
    """Load torch module `tm`'s state_dict into flow module `fm` (same keys and order)."""
    sd = tm.state_dict()
    assert list(sd) == list(fm.state_dict())
    fm.load_state_dict({k: flow.tensor(t.detach().numpy()) for k, t in sd.items()})


def _close(a, b, err="", tol=2e-5):
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(a.numpy(), b, rtol=tol, atol=tol, err_msg=err)


def _check_grads(fm, tm, tol=1e-4):
    tgrads = {n: p.grad for n, p in tm.named_parameters()}
    for n, p in fm.named_parameters():
        _close(p.grad, tgrads[n], n, tol)


def test_sdpa_matches_torch():
    torch = _torch()
    q, k, v = _rand(2, 2, 4, 8, seed=1), _rand(2, 2, 6, 8, seed=2), _rand(2, 2, 6, 8, seed=3)
    keep = _rand(2, 1, 4, 6, seed=4) > 0
    keep[0, 0, 2] = False
    for args in ({"attn_mask": keep}, {"attn_mask": _rand(4, 6, seed=5)}, {"is_causal": True},
                 {"scale": 0.5}):  # fmt: skip
        tq, tk, tv = (torch.tensor(t, requires_grad=True) for t in (q, k, v))
        fq, fk, fv = (flow.tensor(t, requires_grad=True) for t in (q, k, v))
        targs = {a: torch.tensor(x) if isinstance(x, np.ndarray) else x for a, x in args.items()}
        fargs = {a: flow.tensor(x) if isinstance(x, np.ndarray) else x for a, x in args.items()}
        want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **targs)
        got = F.scaled_dot_product_attention(fq, fk, fv, **fargs)
        _close(got, want, str(list(args)))
        w = _rand(*want.shape, seed=6)
        (want * torch.tensor(w)).sum().backward()
        (got * flow.tensor(w)).sum().backward()
        for f, t, n in ((fq, tq, "q"), (fk, tk, "k"), (fv, tv, "v")):
            _close(f.grad, t.grad, f"{list(args)} d{n}")


MHA_CASES = [
    {},
    {"batch_first": True},
    {"add_bias_kv": True, "add_zero_attn": True},
    {"kdim": 5, "vdim": 3},
    {"bias": False},
]


@pytest.mark.parametrize("kw", MHA_CASES, ids=lambda kw: "-".join(kw) or "default")
@pytest.mark.parametrize("masks", ["bool", "float", "none"])
def test_multihead_attention_matches_torch(kw, masks):
    torch = _torch()
    torch.manual_seed(0)
    tm, fm = torch.nn.MultiheadAttention(8, 2, **kw), nn.MultiheadAttention(8, 2, **kw)
    _load(fm, tm)
    q = _rand(4, 3, 8, seed=1)
    k, v = _rand(6, 3, kw.get("kdim", 8), seed=2), _rand(6, 3, kw.get("vdim", 8), seed=3)
    if kw.get("batch_first"):
        q, k, v = (np.ascontiguousarray(t.transpose(1, 0, 2)) for t in (q, k, v))
    kpm = np.zeros((3, 6), bool)
    kpm[1, 4:] = True
    am = _rand(4, 6, seed=4) > 0.5
    am[:, 0] = False
    if masks == "float":
        kpm, am = np.where(kpm, -np.inf, 0.0).astype(np.float32), _rand(4, 6, seed=5)
    margs = {} if masks == "none" else {"key_padding_mask": kpm, "attn_mask": am}
    for need in (True, False):
        tm.zero_grad()
        fm.zero_grad()
        tin = [torch.tensor(t, requires_grad=True) for t in (q, k, v)]
        fin = [flow.tensor(t, requires_grad=True) for t in (q, k, v)]
        to, tw = tm(*tin, need_weights=need, average_attn_weights=False,
                    **{a: torch.tensor(x) for a, x in margs.items()})  # fmt: skip
        fo, fw = fm(*fin, need_weights=need, average_attn_weights=False,
                    **{a: flow.tensor(x) for a, x in margs.items()})  # fmt: skip
        _close(fo, to, "output")
        assert (fw is None) == (tw is None)
        if need:
            _close(fw, tw, "weights")
        g = _rand(*to.shape, seed=8)
        (to * torch.tensor(g)).sum().backward()
        (fo * flow.tensor(g)).sum().backward()
        _check_grads(fm, tm)
        for f, t in zip(fin, tin):
            _close(f.grad, t.grad, "input grad", 1e-4)


def test_multihead_attention_unbatched_and_averaged_matches_torch():
    torch = _torch()
    tm, fm = torch.nn.MultiheadAttention(6, 3), nn.MultiheadAttention(6, 3)
    _load(fm, tm)
    x = _rand(5, 6)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    to, tw = tm(*[torch.tensor(x)] * 3, attn_mask=mask, is_causal=True)
    fo, fw = fm(*[flow.tensor(x)] * 3, attn_mask=flow.tensor(mask.numpy()), is_causal=True)
    assert fo.shape == (5, 6) and fw.shape == (5, 5)
    _close(fo, to)
    _close(fw, tw)


LAYER_CASES = [
    {},
    {"batch_first": True},
    {"norm_first": True},
    {"activation": "gelu"},
    {"activation": "gelu", "norm_first": True, "batch_first": True, "bias": False},
]


def _inputs(kw, s=5, t=4, n=2, e=8):
    src, tgt = _rand(s, n, e, seed=1), _rand(t, n, e, seed=2)
    if kw.get("batch_first"):
        src, tgt = (np.ascontiguousarray(a.transpose(1, 0, 2)) for a in (src, tgt))
    kpm = np.zeros((n, s), bool)
    kpm[1, 3:] = True
    causal = np.triu(np.full((t, t), -np.inf, np.float32), 1)
    return src, tgt, kpm, causal


def _run_both(tm, fm, targs, fargs, train=True):
    """Forward both with dropout 0 in training mode, backward a fixed weighting."""
    tm.train(train)
    fm.train(train)
    to, fo = tm(*targs[0], **targs[1]), fm(*fargs[0], **fargs[1])
    _close(fo, to, "output", 1e-4)
    g = _rand(*to.shape, seed=9)
    import torch

    (to * torch.tensor(g)).sum().backward()
    (fo * flow.tensor(g)).sum().backward()
    _check_grads(fm, tm, 2e-4)


def _both(torch, d):
    """Convert a dict of numpy arrays (or tensors-to-be) for torch and for flow."""
    return ({a: torch.tensor(x) for a, x in d.items()}, {a: flow.tensor(x) for a, x in d.items()})


@pytest.mark.parametrize("kw", LAYER_CASES, ids=lambda kw: "-".join(kw) or "default")
def test_encoder_layer_matches_torch(kw):
    torch = _torch()
    torch.manual_seed(0)
    args = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, **kw)
    tm, fm = torch.nn.TransformerEncoderLayer(**args), nn.TransformerEncoderLayer(**args)
    _load(fm, tm)
    src, _, kpm, _ = _inputs(kw)
    tk, fk = _both(torch, {"src_key_padding_mask": kpm})
    _run_both(tm, fm, ([torch.tensor(src)], tk), ([flow.tensor(src)], fk))


@pytest.mark.parametrize("kw", LAYER_CASES, ids=lambda kw: "-".join(kw) or "default")
def test_decoder_layer_matches_torch(kw):
    torch = _torch()
    torch.manual_seed(0)
    args = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, **kw)
    tm, fm = torch.nn.TransformerDecoderLayer(**args), nn.TransformerDecoderLayer(**args)
    _load(fm, tm)
    mem, tgt, kpm, causal = _inputs(kw)
    d = {"tgt_mask": causal, "memory_key_padding_mask": kpm}
    tk, fk = _both(torch, d)
    _run_both(tm, fm, ([torch.tensor(tgt), torch.tensor(mem)], tk),
              ([flow.tensor(tgt), flow.tensor(mem)], fk))  # fmt: skip


@pytest.mark.parametrize("kw", [{}, {"norm_first": True, "activation": "gelu",
                                     "batch_first": True}], ids=["default", "prenorm"])
def test_transformer_matches_torch(kw):
    torch = _torch()
    torch.manual_seed(0)
    args = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                dim_feedforward=16, dropout=0.0, **kw)  # fmt: skip
    tm, fm = torch.nn.Transformer(**args), nn.Transformer(**args)
    _load(fm, tm)
    src, tgt, kpm, causal = _inputs(kw)
    d = {"tgt_mask": causal, "src_key_padding_mask": kpm, "memory_key_padding_mask": kpm}
    tk, fk = _both(torch, d)
    _run_both(tm, fm, ([torch.tensor(src), torch.tensor(tgt)], tk),
              ([flow.tensor(src), flow.tensor(tgt)], fk))  # fmt: skip


def test_eval_mode_with_dropout_matches_torch():
    torch = _torch()
    args = dict(d_model=8, nhead=4, dim_feedforward=16, dropout=0.5)
    tm, fm = torch.nn.TransformerEncoderLayer(**args), nn.TransformerEncoderLayer(**args)
    _load(fm, tm)
    enc_t, enc_f = torch.nn.TransformerEncoder(tm, 2), nn.TransformerEncoder(fm, 2)
    _load(enc_f, enc_t)
    enc_t.eval()
    enc_f.eval()
    x = _rand(5, 2, 8)
    with torch.no_grad():
        want = enc_t(torch.tensor(x))
    _close(enc_f(flow.tensor(x)), want, "eval", 1e-4)


# --------------------------------------------------------------------------- compiled == eager


def test_jit_matches_eager():
    flow.manual_seed(0)
    layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, norm_first=True,
                                       activation="gelu", batch_first=True)  # fmt: skip
    _, tgt, kpm, causal = _inputs({"batch_first": True})
    mem = _rand(2, 5, 8, seed=3)
    args = (flow.tensor(tgt), flow.tensor(mem), flow.tensor(causal), flow.tensor(kpm))

    def f(t, m, c, k):
        return layer(t, m, tgt_mask=c, memory_key_padding_mask=k)

    np.testing.assert_allclose(flow.jit(f)(*args).numpy(), f(*args).numpy(), rtol=1e-4,
                               atol=1e-5)  # fmt: skip

    def sdpa(q, keep):
        return F.scaled_dot_product_attention(q, q, q, attn_mask=keep)

    q = flow.tensor(_rand(2, 4, 8))
    keep = _rand(4, 4, seed=2) > 0
    keep[0] = False
    got = flow.jit(sdpa)(q, flow.tensor(keep))
    np.testing.assert_allclose(got.numpy(), sdpa(q, flow.tensor(keep)).numpy(), rtol=1e-5,
                               atol=1e-6)  # fmt: skip
    np.testing.assert_array_equal(got.numpy()[:, 0], 0.0)


class _Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, src, tgt, mask):
        loss = (self.model(src, tgt, tgt_mask=mask) ** 2).mean()
        loss.backward()
        return loss


def test_graph_training_step_matches_eager():
    flow.manual_seed(0)
    eager = nn.Transformer(8, 2, 1, 1, dim_feedforward=16, dropout=0.0)
    compiled = copy.deepcopy(eager)
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.1)
    step = _Step(compiled, flow.optim.SGD(compiled.parameters(), lr=0.1))
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    for i in range(2):
        src, tgt = flow.tensor(_rand(5, 2, 8, seed=i)), flow.tensor(_rand(4, 2, 8, seed=10 + i))
        opt_e.zero_grad()
        loss_e = (eager(src, tgt, tgt_mask=mask) ** 2).mean()
        loss_e.backward()
        opt_e.step()
        loss_g = step(src, tgt, mask)
        np.testing.assert_allclose(loss_g.numpy(), loss_e.numpy(), rtol=1e-4, atol=1e-6)
    se, sg = eager.state_dict(), compiled.state_dict()
    for key in se:
        np.testing.assert_allclose(sg[key].numpy(), se[key].numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=key)  # fmt: skip


# --------------------------------------------------------------------------- errors


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads.*10.*3"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="d_model must be divisible by nhead"):
        nn.TransformerEncoderLayer(10, 4)
    with pytest.raises(ValueError, match="d_model must be divisible by nhead"):
        nn.Transformer(10, 4)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerDecoderLayer(8, 2, activation="tanh")
    x = flow.tensor(_rand(2, 3, 4))
    with pytest.raises(ValueError, match="attn_mask must not be given with is_causal"):
        F.scaled_dot_product_attention(x, x, x, attn_mask=flow.ones(3, 3), is_causal=True)
    with pytest.raises(ValueError, match="does not broadcast"):
        F.scaled_dot_product_attention(x, x, x, attn_mask=flow.ones(2, 2))
    with pytest.raises(ValueError, match="agree on E"):
        F.scaled_dot_product_attention(x, flow.tensor(_rand(2, 3, 5)), x)
    m = nn.MultiheadAttention(4, 2)
    with pytest.raises(ValueError, match=r"expected attn_mask of shape \[2, 2\]"):
        m(x, x, x, attn_mask=flow.ones(2, 3))
    with pytest.raises(ValueError, match=r"expected key_padding_mask of shape \[3, 2\]"):
        m(x, x, x, key_padding_mask=flow.ones(3, 3))
    with pytest.raises(ValueError, match="with 4, 4 and 4 features"):
        m(flow.tensor(_rand(2, 3, 5)), x, x)
    with pytest.raises(RuntimeError, match="pass the causal attn_mask"):
        m(x, x, x, is_causal=True)
