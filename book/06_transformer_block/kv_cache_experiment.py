"""Measure the key-value cache: time per generated token with and without it, agreement of
the logits, and the cache's memory for multi-head, grouped-query and multi-query
attention.

The model is `course.kv_cache.DecoderLM` with about one million parameters (float32,
random weights: the cost of a step does not depend on them). Results go to
`kv_cache_results.json`, which the lesson loads; `benchmarks/kv_cache.py` checks the
chapter's targets with the same functions. Run from the repository root:

    .venv/bin/python book/06_transformer_block/kv_cache_experiment.py

It runs on the CPU with one thread (so that a shared machine disturbs it less), and on
the GPU as well when there is one. Some ten seconds on the CPU.
"""

import json
import platform
import time
from pathlib import Path

import torch

from course.kv_cache import (DecoderLM, StaticCache, cache_bytes_formula, count_parameters, last_logits,
                             model_size, operations_per_token, scaled_init, time_per_token, weight_bytes)

LENGTHS = [64, 128, 256, 512, 1024]
RESULTS = Path(__file__).with_name("kv_cache_results.json")


def build(device):
    return scaled_init(DecoderLM(**model_size())).to(device).eval()


def per_token(model):
    """The fastest of three medians of five steps at each context: other work on a shared
    machine only ever adds time."""
    rows = []
    for n in LENGTHS:
        without = min(time_per_token(model, n, use_cache=False) for _ in range(3))
        with_cache = min(time_per_token(model, n, use_cache=True) for _ in range(3))
        rows.append({"n": n, "without_ms": 1e3 * without, "with_ms": 1e3 * with_cache,
                     "speedup": without / with_cache})
    return rows


def agreement(model, device, steps=64):
    """The next token's logits with and without the cache after contexts of 17 to 16 + steps tokens."""
    tokens = torch.randint(0, model.head.out_features, (2, 16 + steps),
                           generator=torch.Generator().manual_seed(2)).to(device)
    cached, plain = (torch.stack([last_logits(model, tokens[:, :n], use_cache) for n in range(17, 17 + steps)])
                     for use_cache in (True, False))
    return {"steps": steps, "max_logit_difference": float((cached - plain).abs().max()),
            "same_tokens": bool(torch.equal(cached.argmax(dim=-1), plain.argmax(dim=-1)))}


def memory(model, n=1024, n_heads=4):
    """The cache of the model's width cut into `n_heads` heads, sharing 4, 2 or 1 key-value heads."""
    rows = []
    d_head = model.d_model // n_heads
    for name, n_kv_heads in (("multi-head", 4), ("grouped-query", 2), ("multi-query", 1)):
        cache = StaticCache(model.n_layers, n_kv_heads, d_head, n, batch=1)  # room for n positions
        rows.append({"attention": name, "kv_heads": n_kv_heads, "n": n, "cache_bytes": cache.bytes(),
                     "formula_bytes": cache_bytes_formula(model.n_layers, n_kv_heads, d_head, n),
                     "weight_bytes": weight_bytes(model, n_heads, n_kv_heads)})
    return rows


def measure(device):
    model = build(device)
    operations = [{"n": n, "without": operations_per_token(n, 128, 4, False),
                   "with": operations_per_token(n, 128, 4, True)} for n in LENGTHS]
    return {"device": str(device), "parameters": count_parameters(model), "per_token": per_token(model),
            "agreement": agreement(model, device), "memory": memory(model),
            "operations": operations}


def main():
    torch.set_num_threads(1)
    began = time.perf_counter()
    results = {"model": model_size(), "threads": 1, "torch": torch.__version__, "machine": platform.machine(),
               "cpu": measure(torch.device("cpu"))}
    if torch.cuda.is_available():
        results["cuda"] = measure(torch.device("cuda"))
        results["cuda_name"] = torch.cuda.get_device_name()
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    for row in results["cpu"]["per_token"]:
        print(f"n={row['n']:5d}  without {row['without_ms']:8.2f} ms  with {row['with_ms']:6.2f} ms  "
              f"{row['speedup']:6.1f}x")
    print("agreement:", results["cpu"]["agreement"])
    print(f"ran in {time.perf_counter() - began:.0f} s; wrote {RESULTS}")


if __name__ == "__main__":
    main()
