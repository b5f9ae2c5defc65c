"""Train a one-layer attention model with five position encodings and measure extrapolation.

The task: a sequence of random tokens; at every position after the first, predict the
token one step earlier. The answer depends on *where* a token is, not on *what* the
tokens are, so a model without position information cannot solve it. The model is
`course.positional.OneLayerModel`.

Each encoding trains the same model on sequences of TRAIN_LENGTH tokens and is then
evaluated on longer sequences. The results go to `extrapolation_results.json`, which
the lesson loads. Run from the repository root:

    .venv/bin/python book/05_positional_encoding/extrapolation_experiment.py

For RoPE it then tries two ways of reaching longer contexts on the trained models
(long_context): position interpolation (positions divided by n / TRAIN_LENGTH, Chen et
al. 2023) and NTK-aware base scaling (base multiplied by s ** (d / (d - 2)), s = n /
TRAIN_LENGTH), each as trained and after a short fine-tune at length n.

It prints its running time (about two minutes on two busy CPU cores; it uses one thread).
"""

import copy
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
LONG_LENGTHS = (64, 128)  # where the RoPE models are tried with a new base or positions
FINE_TUNE_STEPS = 50
FINE_TUNE_RATE = 1e-3
RESULTS = Path(__file__).with_name("extrapolation_results.json")


def batch_of(n, generator, size=BATCH):
    return torch.randint(VOCABULARY, (size, n), generator=generator)


def accuracy_by_position(model, n, generator, size=512):
    """For each position 1..n-1, the share of sequences whose previous token is predicted."""
    tokens = batch_of(n, generator, size)
    with torch.no_grad():
        predicted = model(tokens).argmax(dim=-1)
    return (predicted[:, 1:] == tokens[:, :-1]).float().mean(dim=0)  # (n - 1,)


def fit(model, n, steps, learning_rate, generator):
    """Adam on the previous-token loss, `steps` batches of sequences of n tokens."""
    optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)
    for _ in range(steps):
        tokens = batch_of(n, generator)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits[:, 1:].reshape(-1, VOCABULARY), tokens[:, :-1].reshape(-1))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()


def train(encoding, seed):
    """The trained model, and its accuracy at each position for every test length."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = OneLayerModel(encoding, VOCABULARY, D_MODEL, N_HEADS, max_length=max(TEST_LENGTHS))
    fit(model, TRAIN_LENGTH, STEPS, 3e-3, generator)
    evaluation = torch.Generator().manual_seed(1000 + seed)
    return model, {n: accuracy_by_position(model, n, evaluation) for n in TEST_LENGTHS}


def long_context(model, seed):
    """Accuracy of a trained RoPE model at each length of LONG_LENGTHS: as trained, with
    interpolated positions, with the NTK-aware base; each also after a short fine-tune."""
    d_head = D_MODEL // N_HEADS
    found = {}
    for n in LONG_LENGTHS:
        scale = n / TRAIN_LENGTH
        variants = {  # (base, positions divided by)
            "plain": (10000.0, 1.0),
            "interpolated": (10000.0, scale),
            "ntk_base": (10000.0 * scale ** (d_head / (d_head - 2)), 1.0),
        }
        for name, (base, divisor) in variants.items():
            for tuned in (False, True):
                variant = copy.deepcopy(model)
                variant.rope_base, variant.rope_scale = base, divisor
                if tuned:
                    generator = torch.Generator().manual_seed(2000 + seed)
                    fit(variant, n, FINE_TUNE_STEPS, FINE_TUNE_RATE, generator)
                evaluation = torch.Generator().manual_seed(3000 + seed)
                accuracy = accuracy_by_position(variant, n, evaluation).mean().item()
                found[f"{name}{'_tuned' if tuned else ''}/{n}"] = round(accuracy, 4)
    return found


def main():
    torch.set_num_threads(1)
    start, cpu_start = time.perf_counter(), time.process_time()
    results, by_position = {}, {}
    longest = max(TEST_LENGTHS)
    for encoding in ENCODINGS:
        models, runs = zip(*[train(encoding, seed) for seed in SEEDS])
        if encoding == "rope":
            long_runs = [long_context(model, seed) for model, seed in zip(models, SEEDS)]
            long = {key: [run[key] for run in long_runs] for key in long_runs[0]}
            for key, values in long.items():
                print(f"{'rope, ' + key:>30}  {sum(values) / len(values):.3f}", flush=True)
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
        "rope_long_context": {"fine_tune_steps": FINE_TUNE_STEPS, "fine_tune_rate": FINE_TUNE_RATE,
                              "accuracy": long},
        "seconds": {"wall": round(wall, 1), "cpu": round(cpu, 1)},
    }
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {RESULTS.name} in {wall:.0f} s ({cpu:.0f} s of CPU)")


if __name__ == "__main__":
    main()
