"""A nanochat-style GPT, the small model a projection starts from (``--model nanochat``).

The shape of Karpathy's nanochat (github.com/karpathy/nanochat, ``nanochat/gpt.py``) as a
configuration and our own module: rotary positions, RMS norms without weights, QK norm,
multi-query attention (``kv_heads`` < ``heads``), a ReLU-squared MLP of four times the width,
value embeddings (a second table whose rows are added to the attention's values), and an
untied head. ``forward(idx, targets)`` returns the mean cross-entropy, as a training step
needs; ``forward(idx)`` the logits.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass(frozen=True)
class Config:
    layers: int = 9
    width: int = 1024
    heads: int = 4
    kv_heads: int = 1
    vocab: int = 8192
    sequence: int = 1024

    @property
    def head_dim(self) -> int:
        return self.width // self.heads


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        kv = c.kv_heads * c.head_dim
        self.q = nn.Linear(c.width, c.width, bias=False)
        self.k = nn.Linear(c.width, kv, bias=False)
        self.v = nn.Linear(c.width, kv, bias=False)
        self.o = nn.Linear(c.width, c.width, bias=False)
        self.up = nn.Linear(c.width, 4 * c.width, bias=False)
        self.down = nn.Linear(4 * c.width, c.width, bias=False)

    def forward(self, x, value_rows, cos, sin):
        c = self.c
        batch, tokens, _ = x.shape
        y = F.rms_norm(x, (c.width,))
        q = self.q(y).view(batch, tokens, c.heads, c.head_dim)
        k = self.k(y).view(batch, tokens, c.kv_heads, c.head_dim)
        v = (self.v(y) + value_rows).view(batch, tokens, c.kv_heads, c.head_dim)
        q = F.rms_norm(_rotate(q, cos, sin), (c.head_dim,)).transpose(1, 2)
        k = F.rms_norm(_rotate(k, cos, sin), (c.head_dim,)).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v.transpose(1, 2), is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(batch, tokens, c.width))
        y = F.rms_norm(x, (c.width,))
        return x + self.down(F.relu(self.up(y)).square())


class GPT(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.width)
        self.value_embed = nn.Embedding(c.vocab, c.kv_heads * c.head_dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.head = nn.Linear(c.width, c.vocab, bias=False)
        half = c.head_dim // 2
        freq = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float32) / half))
        angle = torch.outer(torch.arange(c.sequence, dtype=torch.float32), freq)
        self.register_buffer("cos", angle.cos()[None, :, None, :], persistent=False)
        self.register_buffer("sin", angle.sin()[None, :, None, :], persistent=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        tokens = idx.shape[1]
        cos = self.cos[:, :tokens].to(self.embed.weight.dtype)
        sin = self.sin[:, :tokens].to(self.embed.weight.dtype)
        x = self.embed(idx)
        value_rows = self.value_embed(idx)
        for block in self.blocks:
            x = block(x, value_rows, cos, sin)
        logits = self.head(F.rms_norm(x, (self.c.width,))).float()
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, self.c.vocab), targets.reshape(-1))
