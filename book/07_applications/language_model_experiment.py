"""The full run of the language-model lesson: characters of Python's docstrings.

Trains `course.applications.language_model.CharTransformer` with the GPT-style small
initialization and, for comparison, with PyTorch's default initialization, each for
at most BUDGET_S seconds of training, and writes `language_model_results.json`
(the split and its overlap with training, loss curves, held-out bits per character,
the unigram, bigram and Kneser-Ney n-gram baselines on the same characters, and text
sampled before and after training), which the lesson loads. Run from the repository
root:

    .venv/bin/python book/07_applications/language_model_experiment.py

It trains on one CPU thread (forced CPU) and prints its running time: about seven
minutes on a shared two-core machine (the best run is also scored with windows that
slide by one character, which takes a minute and a half).
"""

import time
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


def every_tenth_share():
    """The share of held-out characters in 64-character spans seen in training
    under the split used before: every tenth docstring held out."""
    texts = [t for _, t in language_model.docstrings()]
    train = "\n\n".join(t for i, t in enumerate(texts) if i % 10)
    test = "\n\n".join(t for i, t in enumerate(texts) if not i % 10)
    return language_model.shared_span_share(
        test, language_model.spans(train))


def main():
    experiment = Experiment(RESULTS)
    corpus = language_model.Corpus()
    unigram, bigram = language_model.unigram_and_bigram_bits(corpus)
    start = time.perf_counter()
    n_grams = language_model.kneser_ney_bits(corpus)
    n_gram_seconds = time.perf_counter() - start
    print("Kneser-Ney:", {n: round(b, 3) for n, b in n_grams.items()},
          f"counted and scored in {n_gram_seconds:.1f} s")
    runs = {}
    for name, small in (("small_init", True), ("default_init", False)):
        run = language_model.train(seed=SEED, threads=1, corpus=corpus,
                                   budget_s=BUDGET_S, small_init=small)
        print(f"{name}: {run['bits']:.3f} bits per character after "
              f"{run['history'].seconds:.0f} s ({run['history'].steps} steps)")
        runs[name] = run
    untrained = language_model.train(seed=SEED, steps=0, progress=False,
                                     threads=1, corpus=corpus, stride=64)
    best = runs["small_init"]
    start = time.perf_counter()
    stride_1 = language_model.bits_per_character(
        best["model"], corpus.test, best["device"], stride=1)
    print(f"small_init, windows sliding by one: {stride_1:.3f} bits per "
          f"character ({time.perf_counter() - start:.0f} s)")
    record = {
        "text": "docstrings of Python's standard library "
                f"({len(language_model.MODULES)} modules)",
        "held_out_packages": sorted(corpus.held_out),
        "held_out_dropped_docstrings": corpus.dropped,
        "shared_64_every_tenth": round(every_tenth_share(), 4),
        "shared_64_before": round(corpus.shared_before, 4),
        "shared_64_after": round(corpus.shared_after, 4),
        "train_characters": len(corpus.train),
        "test_characters": len(corpus.test),
        "scored_characters": len(corpus.test) - 1,
        "vocabulary": len(corpus.characters),
        "unigram_bits": round(unigram, 3), "bigram_bits": round(bigram, 3),
        "kneser_ney_bits": {str(n): round(b, 3) for n, b in n_grams.items()},
        "kneser_ney_seconds": round(n_gram_seconds, 2),
        "stride": 8, "small_init_bits_stride_1": round(stride_1, 3),
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
