"""Train the same small causal model with three blocks: post-norm, pre-norm, and pre-norm
with RMSNorm and SwiGLU, at two depths and two learning rates, with and without
learning-rate warm-up.

The task is `course.norms.copy_batch`: a random string of 8 tokens, a separator, and the
string again; the loss counts the second copy only, which a model that attends to the
right earlier token predicts exactly. Results (the loss after every step, and the
parameter counts) go to `norm_results.json`, which the lesson plots. Run from the
repository root:

    .venv/bin/python book/06_transformer_block/norm_experiment.py

One CPU thread; it prints its running time (about four minutes on two busy cores).
"""

import json
import time
from pathlib import Path

import torch

from course.norms import VARIANTS, parameter_counts, train

SETTINGS = [(2, 1e-2), (8, 3e-3), (8, 1e-2)]  # (depth, learning rate)
WARMUP = 100
STEPS = 250
BATCH = 16
RESULTS = Path(__file__).with_name("norm_results.json")


def main():
    torch.set_num_threads(1)
    began = time.perf_counter()
    runs = []
    for depth, learning_rate in SETTINGS:
        for variant in VARIANTS:
            for warmup in (0, WARMUP):
                start = time.perf_counter()
                losses = train(variant, depth, learning_rate, warmup, steps=STEPS, batch=BATCH)
                runs.append({"variant": variant, "depth": depth, "learning_rate": learning_rate,
                             "warmup": warmup, "losses": [round(x, 4) for x in losses]})
                tail = sum(losses[-20:]) / 20
                print(f"{variant:15s} depth {depth:2d} lr {learning_rate:g} warm-up {warmup:3d}: "
                      f"last-20 loss {tail:.3f} ({time.perf_counter() - start:.0f} s)", flush=True)
    results = {"task": "copy a string of 8 tokens after a separator", "vocabulary": 16, "d_model": 64,
               "n_heads": 4, "optimizer": "Adam", "steps": STEPS,
               "batch": BATCH, "warmup_steps": WARMUP, "seed": 0, "parameters_per_block": parameter_counts(),
               "runs": runs}
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"ran in {time.perf_counter() - began:.0f} s; wrote {RESULTS}")


if __name__ == "__main__":
    main()
