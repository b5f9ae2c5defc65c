"""Norm orders and the modern block, for the training comparison of chapter 6.

`Stack(variant, depth, ...)` is a small causal language model whose blocks are PyTorch's
own `nn.TransformerEncoderLayer`, with a causal mask, putting their normalization in one
of three ways (the `variant`):

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


def _block(variant, d_model, n_heads):
    """One block of the stack: PyTorch's own nn.TransformerEncoderLayer, whose forward pass
    places the norms (`norm_first`). The "rmsnorm-swiglu" block is its pre-norm layer with
    RMSNorm in place of its norms and SwiGLU in place of its feed-forward network."""
    # The weights are drawn as nn.Linear layers draw theirs, attention's first: PyTorch's
    # layer draws its attention's by another rule, and its own numbers are not used.
    swiglu = variant == "rmsnorm-swiglu"
    attention_in, attention_out = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
    if swiglu:
        # 8/3 d_model hidden units: the same parameter count as a 4 d_model ReLU network.
        feed_forward = SwiGLU(d_model, 8 * d_model // 3)
    else:
        feed_forward = (nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model))
    with torch.random.fork_rng(devices=[]):  # the numbers PyTorch's layer draws are replaced below
        block = nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout=0.0,
                                           activation=nn.Identity() if swiglu else "relu", batch_first=True,
                                           norm_first=variant != "post-norm")
    with torch.no_grad():
        block.self_attn.in_proj_weight.copy_(attention_in.weight)
        block.self_attn.in_proj_bias.copy_(attention_in.bias)
        block.self_attn.out_proj.weight.copy_(attention_out.weight)
        block.self_attn.out_proj.bias.copy_(attention_out.bias)
        if not swiglu:
            block.linear1.load_state_dict(feed_forward[0].state_dict())
            block.linear2.load_state_dict(feed_forward[1].state_dict())
    if swiglu:
        block.norm1, block.norm2 = RMSNorm(d_model), RMSNorm(d_model)
        block.linear1, block.linear2 = feed_forward, nn.Identity()  # its sublayer: linear2(act(linear1(x)))
    return block


class Stack(nn.Module):
    def __init__(self, variant, depth, vocab=16, d_model=64, n_heads=4, max_len=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(_block(variant, d_model, n_heads) for _ in range(depth))
        # Pre-norm stacks need a last norm before the head; post-norm ones end with one.
        self.final = nn.Identity() if variant == "post-norm" else (
            RMSNorm(d_model) if variant == "rmsnorm-swiglu" else nn.LayerNorm(d_model))
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        n = tokens.shape[1]
        x = self.embed(tokens) + self.position(torch.arange(n, device=tokens.device))
        blocked = torch.ones(n, n, dtype=torch.bool, device=tokens.device).triu(1)  # PyTorch's: True blocks
        for block in self.blocks:
            x = block(x, src_mask=blocked, is_causal=True)
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
        block = _block(variant, d_model, 4)
        norms, feed_forward = (block.norm1, block.norm2), (block.linear1, block.linear2)
        counts[variant] = {"norms": sum(p.numel() for m in norms for p in m.parameters()),
                           "feed_forward": sum(p.numel() for m in feed_forward for p in m.parameters())}
    return counts
