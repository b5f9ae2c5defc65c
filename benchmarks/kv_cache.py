"""Chapter 6's targets for the key-value cache, measured on this machine.

    .venv/bin/python -m benchmarks kv_cache

The model is the lesson's (`course.kv_cache.DecoderLM`, about one million parameters,
float32, one CPU thread); each time is the fastest of three medians of five steps. Targets: a generated token at least 3x faster with the cache at
a context of 128 tokens and at least 10x at 512; the next token's logits with and without
the cache, after 64 contexts, within 1e-5 of each other, and the same most likely token.
"""

import time

import torch

from benchmarks.targets import Target
from course.kv_cache import DecoderLM, count_parameters, last_logits, model_size, scaled_init, time_per_token

GOALS = {128: 3.0, 512: 10.0}


def targets():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = scaled_init(DecoderLM(**model_size())).eval()
        parameters = count_parameters(model)
        found = []
        for n, goal in GOALS.items():
            began = time.perf_counter()
            # The fastest of three medians: other work on the machine only ever adds time.
            without = min(time_per_token(model, n, use_cache=False) for _ in range(3))
            with_cache = min(time_per_token(model, n, use_cache=True) for _ in range(3))
            speedup = without / with_cache
            found.append(Target(f"KV cache: time per token, n = {n}", parameters, time.perf_counter() - began,
                                f"{speedup:.1f}x ({1e3 * without:.2f} vs {1e3 * with_cache:.2f} ms)",
                                f">= {goal:g}x", speedup >= goal))
        began = time.perf_counter()
        tokens = torch.randint(0, 256, (2, 16 + 64), generator=torch.Generator().manual_seed(2))
        cached, plain = (torch.stack([last_logits(model, tokens[:, :n], use_cache) for n in range(17, 81)])
                         for use_cache in (True, False))
        difference = float((cached - plain).abs().max())
        seconds = time.perf_counter() - began
        found.append(Target("KV cache: logits with and without, 64 contexts", parameters, seconds,
                            f"max |difference| {difference:.1e}", "<= 1e-5", difference <= 1e-5))
        same = bool(torch.equal(cached.argmax(dim=-1), plain.argmax(dim=-1)))
        found.append(Target("KV cache: most likely tokens with and without, 64 contexts", parameters, seconds,
                            "identical" if same else "different", "identical", same))
        return found
    finally:
        torch.set_num_threads(threads)
