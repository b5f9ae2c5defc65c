"""Measure the key-value cache: time per generated token with and without it, the total
speed-up of a generation, agreement of the logits, and the cache's memory for multi-head,
grouped-query and multi-query attention.

The model is `course.kv_cache.DecoderLM` with about one million parameters (float32,
random weights: the cost of a step does not depend on them). Results go to
`kv_cache_results.json`, which the lesson loads; `benchmarks/kv_cache.py` checks the
chapter's targets with the same functions. Run from the repository root:

    .venv/bin/python book/06_transformer_block/kv_cache_experiment.py

It runs on the CPU with one thread (so that a shared machine disturbs it less), and on
the GPU as well when there is one. About a minute on the CPU.
"""

import json
import platform
import time
from pathlib import Path

import torch

from course.kv_cache import (DecoderLM, StaticCache, cache_bytes_formula, count_parameters, greedy,
                             model_size, operations_per_token, parameter_bytes, scaled_init, time_per_token)

LENGTHS = [64, 128, 256, 512, 1024]
TOTAL_PROMPT, TOTAL_NEW = 8, 512
RESULTS = Path(__file__).with_name("kv_cache_results.json")


def build(device, n_kv_heads=None):
    return scaled_init(DecoderLM(**model_size(), n_kv_heads=n_kv_heads)).to(device).eval()


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


def total(model, device):
    prompt = torch.randint(0, model.head.out_features, (1, TOTAL_PROMPT),
                           generator=torch.Generator().manual_seed(1)).to(device)
    seconds = {}
    for use_cache in (True, False):
        begin = time.perf_counter()
        tokens, _ = greedy(model, prompt, TOTAL_NEW, use_cache)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds[use_cache] = time.perf_counter() - begin
    return {"prompt": TOTAL_PROMPT, "new_tokens": TOTAL_NEW, "with_s": seconds[True], "without_s": seconds[False],
            "speedup": seconds[False] / seconds[True]}


def agreement(model, device, n_new=64):
    prompt = torch.randint(0, model.head.out_features, (2, 16),
                           generator=torch.Generator().manual_seed(2)).to(device)
    cached, cached_logits = greedy(model, prompt, n_new, use_cache=True)
    plain, plain_logits = greedy(model, prompt, n_new, use_cache=False)
    return {"steps": n_new, "max_logit_difference": float((cached_logits - plain_logits).abs().max()),
            "same_tokens": bool(torch.equal(cached, plain))}


def memory(device, n=1024):
    rows = []
    for name, n_kv_heads in (("multi-head", 4), ("grouped-query", 2), ("multi-query", 1)):
        model = build(device, n_kv_heads)
        cache = StaticCache(model, batch=1)
        rows.append({"attention": name, "kv_heads": n_kv_heads, "n": n, "cache_bytes": cache.bytes(n),
                     "formula_bytes": cache_bytes_formula(model, n), "weight_bytes": parameter_bytes(model),
                     "parameters": count_parameters(model)})
    return rows


def measure(device):
    model = build(device)
    operations = [{"n": n, "without": operations_per_token(n, 128, 4, False),
                   "with": operations_per_token(n, 128, 4, True)} for n in LENGTHS]
    return {"device": str(device), "parameters": count_parameters(model), "per_token": per_token(model),
            "total": total(model, device), "agreement": agreement(model, device), "memory": memory(device),
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
    print("total:", results["cpu"]["total"])
    print("agreement:", results["cpu"]["agreement"])
    print(f"ran in {time.perf_counter() - began:.0f} s; wrote {RESULTS}")


if __name__ == "__main__":
    main()
