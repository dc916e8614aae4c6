"""Train a small GPT on the help texts every Python ships (pydoc_data/topics.py), byte-level.

    python examples/train_gpt.py                              # one process
    python examples/train_gpt.py --amp                        # bfloat16 autocast
    python examples/train_gpt.py --checkpointing              # recompute blocks in backward
    flow-run -n 2 examples/train_gpt.py --parallel dp         # data parallel
    flow-run -n 2 examples/train_gpt.py --parallel tp         # tensor parallel (Megatron)
    flow-run -n 2 examples/train_gpt.py --parallel zero       # data parallel + ZeRO stage 2
    flow-run -n 2 examples/train_gpt.py --parallel zero --zero-stage 3   # parameters split too
    flow-run -n 4 examples/train_gpt.py --parallel dp-tp      # 2 x 2: data x tensor parallel
    python examples/train_gpt.py --until 300 --save ckpt      # stop at step 300 of 600 ...
    python examples/train_gpt.py --resume ckpt                # ... and go on from there

A decoder-only transformer (token and position embeddings, pre-norm blocks of causal
self-attention and a GELU MLP, a linear head) predicts the next byte of the text. One
`nn.Graph` step is forward, backward, gradient clipping, AdamW, and a warmup + cosine
learning-rate schedule.

How the work is spread is only SBP:
- `dp` splits the batch (S(0)) and broadcasts the parameters, so the gradients are
  all-reduced.
- `tp` lays the parameters out as Megatron does: the query/key/value and first MLP
  projections split by output features, the output projections by input features
  (`flow.nn.parallel.tensor_parallel_sbp` finds them by their names). SBP inference picks
  the activations' layouts and the collectives between them (`FLOW_COMM_PLAN=1` prints
  each rank's).
- `zero` is `dp` with `config.enable_zero(stage=2)`: the optimizer state is split and the
  gradients are reduce-scattered (`--zero-stage 3`: the parameters are split too, and
  gathered where the step uses them; `1`: the state only).
- `dp-tp` does both on a 2-D placement.
All of them compute the single-process step. With the same `--seed`, their losses match the
one-process run step by step, up to float rounding. Step `i`'s batch depends only on the seed
and `i`, so a resumed run continues the run it was saved from exactly.

It prints the training loss, the tokens per second of the compiled step, the validation
loss, and a sample of generated text.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

import flow
import flow.nn as nn
import flow.nn.functional as F
from flow import placement, sbp
from flow.nn.parallel import tensor_parallel_sbp


def load_text() -> np.ndarray:
    """The bytes of every pydoc topic, in a fixed order (~700 KB of English)."""
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics))
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"SelfAttention: dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        # separate projections, so that tensor parallelism splits whole heads
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape

        def heads(y):
            return y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)),
                                           heads(self.v(x)), is_causal=True)  # fmt: skip
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(dim), SelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc, self.c_proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.c_proj(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, context: int, dim: int, heads: int, layers: int):
        super().__init__()
        self.context = context
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)
        self.register_buffer("positions", flow.arange(context), persistent=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(self.positions[:t])
        return self.head(self.ln(self.blocks(x)))


class TrainStep(nn.Graph):
    def __init__(self, model, optimizer, scheduler, clip: float):
        super().__init__()
        self.model, self.clip = model, clip
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(optimizer, lr_sch=scheduler)

    def build(self, x, y):
        logits = self.model(x)
        loss = self.loss_fn(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        return loss


class EvalStep(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model, self.loss_fn = model, nn.CrossEntropyLoss()

    def build(self, x, y):
        logits = self.model(x)
        return self.loss_fn(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


class NextByte(nn.Graph):
    """The logits of the byte after a window of `context` bytes."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, idx):
        return self.model(idx)[:, -1]


class Layout:
    """Where tensors live for `--parallel`: the placement, the parameters' SBP and the
    batches' SBP (None: one process, local tensors)."""

    def __init__(self, mode: str):
        self.mode, self.world = mode, flow.env.get_world_size()
        need = {"none": 1, "dp-tp": 4}.get(mode)
        if need is not None and self.world != need:
            raise SystemExit(f"--parallel {mode} needs {need} process(es), got {self.world}")
        if mode != "none" and self.world < 2:
            raise SystemExit(f"--parallel {mode} needs flow-run -n 2 or more")
        if mode == "dp-tp":
            self.placement = placement("cpu", ranks=[[0, 1], [2, 3]])
        elif mode != "none":
            self.placement = placement.all("cpu")

    def place(self, model: GPT) -> None:
        if self.mode == "none":
            return
        tp = tensor_parallel_sbp(model) if self.mode in ("tp", "dp-tp") else {}

        def where(name, _):
            entry = tp.get(name, sbp.broadcast)
            return [sbp.broadcast, entry] if self.mode == "dp-tp" else entry

        model.to_global(self.placement, where)

    def batch(self, a: np.ndarray):
        """The whole batch `a` (the same on every rank) as the step's input."""
        x = flow.tensor(a)
        if self.mode == "none":
            return x
        split = sbp.split(0) if self.mode in ("dp", "zero") else sbp.broadcast
        nd = [sbp.split(0), sbp.broadcast] if self.mode == "dp-tp" else [split]
        return x.to_global(self.placement, [sbp.broadcast] * len(nd)).to_global(sbp=nd)


def batches(data: np.ndarray, rng: np.random.Generator, batch: int, context: int):
    """`batch` random windows of `data` and the windows one byte later (the targets)."""
    starts = rng.integers(0, len(data) - context - 1, batch)
    x = np.stack([data[s : s + context] for s in starts])
    y = np.stack([data[s + 1 : s + 1 + context] for s in starts])
    return x, y


def generate(step: NextByte, layout: Layout, prompt: np.ndarray, n: int, seed: int) -> bytes:
    """`n` bytes sampled after `prompt` (temperature 0.8); the same on every rank."""
    rng = np.random.default_rng(seed)
    ids = list(prompt)
    for _ in range(n):
        window = np.array(ids[-len(prompt):], dtype=np.int64)[None]
        logits = step(layout.batch(window))
        z = (logits.to_local() if layout.mode != "none" else logits).numpy()[0] / 0.8
        p = np.exp(z - z.max())
        ids.append(int(rng.choice(len(p), p=p / p.sum())))
    return bytes(ids[len(prompt):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", choices=["none", "dp", "tp", "zero", "dp-tp"],
                        default="none")  # fmt: skip
    parser.add_argument("--steps", type=int, default=600, help="steps of the lr schedule")
    parser.add_argument("--until", type=int, help="stop after this many steps (default: all)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--zero-stage", type=int, choices=[1, 2, 3], default=2)
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast in the step")
    parser.add_argument("--checkpointing", action="store_true",
                        help="recompute each block's forward in the backward pass")  # fmt: skip
    parser.add_argument("--log-every", type=int, default=100)
    parser.add_argument("--eval-batches", type=int, default=8)
    parser.add_argument("--sample", type=int, default=200, help="bytes to generate (0: none)")
    parser.add_argument("--save", help="write a checkpoint directory here at the end")
    parser.add_argument("--resume", help="start from this checkpoint directory")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    layout = Layout(args.parallel)
    rank = flow.env.get_rank()
    say = print if rank == 0 else (lambda *a, **k: None)
    data = load_text()
    cut = int(0.9 * len(data))
    train, val = data[:cut], data[cut:]

    flow.manual_seed(args.seed)  # the same initial model on every rank
    model = GPT(256, args.context, args.dim, args.heads, args.layers)
    layout.place(model)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "pos" not in n]
    other = [p for n, p in model.named_parameters() if p.ndim < 2 or "pos" in n]
    optimizer = flow.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                  {"params": other, "weight_decay": 0.0}],
                                 lr=args.lr, betas=(0.9, 0.95))  # fmt: skip
    cosine = flow.optim.lr_scheduler.CosineDecayLR(optimizer, decay_steps=args.steps,
                                                   alpha=0.1)  # fmt: skip
    scheduler = flow.optim.lr_scheduler.WarmupLR(cosine, warmup_factor=0.0,
                                                 warmup_iters=args.warmup)  # fmt: skip
    step = TrainStep(model, optimizer, scheduler, args.clip)
    if args.parallel == "zero":
        step.config.enable_zero(True, stage=args.zero_stage)
    if args.amp:
        step.config.enable_amp(True)
    if args.checkpointing:  # OneFlow's spelling: keep only each block's input
        for block in model.blocks:
            block.to(nn.graph.GraphModule).activation_checkpointing = True
    evaluate = EvalStep(model)

    first = 0
    if args.resume:
        state = flow.load(args.resume)
        step.load_state_dict(state["step"])
        first = int(state["next_step"])
        say(f"resumed from {args.resume} at step {first}")

    n = sum(p.numel() for p in model.parameters())
    say(f"GPT: {args.layers} layers, dim {args.dim}, {args.heads} heads, context "
        f"{args.context}, {n} parameters; {len(train)} training bytes; --parallel "
        f"{args.parallel} on {layout.world} process(es){', bf16 autocast' if args.amp else ''}")
    tokens, timed = 0, 0.0
    last = args.steps if args.until is None else min(args.until, args.steps)
    for i in range(first, last):
        rng = np.random.default_rng([args.seed, i])  # the same batch on every rank
        x, y = batches(train, rng, args.batch_size, args.context)
        t0 = time.perf_counter()
        loss = float(step(layout.batch(x), layout.batch(y)))
        timed, tokens = timed + time.perf_counter() - t0, tokens + x.size
        if not math.isfinite(loss):
            raise SystemExit(f"step {i}: the loss is {loss}")
        if i % args.log_every == 0 or i == last - 1:
            # the rate of the steps since the last line (the first ones run interpreted
            # while the step compiles in the background)
            say(f"step {i:4d}  loss {loss:.4f}  lr {scheduler.get_last_lr()[0]:.2e}  "
                f"{tokens / timed:.0f} tokens/s")  # fmt: skip
            tokens, timed = 0, 0.0

    eval_rng = np.random.default_rng(1234)
    vals = [float(evaluate(*map(layout.batch, batches(val, eval_rng, args.batch_size,
                                                        args.context))))
            for _ in range(args.eval_batches)]  # fmt: skip
    say(f"validation loss {np.mean(vals):.4f} ({np.mean(vals) / math.log(2):.3f} bits/byte)")
    if args.sample:
        prompt = val[:args.context]
        text = generate(NextByte(model), layout, prompt, args.sample, args.seed)
        say("sample:\n" + bytes(prompt.astype(np.uint8)).decode("utf-8", "replace")
            + text.decode("utf-8", "replace"))  # fmt: skip
    if args.save:
        flow.save({"step": step.state_dict(), "next_step": last}, args.save)
        say(f"saved {os.path.abspath(args.save)}")


if __name__ == "__main__":
    main()
