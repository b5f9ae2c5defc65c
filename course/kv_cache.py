"""A small decoder-only language model with a preallocated key-value cache (chapter 6).

The lesson and `benchmarks/kv_cache.py` use it to measure what the cache saves. It is
the simplest case: one attention head per layer (a step's cost does not depend on how
the width is cut into heads), a cache that holds room for `max_len` tokens per layer and
writes the new keys and values in place, and calls with a cache that feed either the
first tokens or one token at a time.

* `DecoderLM(vocab, d_model, n_layers, max_len=1024)`: `model(tokens, cache=None) ->
  logits`; with a cache, `tokens` are the newest tokens and their positions follow the
  cache's.
* `StaticCache(n_layers, n_kv_heads, d_head, max_len, batch)`: the preallocated keys and
  values, `cache.length` tokens so far; `model.new_cache(batch)` makes the model's.
* `last_logits(model, tokens, use_cache)`: the logits of the next token, with or without
  the cache.
* `time_per_token(model, n, use_cache, repeats)`: the seconds one more token costs after `n`.
* `time_decode_step(model, n)`, `step_bytes(model, n)`, `step_flops(model, n)`: the time of
  one cached step after `n` tokens, the bytes of weights and cache it reads, and its
  floating-point operations (what decides whether memory or arithmetic bounds it).
"""

import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from course.norms import SwiGLU


class StaticCache:
    """Room for `max_len` keys and values per layer, `n_kv_heads` heads of `d_head`
    features each, filled from position 0 on."""

    def __init__(self, n_layers, n_kv_heads, d_head, max_len, batch, device=None, dtype=torch.float32):
        shape = (batch, n_kv_heads, max_len, d_head)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.values = [torch.zeros_like(k) for k in self.keys]
        self.length = 0  # tokens written so far

    def bytes(self):
        """The memory its tensors occupy, measured on them: element size times elements, summed
        over the keys and values of every layer (room for `max_len` positions)."""
        return sum(t.element_size() * t.nelement() for t in self.keys + self.values)


class _Layer(nn.Module):
    """A pre-norm layer with one attention head and a SwiGLU feed-forward network."""

    def __init__(self, d_model):
        super().__init__()
        self.norm_attention = nn.LayerNorm(d_model)
        self.query = nn.Linear(d_model, d_model, bias=False)
        self.key = nn.Linear(d_model, d_model, bias=False)
        self.value = nn.Linear(d_model, d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.norm_mlp = nn.LayerNorm(d_model)
        self.mlp = SwiGLU(d_model, 8 * d_model // 3)  # as many weights as a 4 d_model ReLU network

    def forward(self, x, start, cache=None, index=0):
        h = self.norm_attention(x)
        queries, keys, values = self.query(h), self.key(h), self.value(h)  # (B, t, d): one head
        if cache is not None:
            # Write in place, then read every position so far: no new allocation per token.
            t = x.shape[1]
            cache.keys[index][:, 0, start:start + t] = keys
            cache.values[index][:, 0, start:start + t] = values
            keys = cache.keys[index][:, 0, :start + t]  # (B, start + t, d)
            values = cache.values[index][:, 0, :start + t]
        if x.shape[1] == 1:  # one new token: it sees every token so far
            attended = F.scaled_dot_product_attention(queries, keys, values)
        else:  # the first tokens: each sees itself and those before it
            attended = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
        x = x + self.out(attended)
        return x + self.mlp(self.norm_mlp(x))


class DecoderLM(nn.Module):
    """Token and position embeddings, pre-norm layers, a final norm and a linear head."""

    def __init__(self, vocab, d_model, n_layers, max_len=1024):
        super().__init__()
        self.d_model, self.n_layers, self.max_len = d_model, n_layers, max_len
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(_Layer(d_model) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def new_cache(self, batch):
        parameter = next(self.parameters())
        return StaticCache(self.n_layers, 1, self.d_model, self.max_len, batch, parameter.device,
                           parameter.dtype)

    def forward(self, tokens, cache=None):
        start = 0 if cache is None else cache.length
        t = tokens.shape[1]
        if t > 1 and start > 0:
            raise ValueError("feed several tokens only into an empty cache (then one token at a time)")
        x = self.tokens(tokens) + self.positions(torch.arange(start, start + t, device=tokens.device))
        for index, layer in enumerate(self.layers):
            x = layer(x, start, cache, index)
        if cache is not None:
            cache.length = start + t
        return self.head(self.norm(x))


def parameter_bytes(model):
    return sum(p.nelement() * p.element_size() for p in model.parameters())


def cache_bytes_formula(n_layers, n_kv_heads, d_head, n, batch=1, bytes_per_number=4):
    """2 (keys and values) x layers x key-value heads x n x d_head x bytes."""
    return 2 * n_layers * n_kv_heads * n * d_head * bytes_per_number * batch


def weight_bytes(model, n_heads, n_kv_heads, bytes_per_number=4):
    """The bytes of the model's weights were its width cut into `n_heads` heads that share
    `n_kv_heads` key-value heads: each layer's key and value projections shrink to
    `n_kv_heads * d_head` outputs."""
    d_model, d_head = model.d_model, model.d_model // n_heads
    saved = 2 * model.n_layers * d_model * (d_model - n_kv_heads * d_head)
    return parameter_bytes(model) - saved * bytes_per_number


@torch.no_grad()
def last_logits(model, tokens, use_cache=True):
    """The logits (B, vocab) of the token after `tokens (B, n)`: with the cache, the first
    n - 1 tokens fed once into an empty cache, then the last one alone with it; without
    the cache, all n tokens at once."""
    if not use_cache:
        return model(tokens)[:, -1]
    cache = model.new_cache(tokens.shape[0])
    model(tokens[:, :-1], cache)
    return model(tokens[:, -1:], cache)[:, -1]


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
            cache = model.new_cache(batch)
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


def model_size(vocab=256, d_model=128, n_layers=4, max_len=1100):
    """The about-1M-parameter model of the measurements."""
    return dict(vocab=vocab, d_model=d_model, n_layers=n_layers, max_len=max_len)


def count_parameters(model):
    return sum(p.nelement() for p in model.parameters())


def scaled_init(model, seed=0):
    """Fresh weights from a seed (the timings do not depend on them)."""
    torch.manual_seed(seed)
    for parameter in model.parameters():
        if parameter.dim() > 1:
            nn.init.normal_(parameter, std=1 / math.sqrt(parameter.shape[-1]))
    return model


@torch.no_grad()
def time_decode_step(model, n, repeats=7):
    """The median seconds of one cached decoding step after `n` tokens (batch 1): the prompt is
    fed once, then the step repeated, each time writing the new token's keys and values into
    the same slot of the cache."""
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(n)
    tokens = torch.randint(0, model.head.out_features, (1, n + 1), generator=generator).to(device)
    cache = model.new_cache(1)
    model(tokens[:, :n], cache)
    times = []
    for _ in range(repeats + 1):  # the first run warms up
        cache.length = n
        _sync(device)
        begin = time.perf_counter()
        model(tokens[:, n:], cache)
        _sync(device)
        times.append(time.perf_counter() - begin)
    times = sorted(times[1:])
    return times[len(times) // 2]


def step_bytes(model, n, batch=1):
    """Bytes one cached step after `n` tokens reads: every weight once (of the token and
    position tables only the rows it looks up) and the keys and values of n + 1 positions in
    every layer."""
    total = 0
    for name, parameter in model.named_parameters():
        if name in ("tokens.weight", "positions.weight"):
            total += batch * parameter.shape[1] * parameter.element_size()
        else:
            total += parameter.nelement() * parameter.element_size()
    number = next(model.parameters()).element_size()
    return total + batch * 2 * model.n_layers * (n + 1) * model.d_model * number


def step_flops(model, n, t=1):
    """Floating-point operations (a multiply-add is two) of feeding `t` tokens after `n`: each
    token multiplies every weight matrix once, and each pair of a query and a key it sees
    costs 2 d multiply-adds (a score and a weighted sum)."""
    matrices = sum(p.nelement() for name, p in model.named_parameters()
                   if p.dim() == 2 and name not in ("tokens.weight", "positions.weight"))
    pairs = sum(n + i + 1 for i in range(t))  # causal: token n + i sees n + i + 1 keys
    return 2 * (t * matrices + 2 * model.d_model * model.n_layers * pairs)
