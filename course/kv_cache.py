"""A small decoder-only language model with a preallocated key-value cache (chapter 6).

The lesson and `benchmarks/kv_cache.py` use it to measure what the cache saves. Its
layout is the one inference libraries use, not the assignment's: separate query, key and
value projections, `n_kv_heads` key-value heads shared by groups of query heads
(multi-head, grouped-query or multi-query attention), and a `StaticCache` that holds
room for `max_len` tokens per layer and writes the new keys and values in place.

* `DecoderLM(vocab, d_model, n_heads, n_layers, n_kv_heads=None, max_len=1024)`:
  `model(tokens, cache=None) -> logits`; with a cache, `tokens` are the newest tokens
  and their positions follow the cache's.
* `StaticCache(model, batch)`: the preallocated keys and values, `cache.length` tokens so far.
* `greedy(model, prompt, n_new, use_cache)`: greedy decoding, with or without the cache.
* `time_per_token(model, n, use_cache, repeats)`: the seconds one more token costs after `n`.
"""

import math
import time

import torch
import torch.nn.functional as F
from torch import nn


class StaticCache:
    """Room for `model.max_len` keys and values per layer, filled from position 0 on."""

    def __init__(self, model, batch, device=None, dtype=None):
        parameter = next(model.parameters())
        shape = (batch, model.n_kv_heads, model.max_len, model.d_head)
        self.keys = [torch.zeros(shape, device=device or parameter.device, dtype=dtype or parameter.dtype)
                     for _ in range(model.n_layers)]
        self.values = [torch.zeros_like(k) for k in self.keys]
        self.length = 0  # tokens written so far

    def bytes(self, length=None):
        """The memory the first `length` positions occupy (all of them by default)."""
        length = self.keys[0].shape[2] if length is None else length
        per_position = sum(k[:, :, :1].nelement() * k.element_size() for k in self.keys + self.values)
        return per_position * length


class _Layer(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_model // n_heads
        self.norm_attention = nn.LayerNorm(d_model)
        self.query = nn.Linear(d_model, d_model, bias=False)
        self.key = nn.Linear(d_model, n_kv_heads * self.d_head, bias=False)
        self.value = nn.Linear(d_model, n_kv_heads * self.d_head, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.norm_mlp = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x, start, cache=None, index=0):
        batch, t, d_model = x.shape
        h = self.norm_attention(x)
        queries = self.query(h).view(batch, t, self.n_heads, self.d_head).transpose(1, 2)  # (B, nh, t, hs)
        keys = self.key(h).view(batch, t, self.n_kv_heads, self.d_head).transpose(1, 2)  # (B, nkv, t, hs)
        values = self.value(h).view(batch, t, self.n_kv_heads, self.d_head).transpose(1, 2)
        if cache is not None:
            # Write in place, then read every position so far: no new allocation per token.
            cache.keys[index][:, :, start:start + t] = keys
            cache.values[index][:, :, start:start + t] = values
            keys = cache.keys[index][:, :, :start + t]
            values = cache.values[index][:, :, :start + t]
        group = self.n_heads // self.n_kv_heads
        if group > 1:  # each key-value head serves `group` query heads
            keys = keys.repeat_interleave(group, dim=1)  # (B, nh, n, hs)
            values = values.repeat_interleave(group, dim=1)
        n = keys.shape[2]
        if t == 1:
            attended = F.scaled_dot_product_attention(queries, keys, values)  # the newest token sees all
        else:
            allowed = torch.ones(t, n, dtype=torch.bool, device=x.device).tril(diagonal=n - t)
            attended = F.scaled_dot_product_attention(queries, keys, values, attn_mask=allowed)
        x = x + self.out(attended.transpose(1, 2).reshape(batch, t, d_model))
        return x + self.mlp(self.norm_mlp(x))


class DecoderLM(nn.Module):
    """Token and position embeddings, pre-norm layers, a final norm and a linear head."""

    def __init__(self, vocab, d_model, n_heads, n_layers, n_kv_heads=None, max_len=1024):
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads or n_heads
        self.n_layers, self.d_head, self.max_len = n_layers, d_model // n_heads, max_len
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(_Layer(d_model, n_heads, self.n_kv_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, tokens, cache=None):
        start = 0 if cache is None else cache.length
        t = tokens.shape[1]
        x = self.tokens(tokens) + self.positions(torch.arange(start, start + t, device=tokens.device))
        for index, layer in enumerate(self.layers):
            x = layer(x, start, cache, index)
        if cache is not None:
            cache.length = start + t
        return self.head(self.norm(x))


def parameter_bytes(model):
    return sum(p.nelement() * p.element_size() for p in model.parameters())


def cache_bytes_formula(model, n, batch=1, bytes_per_number=4):
    """2 (keys and values) x layers x key-value heads x n x d_head x bytes."""
    return 2 * model.n_layers * model.n_kv_heads * n * model.d_head * bytes_per_number * batch


@torch.no_grad()
def greedy(model, prompt, n_new, use_cache=True):
    """Greedy decoding of `n_new` tokens after `prompt (batch, n)`; also returns the logits
    of every step, to compare the two ways."""
    tokens, steps = prompt, []
    cache = StaticCache(model, prompt.shape[0]) if use_cache else None
    feed = prompt
    for _ in range(n_new):
        logits = model(feed if use_cache else tokens, cache)[:, -1]  # (B, vocab)
        steps.append(logits)
        feed = logits.argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, feed], dim=1)
    return tokens, torch.stack(steps, dim=1)


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def time_per_token(model, n, use_cache, repeats=5, batch=1):
    """The median seconds of one decoding step for the token after `n` earlier ones: a
    forward pass of one token with the cache of `n`, or of all `n + 1` tokens without it."""
    device = next(model.parameters()).device
    vocab = model.head.out_features
    generator = torch.Generator().manual_seed(n)
    tokens = torch.randint(0, vocab, (batch, n + 1), generator=generator).to(device)
    times = []
    for _ in range(repeats + 1):  # the first run warms up
        if use_cache:
            cache = StaticCache(model, batch)
            model(tokens[:, :n], cache)  # the prompt, once (not timed)
            _sync(device)
            begin = time.perf_counter()
            model(tokens[:, n:], cache)
        else:
            _sync(device)
            begin = time.perf_counter()
            model(tokens)
        _sync(device)
        times.append(time.perf_counter() - begin)
    times = sorted(times[1:])
    return times[len(times) // 2]


def operations_per_token(n, d_model, n_layers, use_cache):
    """Multiply-adds of the step that produces the token after `n` earlier ones, in the
    layers (the projections 4 d^2 and the MLP 8 d^2 per token, the scores and the
    weighted sum 2 d per pair of tokens): with the cache one token against n + 1 keys,
    without it every one of the n + 1 tokens again."""
    per_token = 12 * d_model ** 2
    if use_cache:
        return n_layers * (per_token + 2 * d_model * (n + 1))
    pairs = (n + 1) * (n + 2) // 2  # causal: token i sees i + 1 keys
    return n_layers * (per_token * (n + 1) + 2 * d_model * pairs)


def model_size(vocab=256, d_model=128, n_heads=4, n_layers=4, max_len=1100):
    """The about-1M-parameter model of the measurements."""
    return dict(vocab=vocab, d_model=d_model, n_heads=n_heads, n_layers=n_layers, max_len=max_len)


def count_parameters(model):
    return sum(p.nelement() for p in model.parameters())


def scaled_init(model, seed=0):
    """Fresh weights from a seed (the timings do not depend on them)."""
    torch.manual_seed(seed)
    for parameter in model.parameters():
        if parameter.dim() > 1:
            nn.init.normal_(parameter, std=1 / math.sqrt(parameter.shape[-1]))
    return model
