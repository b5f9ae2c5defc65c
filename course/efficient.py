"""Chapter 8's measuring tools: naive attention, a tiled PyTorch attention for timing, peak memory.

`TiledAttention` is a PyTorch autograd Function for 4-D float tensors
`(batch, heads, n, d)`, without masks, that returns the output only: it exists to be
measured against `torch.nn.functional.scaled_dot_product_attention`, not to be copied
into the assignment (which asks for NumPy, any batch shape, the log-sum-exp and a causal
option).
"""

import math
from pathlib import Path

import numpy as np
import torch


def naive_attention_numpy(Q, K, V):
    """softmax(Q K^T / sqrt(d)) V with the whole (n_q, n_k) matrix in memory."""
    scores = Q @ K.T / math.sqrt(Q.shape[-1])  # (n_q, n_k)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ V


def naive_attention_torch(q, k, v):
    """The same in PyTorch: autograd keeps the (n_q, n_k) weights for the backward pass."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)
    return torch.softmax(scores, dim=-1) @ v


class TiledAttention(torch.autograd.Function):
    """Attention over square blocks of `block` queries and keys; the backward pass
    recomputes each block of weights from the log-sum-exp saved by the forward pass.
    Inputs (batch, heads, n, d), 4-D only."""

    @staticmethod
    def forward(ctx, q, k, v, block):
        if q.dim() != 4:
            raise ValueError("TiledAttention takes (batch, heads, n, d) tensors")
        scale = 1.0 / math.sqrt(q.shape[-1])
        out = torch.empty_like(q[..., :v.shape[-1]])
        log_sums = q.new_empty(q.shape[:-1])  # (B, H, n_q)
        for qs in range(0, q.shape[-2], block):
            part = q[..., qs:qs + block, :] * scale  # (B, H, bq, d)
            top = part.new_full(part.shape[:-1] + (1,), -math.inf)
            total = torch.zeros_like(top)
            acc = part.new_zeros(part.shape[:-1] + (v.shape[-1],))
            for ks in range(0, k.shape[-2], block):
                scores = part @ k[..., ks:ks + block, :].transpose(-2, -1)  # (B, H, bq, bk)
                grown = torch.maximum(top, scores.amax(dim=-1, keepdim=True))
                weights = torch.exp(scores - grown)
                factor = torch.exp(top - grown)
                total = factor * total + weights.sum(dim=-1, keepdim=True)
                acc = factor * acc + weights @ v[..., ks:ks + block, :]
                top = grown
            out[..., qs:qs + block, :] = acc / total
            log_sums[..., qs:qs + block] = (top + torch.log(total)).squeeze(-1)
        ctx.save_for_backward(q, k, v, out, log_sums)
        ctx.block, ctx.scale = block, scale
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, log_sums = ctx.saved_tensors
        block, scale = ctx.block, ctx.scale
        row_dot = (grad_out * out).sum(dim=-1, keepdim=True)  # (B, H, n_q, 1)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for ks in range(0, k.shape[-2], block):
            keys, values = k[..., ks:ks + block, :], v[..., ks:ks + block, :]
            for qs in range(0, q.shape[-2], block):
                part, g = q[..., qs:qs + block, :], grad_out[..., qs:qs + block, :]
                weights = torch.exp(part @ keys.transpose(-2, -1) * scale
                                    - log_sums[..., qs:qs + block, None])  # (B, H, bq, bk)
                dv[..., ks:ks + block, :] += weights.transpose(-2, -1) @ g
                d_scores = weights * (g @ values.transpose(-2, -1) - row_dot[..., qs:qs + block, :])
                dq[..., qs:qs + block, :] += scale * (d_scores @ keys)
                dk[..., ks:ks + block, :] += scale * (d_scores.transpose(-2, -1) @ part)
        return dq, dk, dv, None


def _status_bytes(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_resident_memory(function):
    """(bytes, result): how far this process's resident memory rose above its level at the
    start of `function()` (Linux: VmHWM after resetting it through /proc/self/clear_refs).
    Unlike tracemalloc, it sees PyTorch's allocations as well as NumPy's."""
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_bytes("VmRSS")
    result = function()
    return max(0, _status_bytes("VmHWM") - before), result
