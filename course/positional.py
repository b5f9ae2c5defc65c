"""The small model of the positional-encoding experiment (chapter 5), and the code-base
conventions the lesson compares with.

These are lesson helpers, written for the model of the experiment: the sinusoidal table
puts all the sines before all the cosines, RoPE turns feature i with feature i + d/2
(the "half-split" layout of several code bases), and ALiBi is written in its recency
form, one bias per key, +slope * j, which equals -slope * (i - j) up to a constant in
each row that the softmax ignores (the future is masked separately). The assignment
asks for the interleaved layouts, the distance form and the general cases instead.
"""

import math

import torch
from torch import nn


def sinusoid_table(n, d, base=10000.0, dtype=torch.float32):
    """(n, d) table, d even: sines of every frequency in the first d/2 columns, cosines after."""
    frequencies = base ** (-torch.arange(d // 2, dtype=dtype) / (d // 2))  # (d/2,)
    angles = torch.arange(n, dtype=dtype)[:, None] * frequencies  # (n, d/2)
    return torch.cat([angles.sin(), angles.cos()], dim=-1)  # (n, d)


def rotate_half_split(x, base=10000.0, scale=1.0):
    """RoPE in the half-split convention: feature i turns with feature i + d/2.

    x: (B, H, n, d_head) at positions 0..n-1, each divided by `scale` (position
    interpolation: scale = new length / trained length)."""
    n, d = x.shape[-2], x.shape[-1]
    frequencies = base ** (-torch.arange(d // 2, device=x.device, dtype=x.dtype) / (d // 2))  # (d/2,)
    positions = torch.arange(n, device=x.device, dtype=x.dtype) / scale  # (n,)
    angles = positions[:, None] * frequencies  # (n, d/2)
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)  # (n, d)
    first, second = x[..., : d // 2], x[..., d // 2:]
    turned = torch.cat([-second, first], dim=-1)  # (B, H, n, d)
    return x * cos + turned * sin


def recency_bias(n_heads, n):
    """ALiBi in its recency form: +slope_h * j for key j, the same for every query; (H, 1, n).

    Below the diagonal it differs from -slope_h * (i - j) by slope_h * i, a constant in row i."""
    slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)  # (H,)
    return slopes[:, None, None] * torch.arange(n)  # (H, 1, n)


class OneLayerModel(nn.Module):
    """Token embedding (+ position), one causal multi-head attention layer, a readout.

    encoding: "none", "sinusoidal", "learned" (a table of max_length rows), "rope" or "alibi".
    For RoPE, `rope_base` and `rope_scale` (positions divided by it) may be changed after
    training, to try position interpolation and a larger base on longer sequences.
    """

    def __init__(self, encoding, vocabulary, d_model, n_heads, max_length):
        super().__init__()
        self.encoding, self.d_model, self.n_heads = encoding, d_model, n_heads
        self.rope_base, self.rope_scale = 10000.0, 1.0
        self.tokens = nn.Embedding(vocabulary, d_model)
        if encoding == "learned":
            self.positions = nn.Embedding(max_length, d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.readout = nn.Linear(d_model, vocabulary)

    def forward(self, tokens):
        batch, n = tokens.shape
        x = self.tokens(tokens)  # (B, n, D)
        if self.encoding == "sinusoidal":
            x = x + sinusoid_table(n, self.d_model)
        elif self.encoding == "learned":
            x = x + self.positions.weight[:n]
        d_head = self.d_model // self.n_heads
        qkv = self.qkv(x).view(batch, n, 3, self.n_heads, d_head)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, n, d_head)
        if self.encoding == "rope":
            q = rotate_half_split(q, self.rope_base, self.rope_scale)
            k = rotate_half_split(k, self.rope_base, self.rope_scale)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)  # (B, H, n, n)
        if self.encoding == "alibi":
            scores = scores + recency_bias(self.n_heads, n)  # (H, 1, n) on every row
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        heads = (weights @ v).transpose(1, 2).reshape(batch, n, self.d_model)  # (B, n, D)
        return self.readout(x + self.out(heads))  # (B, n, vocabulary)
