"""The full run of the pretrained-model lesson's classification section.

Docstrings of Python's standard library labelled by their package
(`course.applications.classification`): all-MiniLM-L6-v2 fine-tuned, the same
architecture trained from random weights in the same way, logistic regression on
the frozen pretrained embeddings, and logistic regression on word counts, all on
the same split. The two trained encoders run with the SEEDS (head, dropout and
batch order; for the random encoder its weights too). Writes
`classification_results.json`, which the lesson loads. Run from the repository
root:

    .venv/bin/python book/07_applications/classification_experiment.py

It trains on one CPU thread and prints its running time: about six minutes on a
shared two-core machine.
"""

import time
from collections import Counter
from pathlib import Path

from course.applications import classification
from course.applications.training import Experiment

SEEDS = (0, 1)
RESULTS = Path(__file__).with_name("classification_results.json")


def main():
    experiment = Experiment(RESULTS)
    train, test, names = classification.make_data()
    tokenizer = classification.load_tokenizer()
    counts = Counter(y for _, y in test)
    print(f"{len(train)} training and {len(test)} held-out docstrings")
    start = time.perf_counter()
    bag = classification.bag_of_words(train, test)
    bag_seconds = time.perf_counter() - start
    start = time.perf_counter()
    frozen = classification.probe(train, test, tokenizer)
    probe_seconds = time.perf_counter() - start
    print(f"bag of words {bag:.3f}, frozen MiniLM + logistic regression "
          f"{frozen:.3f}")
    runs = {}
    for name, pretrained in (("fine_tuned", True), ("from_scratch", False)):
        runs[name] = {}
        for seed in SEEDS:
            run = classification.fine_tune(train, test, len(names),
                                           pretrained=pretrained, seed=seed,
                                           tokenizer=tokenizer)
            runs[name][str(seed)] = {
                "accuracy": run["accuracy"], "steps": run["steps"],
                "train_seconds": round(run["seconds"], 1),
                "losses": [round(v, 4) for v in run["losses"]],
                "predicted": run["predicted"]}
            print(f"{name}, seed {seed}: {run['accuracy']:.3f} in "
                  f"{run['seconds']:.0f} s")
        parameters = run["parameters"]
    experiment.save({
        "packages": names,
        "train_examples": len(train), "test_examples": len(test),
        "train_per_package": [sum(y == k for _, y in train)
                              for k in range(len(names))],
        "test_per_package": [counts[k] for k in range(len(names))],
        "majority_share": max(counts.values()) / len(test),
        "max_tokens": classification.MAX_TOKENS,
        "parameters": parameters,
        "test_labels": [y for _, y in test],
        "bag_of_words": bag, "bag_of_words_seconds": round(bag_seconds, 2),
        "frozen_probe": frozen, "frozen_probe_seconds": round(probe_seconds, 1),
        "runs": runs,
    }, indent=1)


if __name__ == "__main__":
    main()
