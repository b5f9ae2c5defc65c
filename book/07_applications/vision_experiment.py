"""The full run of the vision lesson: a Vision Transformer on scikit-learn's digits.

Trains `course.applications.vision.DigitViT` for the module's default number of steps
and writes `vision_results.json` (loss curve, held-out accuracy, the confusion matrix,
and the class token's attention over the patches for a few held-out images), which
the lesson loads. Run from the repository root:

    .venv/bin/python book/07_applications/vision_experiment.py

It trains on one CPU thread (forced CPU) and prints its running time: one to two
minutes on a shared two-core machine.
"""

from pathlib import Path

import torch

from course.applications import vision
from course.applications.training import Experiment

SEED = 0
EXAMPLES = 8  # held-out images whose attention is stored
RESULTS = Path(__file__).with_name("vision_results.json")


def main():
    experiment = Experiment(RESULTS)
    run = vision.train(seed=SEED, threads=1)
    model, test = run["model"], run["test"]
    print(f"held-out accuracy {run['accuracy']:.4f} after "
          f"{run['history'].seconds:.0f} s of training")
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
