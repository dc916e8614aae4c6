"""The GPT of examples/train_gpt.py in PyTorch, as benchmarks/large_model.py's peer: the same
layers, sizes, loss, gradient clipping and AdamW step."""

from __future__ import annotations


def make_step(torch, vocab: int, context: int, dim: int, heads: int, layers: int,
              compiled: bool):  # fmt: skip
    """A function `step(x, y) -> loss` of one training step; under torch.compile when
    `compiled` (forward, backward and the optimizer step in one compiled function)."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.q, self.k, self.v = (nn.Linear(dim, dim) for _ in range(3))
            self.proj = nn.Linear(dim, dim)
            self.fc, self.c_proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x):
            b, t, d = x.shape
            h = self.ln1(x)

            def split(y):
                return y.reshape(b, t, heads, d // heads).transpose(1, 2)

            a = F.scaled_dot_product_attention(split(self.q(h)), split(self.k(h)),
                                               split(self.v(h)), is_causal=True)  # fmt: skip
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.c_proj(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
            self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            return self.head(self.ln(self.blocks(x)))

    model = GPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x, y):
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    return torch.compile(step) if compiled else step
