"""The vision lesson's two ablations: how the ViT pools, and how much data it needs.

1. Pooling: `course.applications.vision.DigitViT` with mean pooling (no class token;
   the head reads the mean of the patch outputs) against the class token of
   `vision_results.json`, with the same seeds, split, steps and settings.
2. Data: the ViT trained on stratified samples of TRAIN_SIZES images of the
   training split (the held-out fifth unchanged; CURVE_SEEDS samples and seeds
   per size),
   beside the nearest-neighbour and RBF-SVM classifiers on the same samples. The
   full training split is the run of `vision_results.json` (its three seeds).

Writes `vision_ablation_results.json`, which the lesson loads. Run from the
repository root:

    .venv/bin/python book/07_applications/vision_ablation_experiment.py

It trains on one CPU thread (forced CPU) and prints its running time: about six
minutes on a shared two-core machine.
"""

from pathlib import Path

from course.applications import vision
from course.applications.training import Experiment

SPLIT_SEED = 0
SEEDS = (0, 1, 2)  # of the pooling runs, as in vision_results.json
CURVE_SEEDS = (0, 1)
TRAIN_SIZES = (50, 100, 200, 500)
RESULTS = Path(__file__).with_name("vision_ablation_results.json")


def main():
    experiment = Experiment(RESULTS)
    pooling = {}
    for seed in SEEDS:
        run = vision.train(seed=seed, split_seed=SPLIT_SEED, threads=1,
                           progress=False, pooling="mean")
        pooling[str(seed)] = {"accuracy": run["accuracy"],
                              "train_seconds": round(run["history"].seconds,
                                                     1),
                              "parameters": run["parameters"]}
        print(f"mean pooling, seed {seed}: {run['accuracy']:.4f}")
    sizes = {}
    for size in TRAIN_SIZES:
        by_seed = {}
        for seed in CURVE_SEEDS:
            run = vision.train(seed=seed, split_seed=SPLIT_SEED, threads=1,
                               progress=False, train_size=size)
            classical = vision.baselines(SPLIT_SEED, train_size=size,
                                         subset_seed=seed)
            by_seed[str(seed)] = {
                "vit": run["accuracy"],
                "train_seconds": round(run["history"].seconds, 1),
                "1-nearest neighbour": classical["1-nearest neighbour"],
                "RBF SVM": classical["RBF SVM"]}
            print(f"{size} images, seed {seed}: ViT {run['accuracy']:.4f}, "
                  f"1-NN {classical['1-nearest neighbour']:.4f}")
        sizes[str(size)] = by_seed
    experiment.save({
        "split_seed": SPLIT_SEED, "steps": 600,
        "mean_pooling": pooling,
        "train_sizes": sizes,
    }, indent=1)


if __name__ == "__main__":
    main()
