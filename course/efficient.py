"""Chapter 8's measuring tools for the lesson: the direct computation, and peak memory.

`naive_attention_numpy` is the direct computation for one head, with the whole score
matrix in memory: the lesson measures its memory wall. The tiled PyTorch pass that the
chapter's measurements time is most of the assignment's answer in another library, so
it lives with the benchmark that measures it (benchmarks/efficient_attention.py), beside
the reference solution that the benchmark reads, and no lesson imports it.
"""

import math
from pathlib import Path

import numpy as np


def naive_attention_numpy(Q, K, V):
    """softmax(Q K^T / sqrt(d)) V for 2-D Q, K, V, with the whole (n_q, n_k) matrix in memory."""
    scores = Q @ K.T / math.sqrt(Q.shape[-1])  # (n_q, n_k)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ V


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
