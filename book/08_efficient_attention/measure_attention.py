"""Measure attention's time and peak memory on this machine; write measurements.json.

    .venv/bin/python book/08_efficient_attention/measure_attention.py

The lesson of chapter 8 plots what this script saved: measuring up to n = 8192 takes a
few minutes, too long for the book's build. Every case runs on one thread: naive NumPy
and the assignment's reference tiled NumPy in float64, and in float32 PyTorch's naive
computation, a tiled forward pass (the benchmark's `TiledAttention`) and
scaled_dot_product_attention on 4-D and on 3-D inputs. `compare` (in
benchmarks/efficient_attention.py) times the cases of a group in interleaved rounds in
one process, so that their ratios are measured under the same load; `measure` takes each
peak in a fresh process. Run it on an idle machine; the load average before and after is
saved with the numbers.
"""

import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from benchmarks.efficient_attention import compare, measure  # noqa: E402

LENGTHS = [256, 512, 1024, 2048, 4096, 8192]
NUMPY = ["numpy_naive", "numpy_tiled"]
TORCH = ["torch_naive", "torch_tiled", "sdpa", "sdpa_3d"]
ROUNDS = 5
BLOCKS = [16, 32, 64, 128, 256, 512, 1024]


def main():
    import torch

    started, load_before = time.time(), os.getloadavg()
    rows = []
    for n in LENGTHS:
        # Times: interleaved rounds in one process per group, so the ratios within a
        # group compare calls made under the same load; peaks: one fresh process each.
        times = {**compare(NUMPY, n, rounds=ROUNDS)["seconds"], **compare(TORCH, n, rounds=ROUNDS)["seconds"]}
        for kind in NUMPY + TORCH:
            peak = measure(kind, n, block=256, repeats=1)["peak"]
            rows.append({"kind": kind, "n": n, "block": 256, "seconds": times[kind], "peak": peak})
            print(kind, n, f"{times[kind] * 1e3:.1f} ms", f"{peak / 2**20:.1f} MiB", flush=True)
    blocks = []
    for kind, n in (("numpy_tiled", 2048), ("torch_tiled", 4096)):
        times = compare([f"{kind}@{block}" for block in BLOCKS], n, rounds=ROUNDS)["seconds"]
        for block in BLOCKS:
            blocks.append({"kind": kind, "n": n, "block": block, "seconds": times[f"{kind}@{block}"]})
            print(kind, n, block, f"{times[f'{kind}@{block}'] * 1e3:.1f} ms", flush=True)
    settings = {"d": 64, "threads": 1, "torch": torch.__version__, "machine": platform.machine(),
                "processor": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                "rounds": ROUNDS, "seconds": "median of interleaved rounds, one process per group",
                "load_average_before": [round(x, 2) for x in load_before],
                "load_average_after": [round(x, 2) for x in os.getloadavg()],
                "wall_seconds": round(time.time() - started, 1)}
    (HERE / "measurements.json").write_text(json.dumps({"settings": settings, "lengths": rows, "blocks": blocks},
                                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
