"""The small model of the positional-encoding experiment (chapter 5), built on the position
encodings of the field's code bases as the installed `transformers` package writes them.

The course writes none of the encodings itself: the assignment asks for them. The model
takes each one from a model family that uses it, with that family's conventions:

- sinusoidal: Whisper's `sinusoids`, the layout of the original tensor2tensor code: the
  sines of every frequency first, then the cosines, and frequencies spaced as
  base ** (-i / (d/2 - 1)), so that the slowest pair turns at exactly 1 / base;
- RoPE: Llama's rotary embedding, which turns feature i with feature i + d/2 (the
  "half-split" layout) at the frequencies base ** (-2i / d);
- ALiBi: BLOOM's `build_alibi_tensor`, in its recency form: one bias per key, +slope * j,
  which equals -slope * (i - j) up to a constant in each row that the softmax ignores
  (the future is masked separately).

The assignment asks for the interleaved layouts, the distance form and the general cases.

References: Radford et al. 2023 (Whisper); Touvron et al. 2023 (Llama); BigScience
Workshop 2022 (BLOOM); the `transformers` library (Wolf et al. 2020).
"""

import functools
import math

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.llama.modeling_llama import (LlamaRotaryEmbedding,
                                                      apply_rotary_pos_emb)
from transformers.models.whisper.modeling_whisper import sinusoids


def sinusoid_table(n, d):
    """Whisper's (n, d) table, d even: the sines of every frequency, then the cosines."""
    return sinusoids(n, d)  # (n, d), float32


@functools.lru_cache(maxsize=None)
def llama_rotary(d_head, base):
    """Llama's rotary embedding for heads of width d_head and the given base."""
    config = LlamaConfig(head_dim=d_head,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    return LlamaRotaryEmbedding(config)


def rope_half_split(queries, keys, base=10000.0, scale=1.0):
    """Llama's RoPE on queries and keys (B, H, n, d_head) at positions 0..n-1, each
    divided by `scale` (position interpolation: scale = new length / trained length).
    Feature i turns with feature i + d_head/2."""
    n, d_head = queries.shape[-2], queries.shape[-1]
    positions = torch.arange(n, device=queries.device)[None] / scale  # (1, n)
    cos, sin = llama_rotary(d_head, float(base))(queries, positions)  # each (1, n, d_head)
    return apply_rotary_pos_emb(queries, keys, cos, sin)  # each (B, H, n, d_head)


def recency_bias(n_heads, n):
    """BLOOM's ALiBi in its recency form: +slope_h * j for key j, the same for every query;
    (H, 1, n). Below the diagonal it differs from -slope_h * (i - j) by slope_h * i, a
    constant in row i."""
    every_token = torch.ones(1, n)  # (batch 1, n): no padding
    return build_alibi_tensor(every_token, n_heads, torch.float32)  # (H, 1, n)


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
            q, k = rope_half_split(q, k, self.rope_base, self.rope_scale)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)  # (B, H, n, n)
        if self.encoding == "alibi":
            scores = scores + recency_bias(self.n_heads, n)  # (H, 1, n) on every row
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        heads = (weights @ v).transpose(1, 2).reshape(batch, n, self.d_model)  # (B, n, D)
        return self.readout(x + self.out(heads))  # (B, n, vocabulary)
