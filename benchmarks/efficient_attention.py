"""Chapter 8's targets: tiled attention against the naive computation, in time and peak memory.

    .venv/bin/python -m benchmarks efficient_attention

Each measurement runs in a fresh Python process with one thread, so that one case's
memory never counts in another's. Peak memory is that of the first call at full size (after one on a single block): for NumPy what
tracemalloc counts, for PyTorch (whose CPU allocations tracemalloc does not see) how far
the process's resident high-water mark (VmHWM, reset through /proc/self/clear_refs)
rose above what it held before the call. Times are the best of a few later calls.

* NumPy, float64: the naive forward pass (the whole score matrix) against the reference
  `tiled_attention` of the assignment (solutions/efficient_attention), at n = 4096, d = 64:
  at most 1/16 of the naive peak memory and at most twice its time.
* PyTorch, float32, one head as (1, 1, n, d): a tiled forward and backward pass
  (`TiledAttention`, below) against autograd through the naive computation at n = 8192:
  at least 20x less peak memory.
* PyTorch at n = 4096: the tiled forward pass with 256-wide blocks within 2x of
  `scaled_dot_product_attention` and faster than the naive pass.
"""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from benchmarks.targets import Target

REPO = Path(__file__).resolve().parent.parent
MiB = 2 ** 20


def naive_attention_torch(q, k, v):
    """softmax(q k^T / sqrt(d)) v in PyTorch: autograd keeps the (n_q, n_k) weights for the
    backward pass."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)
    return torch.softmax(scores, dim=-1) @ v


class TiledAttention(torch.autograd.Function):
    """Attention over square blocks of `block` queries and keys; the backward pass
    recomputes each block of weights from the log-sum-exp saved by the forward pass.
    Inputs (batch, heads, n, d), 4-D only, without masks: it exists to be measured against
    scaled_dot_product_attention. It is most of the assignment's answer in PyTorch, so it
    lives here, with the benchmark and the reference solution it reads, not in course/."""

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


def _reference_tiled_attention():
    """The assignment's reference tiled_attention, from its solution notebook."""
    import nbformat
    import numpy as np

    from autograder.judging.catalogue import reference_code

    notebook = nbformat.read(REPO / "solutions/efficient_attention/efficient_attention.ipynb", as_version=4)
    namespace = {"np": np, "math": math}
    exec(reference_code(notebook)["tiled_attention"], namespace)
    return namespace["tiled_attention"]


def _case(kind, n, d, block, repeats):
    """The function to measure and its inputs, built before the measurement starts."""
    import numpy as np
    import torch.nn.functional as F

    from course.efficient import naive_attention_numpy

    if kind.startswith("numpy"):
        rng = np.random.default_rng(0)
        Q, K, V = (rng.normal(size=(n, d)) for _ in range(3))
        tiled = _reference_tiled_attention() if kind == "numpy_tiled" else None
        return {"numpy_naive": lambda: naive_attention_numpy(Q, K, V),
                "numpy_tiled": lambda: tiled(Q, K, V, block_size=block)}[kind]
    generator = torch.Generator().manual_seed(0)
    shape = (1, n, d) if kind == "sdpa_3d" else (1, 1, n, d)
    backward = kind.endswith("_backward")
    q, k, v = (torch.randn(*shape, generator=generator, requires_grad=backward) for _ in range(3))
    grad = torch.randn(*shape, generator=generator)

    def run(forward):
        if not backward:
            with torch.no_grad():
                return forward()
        out = forward()
        return torch.autograd.grad(out, (q, k, v), grad)

    forwards = {
        "torch_naive": lambda: naive_attention_torch(q, k, v),
        "torch_tiled": lambda: TiledAttention.apply(q, k, v, block),
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
        "sdpa_3d": lambda: F.scaled_dot_product_attention(q, k, v),
    }
    return lambda: run(forwards[kind.removesuffix("_backward")])


def _child(kind, n, d, block, repeats):
    """Measure one case in this process: {"seconds", "peak"}. The peak comes from the first
    call, before any repeat could leave freed memory behind for the next one to reuse."""
    import tracemalloc

    import torch

    torch.set_num_threads(1)
    # Libraries set themselves up on first use (autograd's engine, matrix kernels): pay that
    # on one block's worth of data, so that the peak below is the computation's own.
    _case(kind, min(n, block), d, block, repeats)()
    function = _case(kind, n, d, block, repeats)
    if kind.startswith("numpy"):
        tracemalloc.start()  # NumPy reports its arrays to tracemalloc
        result = function()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        before = _status_bytes("VmRSS")
        result = function()
        peak = _status_bytes("VmHWM") - before
    del result
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return {"seconds": best, "peak": peak}


def measure(kind, n, d=64, block=256, repeats=3):
    """{"seconds", "peak"} of one case, measured in a fresh process with one thread."""
    code = ("import json, sys; from benchmarks.efficient_attention import _child; "
            f"print(json.dumps(_child({kind!r}, {n}, {d}, {block}, {repeats})))")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "COURSE_FORCE_CPU": "1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} at n = {n} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def targets():
    numpy_naive = measure("numpy_naive", 4096)
    numpy_tiled = measure("numpy_tiled", 4096, block=256)
    memory_ratio = numpy_naive["peak"] / max(numpy_tiled["peak"], 1)
    time_ratio = numpy_tiled["seconds"] / numpy_naive["seconds"]
    rows = [
        Target("NumPy tiled forward, n = 4096, d = 64, block 256: peak memory", None,
               numpy_tiled["seconds"], f"{numpy_tiled['peak'] / MiB:.1f} MiB vs {numpy_naive['peak'] / MiB:.0f} MiB "
               f"({memory_ratio:.0f}x less)", ">= 16x less", memory_ratio >= 16),
        Target("NumPy tiled forward, n = 4096, d = 64, block 256: time", None, numpy_tiled["seconds"],
               f"{numpy_tiled['seconds'] * 1e3:.0f} ms vs {numpy_naive['seconds'] * 1e3:.0f} ms "
               f"({time_ratio:.2f}x)", "<= 2x the naive pass", time_ratio <= 2),
    ]
    naive_both = measure("torch_naive_backward", 8192, repeats=2)
    tiled_both = measure("torch_tiled_backward", 8192, repeats=2)
    ratio = naive_both["peak"] / max(tiled_both["peak"], 1)
    rows.append(Target("PyTorch tiled forward + backward, n = 8192: peak memory", None, tiled_both["seconds"],
                       f"{tiled_both['peak'] / MiB:.0f} MiB vs {naive_both['peak'] / MiB:.0f} MiB ({ratio:.0f}x less)",
                       ">= 20x less", ratio >= 20))
    sdpa = measure("sdpa", 4096)
    naive = measure("torch_naive", 4096)
    tiled = measure("torch_tiled", 4096, block=256)
    rows.append(Target("PyTorch tiled forward, n = 4096, block 256, vs SDPA", None, tiled["seconds"],
                       f"{tiled['seconds'] * 1e3:.0f} ms vs {sdpa['seconds'] * 1e3:.0f} ms "
                       f"({tiled['seconds'] / sdpa['seconds']:.2f}x)", "<= 2x SDPA",
                       tiled["seconds"] <= 2 * sdpa["seconds"]))
    rows.append(Target("PyTorch tiled forward, n = 4096, block 256, vs naive", None, tiled["seconds"],
                       f"{tiled['seconds'] * 1e3:.0f} ms vs {naive['seconds'] * 1e3:.0f} ms", "faster than naive",
                       tiled["seconds"] < naive["seconds"]))
    sdpa_3d = measure("sdpa_3d", 4096)
    matrix = 4096 * 4096 * 4
    rows.append(Target("SDPA on 3-D (1, n, d) input, n = 4096: peak memory", None, sdpa_3d["seconds"],
                       f"{sdpa_3d['peak'] / MiB:.0f} MiB (4-D input: {sdpa['peak'] / MiB:.0f} MiB)",
                       ">= one n x n float32 matrix (the pitfall)", sdpa_3d["peak"] >= matrix))
    return rows
