"""Chapter 8's targets: tiled attention against the naive computation, in time and peak memory.

    .venv/bin/python -m benchmarks efficient_attention

Each measurement runs in a fresh Python process with one thread, so that one case's
memory never counts in another's. Peak memory is that of the first call at full size
(after one on a single block): for NumPy what tracemalloc counts, for PyTorch (whose CPU
allocations tracemalloc does not see) how far the process's resident high-water mark
(VmHWM, reset through /proc/self/clear_refs) rose above what it held before the call.
Times are compared as ratios measured in one process: each round calls every case of a
comparison once, in turn, and a ratio is the median over the rounds of the ratios within
a round, so that load which comes and goes on a shared machine slows both sides alike.

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


def _compare_child(kinds, n, d, block, rounds):
    """Time several cases in this process, interleaved: each round runs every case once,
    in turn, so that a ratio compares calls made under the same conditions (a load that
    comes and goes slows both sides of it). Returns each case's seconds per round."""
    import torch

    torch.set_num_threads(1)
    functions = {}
    for kind in kinds:  # "numpy_tiled@64": the case with its own block size
        name, _, own_block = kind.partition("@")
        functions[kind] = _case(name, n, d, int(own_block or block), rounds)
    for function in functions.values():  # first calls set libraries up
        function()
    seconds = {kind: [] for kind in kinds}
    for _ in range(rounds):
        for kind, function in functions.items():
            start = time.perf_counter()
            function()
            seconds[kind].append(time.perf_counter() - start)
    return seconds


def _fresh_process(call):
    """Run `call` (the source of a call of a function of this module) in a fresh Python process with one
    thread and return what it printed as JSON."""
    code = f"import json; import benchmarks.efficient_attention as b; print(json.dumps(b.{call}))"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "COURSE_FORCE_CPU": "1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{call} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def compare(kinds, n, d=64, block=256, rounds=7):
    """Interleaved timings of several cases in one fresh process with one thread:
    {"seconds": {kind: median seconds}, "ratio": {kind: median over rounds of its time
    divided by the first kind's in the same round}}."""
    seconds = _fresh_process(f"_compare_child({list(kinds)!r}, {n}, {d}, {block}, {rounds})")
    first = seconds[kinds[0]]
    return {"seconds": {kind: median(times) for kind, times in seconds.items()},
            "ratio": {kind: median([t / f for t, f in zip(times, first)])
                      for kind, times in seconds.items()}}


def measure(kind, n, d=64, block=256, repeats=3):
    """{"seconds", "peak"} of one case, measured in a fresh process with one thread."""
    return _fresh_process(f"_child({kind!r}, {n}, {d}, {block}, {repeats})")


def targets():
    numpy_naive = measure("numpy_naive", 4096)
    numpy_tiled = measure("numpy_tiled", 4096, block=256)
    numpy_times = compare(["numpy_naive", "numpy_tiled"], 4096, rounds=5)
    memory_ratio = numpy_naive["peak"] / max(numpy_tiled["peak"], 1)
    time_ratio = numpy_times["ratio"]["numpy_tiled"]
    seconds = numpy_times["seconds"]
    rows = [
        Target("NumPy tiled forward, n = 4096, d = 64, block 256: peak memory", None,
               numpy_tiled["seconds"], f"{numpy_tiled['peak'] / MiB:.1f} MiB vs {numpy_naive['peak'] / MiB:.0f} MiB "
               f"({memory_ratio:.0f}x less)", ">= 16x less", memory_ratio >= 16),
        Target("NumPy tiled forward, n = 4096, d = 64, block 256: time", None, seconds["numpy_tiled"],
               f"{seconds['numpy_tiled'] * 1e3:.0f} ms vs {seconds['numpy_naive'] * 1e3:.0f} ms "
               f"({time_ratio:.2f}x, median of 5 paired rounds)", "<= 2x the naive pass", time_ratio <= 2),
    ]
    naive_both = measure("torch_naive_backward", 8192, repeats=2)
    tiled_both = measure("torch_tiled_backward", 8192, repeats=2)
    ratio = naive_both["peak"] / max(tiled_both["peak"], 1)
    rows.append(Target("PyTorch tiled forward + backward, n = 8192: peak memory", None, tiled_both["seconds"],
                       f"{tiled_both['peak'] / MiB:.0f} MiB vs {naive_both['peak'] / MiB:.0f} MiB ({ratio:.0f}x less)",
                       ">= 20x less", ratio >= 20))
    torch_times = compare(["sdpa", "torch_tiled", "torch_naive"], 4096, rounds=7)
    seconds, ratios = torch_times["seconds"], torch_times["ratio"]
    rows.append(Target("PyTorch tiled forward, n = 4096, block 256, vs SDPA", None, seconds["torch_tiled"],
                       f"{seconds['torch_tiled'] * 1e3:.0f} ms vs {seconds['sdpa'] * 1e3:.0f} ms "
                       f"({ratios['torch_tiled']:.2f}x, median of 7 paired rounds)", "<= 2x SDPA",
                       ratios["torch_tiled"] <= 2))
    versus_naive = ratios["torch_tiled"] / ratios["torch_naive"]
    rows.append(Target("PyTorch tiled forward, n = 4096, block 256, vs naive", None, seconds["torch_tiled"],
                       f"{seconds['torch_tiled'] * 1e3:.0f} ms vs {seconds['torch_naive'] * 1e3:.0f} ms "
                       f"({versus_naive:.2f}x)", "faster than naive", versus_naive < 1))
    sdpa = measure("sdpa", 4096)
    sdpa_3d = measure("sdpa_3d", 4096)
    matrix = 4096 * 4096 * 4
    rows.append(Target("SDPA on 3-D (1, n, d) input, n = 4096: peak memory", None, sdpa_3d["seconds"],
                       f"{sdpa_3d['peak'] / MiB:.0f} MiB (4-D input: {sdpa['peak'] / MiB:.0f} MiB)",
                       ">= one n x n float32 matrix (the pitfall)", sdpa_3d["peak"] >= matrix))
    return rows
