"""Norm orders and the modern block, for the training comparison of chapter 6.

`Stack(variant, depth, ...)` is a small causal language model whose blocks put their
normalization in one of three ways (the `variant`):

* ``"post-norm"``: LayerNorm after each residual sum, ReLU feed-forward (the 2017 block);
* ``"pre-norm"``: LayerNorm on each sublayer's input, ReLU feed-forward (GPT-2);
* ``"rmsnorm-swiglu"``: RMSNorm on each sublayer's input, SwiGLU feed-forward (Llama).

`copy_batch` makes the task (a random string, a separator, the same string again) and
`train` trains one model and returns its loss curve.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

VARIANTS = ("post-norm", "pre-norm", "rmsnorm-swiglu")


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * gain: no mean subtracted, no bias."""

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.gain


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)), without biases; d_hidden chosen by the caller."""

    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.gate = nn.Linear(d_model, d_hidden, bias=False)
        self.up = nn.Linear(d_model, d_hidden, bias=False)
        self.down = nn.Linear(d_hidden, d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class _Block(nn.Module):
    def __init__(self, variant, d_model, n_heads):
        super().__init__()
        self.variant, self.n_heads = variant, n_heads
        norm = RMSNorm if variant == "rmsnorm-swiglu" else nn.LayerNorm
        self.attention_norm, self.mlp_norm = norm(d_model), norm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        if variant == "rmsnorm-swiglu":
            # 8/3 d_model hidden units: the same parameter count as a 4 d_model ReLU network.
            self.mlp = SwiGLU(d_model, 8 * d_model // 3)
        else:
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Linear(4 * d_model, d_model))

    def attend(self, x):
        batch, n, d_model = x.shape
        q, k, v = (z.view(batch, n, self.n_heads, -1).transpose(1, 2)  # (B, nh, n, hs)
                   for z in self.qkv(x).split(d_model, dim=-1))
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # no cache: top-left is right
        return self.proj(heads.transpose(1, 2).reshape(batch, n, d_model))

    def forward(self, x):
        if self.variant == "post-norm":
            x = self.attention_norm(x + self.attend(x))
            return self.mlp_norm(x + self.mlp(x))
        x = x + self.attend(self.attention_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Stack(nn.Module):
    def __init__(self, variant, depth, vocab=16, d_model=64, n_heads=4, max_len=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(_Block(variant, d_model, n_heads) for _ in range(depth))
        # Pre-norm stacks need a last norm before the head; post-norm ones end with one.
        self.final = nn.Identity() if variant == "post-norm" else (
            RMSNorm(d_model) if variant == "rmsnorm-swiglu" else nn.LayerNorm(d_model))
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.final(x))


def copy_batch(batch, length, vocab, generator):
    """(tokens, targets): a random string over tokens 1..vocab-1, the separator 0, the string
    again; targets are the next tokens, -100 (ignored) before the separator."""
    string = torch.randint(1, vocab, (batch, length), generator=generator)
    separator = torch.zeros(batch, 1, dtype=torch.long)
    sequence = torch.cat([string, separator, string], dim=1)  # (B, 2 length + 1)
    tokens, targets = sequence[:, :-1], sequence[:, 1:].clone()
    targets[:, :length] = -100  # the random string cannot be predicted
    return tokens, targets


def train(variant, depth, lr, warmup, steps=300, batch=32, length=8, vocab=16, seed=0):
    """The loss after each step of training Stack(variant, depth) with Adam at `lr`, its
    learning rate rising linearly over the first `warmup` steps (0: none)."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = Stack(variant, depth, vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / warmup) if warmup else lr
        tokens, targets = copy_batch(batch, length, vocab, generator)
        loss = F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten(), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item() if math.isfinite(loss.item()) else float("nan"))
    return losses


def parameter_counts(d_model=64):
    """Parameters of the norms and the feed-forward networks of one block, by variant."""
    counts = {}
    for variant in VARIANTS:
        block = _Block(variant, d_model, 4)
        counts[variant] = {"norms": sum(p.numel() for p in block.attention_norm.parameters()) * 2,
                           "feed_forward": sum(p.numel() for p in block.mlp.parameters())}
    return counts
