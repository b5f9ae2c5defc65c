"""The full run of the language-model lesson: characters of Python's docstrings.

Trains `course.applications.language_model.CharTransformer` with the GPT-style small
initialization and, for comparison, with PyTorch's default initialization, each for
at most BUDGET_S seconds of training, and writes `language_model_results.json`
(loss curves, held-out bits per character, the unigram and bigram baselines, and text
sampled before and after training), which the lesson loads. Run from the repository
root:

    .venv/bin/python book/07_applications/language_model_experiment.py

It trains on one CPU thread (forced CPU) and prints its running time: about four
minutes on a shared two-core machine.
"""

from pathlib import Path

import torch

from course.applications import language_model
from course.applications.training import Experiment

SEED = 0
BUDGET_S = 120
PROMPT = "Return the "
RESULTS = Path(__file__).with_name("language_model_results.json")


def sample(run, n_new=240):
    corpus = run["corpus"]
    prompt = corpus.encode(PROMPT).to(run["device"])
    generator = torch.Generator().manual_seed(SEED)
    return corpus.decode(run["model"].sample(prompt, n_new,
                                             generator=generator))


def main():
    experiment = Experiment(RESULTS)
    corpus = language_model.Corpus()
    unigram, bigram = language_model.unigram_and_bigram_bits(corpus)
    runs = {}
    for name, small in (("small_init", True), ("default_init", False)):
        run = language_model.train(seed=SEED, threads=1, corpus=corpus,
                                   budget_s=BUDGET_S, small_init=small)
        print(f"{name}: {run['bits']:.3f} bits per character after "
              f"{run['history'].seconds:.0f} s ({run['history'].steps} steps)")
        runs[name] = run
    untrained = language_model.train(seed=SEED, steps=0, progress=False,
                                     threads=1, corpus=corpus)
    best = runs["small_init"]
    record = {
        "text": "docstrings of Python's standard library "
                f"({len(language_model.MODULES)} modules)",
        "train_characters": len(corpus.train),
        "test_characters": len(corpus.test),
        "vocabulary": len(corpus.characters),
        "unigram_bits": round(unigram, 3), "bigram_bits": round(bigram, 3),
        "runs": {name: {
            "parameters": run["parameters"], "steps": run["history"].steps,
            "train_seconds": round(run["history"].seconds, 1),
            "bits": round(run["bits"], 3),
            "losses": [round(v, 4) for v in run["history"].losses]}
            for name, run in runs.items()},
        "sample_before": sample(untrained),
        "sample_after": sample(best),
    }
    experiment.save(record, indent=1)


if __name__ == "__main__":
    main()
