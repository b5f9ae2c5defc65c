"""The full run of the vision lesson: a Vision Transformer on scikit-learn's digits.

Trains `course.applications.vision.DigitViT` for the module's default number of steps
with three seeds on the same split, scores the classical baselines of
`vision.baselines` on that split, and writes `vision_results.json` (loss curve of
seed 0, held-out accuracy of each seed, the baselines, the confusion matrix, and the
class token's attention over the patches for a few held-out images), which the
lesson loads. Run from the repository root:

    .venv/bin/python book/07_applications/vision_experiment.py

It trains on one CPU thread (forced CPU) and prints its running time: two to four
minutes on a shared two-core machine.
"""

from pathlib import Path

import torch

from course.applications import vision
from course.applications.training import Experiment

SEED = 0
SEEDS = (0, 1, 2)  # weights and batches; the split is always SEED's
EXAMPLES = 8  # held-out images whose attention is stored
RESULTS = Path(__file__).with_name("vision_results.json")


def main():
    experiment = Experiment(RESULTS)
    runs = [vision.train(seed=seed, split_seed=SEED, threads=1)
            for seed in SEEDS]
    for seed, other in zip(SEEDS, runs):
        print(f"seed {seed}: held-out accuracy {other['accuracy']:.4f} after "
              f"{other['history'].seconds:.0f} s of training")
    run = runs[0]
    model, test = run["model"], run["test"]
    baselines = vision.baselines(SEED)
    print("baselines:", baselines)
    confusion = torch.zeros(10, 10, dtype=torch.long)
    for truth, guess in zip(test.labels.tolist(), run["predicted"].tolist()):
        confusion[truth, guess] += 1
    model.eval()
    images = test.images[:EXAMPLES]
    maps = model.attention(images)  # per layer (B, H, 17, 17)
    # the class token's row (query 0) over the 16 patches, per layer and head
    from_class = torch.stack(maps)[:, :, :, 0, 1:]  # (layers, B, H, 16)
    record = {
        "task": "sklearn digits, 8x8, 2x2 patches",
        "parameters": run["parameters"], "steps": run["history"].steps,
        "train_seconds": round(run["history"].seconds, 1),
        "train_images": len(run["train"].labels),
        "test_images": len(test.labels),
        "accuracy": run["accuracy"],
        "seeds": {str(seed): {"accuracy": other["accuracy"],
                              "train_seconds": round(
                                  other["history"].seconds, 1)}
                  for seed, other in zip(SEEDS, runs)},
        "mean_accuracy": sum(r["accuracy"] for r in runs) / len(runs),
        "baselines": baselines,
        "losses": [round(v, 4) for v in run["history"].losses],
        "confusion": confusion.tolist(),
        "examples": {
            "images": images.tolist(),
            "labels": test.labels[:EXAMPLES].tolist(),
            "predicted": run["predicted"][:EXAMPLES].tolist(),
            "class_attention": [[[[round(v, 4) for v in head]
                                  for head in image] for image in layer]
                                for layer in from_class.tolist()],
        },
    }
    experiment.save(record)


if __name__ == "__main__":
    main()
