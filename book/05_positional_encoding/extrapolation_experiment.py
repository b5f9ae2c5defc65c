"""Train a one-layer attention model with five position encodings and measure extrapolation.

The task: a sequence of random tokens; at every position after the first, predict the
token one step earlier. The answer depends on *where* a token is, not on *what* the
tokens are, so a model without position information cannot solve it. The model is
`course.positional.OneLayerModel`.

Each encoding trains the same model on sequences of TRAIN_LENGTH tokens and is then
evaluated on longer sequences. The results go to `extrapolation_results.json`, which
the lesson loads. Run from the repository root:

    .venv/bin/python book/05_positional_encoding/extrapolation_experiment.py

It prints its running time (one to two minutes on two busy CPU cores; it uses one thread).
"""

import json
import time
from pathlib import Path

import torch
from torch import nn

from course.positional import OneLayerModel

VOCABULARY = 16
D_MODEL = 32
N_HEADS = 4
TRAIN_LENGTH = 16
TEST_LENGTHS = (16, 32, 64, 128)
STEPS = 600
BATCH = 64
SEEDS = (0, 1, 2)
ENCODINGS = ("none", "sinusoidal", "learned", "rope", "alibi")
RESULTS = Path(__file__).with_name("extrapolation_results.json")


def batch_of(n, generator, size=BATCH):
    return torch.randint(VOCABULARY, (size, n), generator=generator)


def accuracy_by_position(model, n, generator, size=512):
    """For each position 1..n-1, the share of sequences whose previous token is predicted."""
    tokens = batch_of(n, generator, size)
    with torch.no_grad():
        predicted = model(tokens).argmax(dim=-1)
    return (predicted[:, 1:] == tokens[:, :-1]).float().mean(dim=0)  # (n - 1,)


def train(encoding, seed):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = OneLayerModel(encoding, VOCABULARY, D_MODEL, N_HEADS, max_length=max(TEST_LENGTHS))
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(STEPS):
        tokens = batch_of(TRAIN_LENGTH, generator)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits[:, 1:].reshape(-1, VOCABULARY), tokens[:, :-1].reshape(-1))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    evaluation = torch.Generator().manual_seed(1000 + seed)
    return {n: accuracy_by_position(model, n, evaluation) for n in TEST_LENGTHS}


def main():
    torch.set_num_threads(1)
    start, cpu_start = time.perf_counter(), time.process_time()
    results, by_position = {}, {}
    longest = max(TEST_LENGTHS)
    for encoding in ENCODINGS:
        runs = [train(encoding, seed) for seed in SEEDS]
        results[encoding] = {str(n): [round(run[n].mean().item(), 4) for run in runs] for n in TEST_LENGTHS}
        # accuracy at each position of the longest sequences, averaged over the seeds
        averaged = torch.stack([run[longest] for run in runs]).mean(dim=0)  # (longest - 1,)
        by_position[encoding] = [round(v, 4) for v in averaged.tolist()]
        means = "  ".join(f"n={n}: {sum(results[encoding][str(n)]) / len(runs):.3f}" for n in TEST_LENGTHS)
        print(f"{encoding:>10}  {means}", flush=True)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    record = {
        "task": "predict the previous token",
        "vocabulary": VOCABULARY, "d_model": D_MODEL, "n_heads": N_HEADS,
        "train_length": TRAIN_LENGTH, "test_lengths": list(TEST_LENGTHS),
        "steps": STEPS, "batch": BATCH, "seeds": list(SEEDS),
        "accuracy": results,
        "accuracy_by_position": {"length": longest, "positions": list(range(1, longest)), **by_position},
        "seconds": {"wall": round(wall, 1), "cpu": round(cpu, 1)},
    }
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {RESULTS.name} in {wall:.0f} s ({cpu:.0f} s of CPU)")


if __name__ == "__main__":
    main()
