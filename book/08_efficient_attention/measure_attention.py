"""Measure attention's time and peak memory on this machine; write measurements.json.

    .venv/bin/python book/08_efficient_attention/measure_attention.py

The lesson of chapter 8 plots what this script saved: measuring up to n = 8192 takes a
few minutes, too long for the book's build. Every case runs in a fresh process on one
thread (benchmarks/efficient_attention.py, `measure`): naive NumPy and the assignment's
reference tiled NumPy in float64, and in float32 PyTorch's naive computation, a tiled
forward pass (the benchmark's `TiledAttention`) and scaled_dot_product_attention on 4-D
and on 3-D inputs. Run it on an idle machine: the numbers are times.
"""

import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from benchmarks.efficient_attention import measure  # noqa: E402

LENGTHS = [256, 512, 1024, 2048, 4096, 8192]
KINDS = ["numpy_naive", "numpy_tiled", "torch_naive", "torch_tiled", "sdpa", "sdpa_3d"]
BLOCKS = [16, 32, 64, 128, 256, 512, 1024]


def main():
    import torch

    started = time.time()
    rows = []
    for n in LENGTHS:
        for kind in KINDS:
            result = measure(kind, n, block=256, repeats=3)
            rows.append({"kind": kind, "n": n, "block": 256, **result})
            print(kind, n, f"{result['seconds'] * 1e3:.1f} ms", f"{result['peak'] / 2**20:.1f} MiB", flush=True)
    blocks = []
    for kind, n in (("numpy_tiled", 2048), ("torch_tiled", 4096)):
        for block in BLOCKS:
            result = measure(kind, n, block=block, repeats=3)
            blocks.append({"kind": kind, "n": n, "block": block, **result})
            print(kind, n, block, f"{result['seconds'] * 1e3:.1f} ms", flush=True)
    load = os.getloadavg()
    settings = {"d": 64, "threads": 1, "torch": torch.__version__, "machine": platform.machine(),
                "processor": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                "load_average_after": [round(x, 2) for x in load], "wall_seconds": round(time.time() - started, 1)}
    (HERE / "measurements.json").write_text(json.dumps({"settings": settings, "lengths": rows, "blocks": blocks},
                                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
