"""The full run of the language-model lesson's subword section: BPE tokens.

Trains byte-pair-encoding tokenizers of VOCABULARIES tokens on the training text of
`course.applications.language_model.Corpus`, and for each the lesson's causal
Transformer on its tokens, for at most BUDGET_S seconds of training, next to the
same model on characters in the same session (so that both see the same load on a
shared machine). Every model is scored on the same held-out characters, in bits per
character: its summed bits over the held-out tokens divided by the characters they
cover. Writes `subword_results.json`, which the lesson loads. Run from the
repository root:

    .venv/bin/python book/07_applications/subword_experiment.py

It trains on one CPU thread (forced CPU) and prints its running time: about ten
minutes on a shared two-core machine.
"""

import math
import time
from pathlib import Path

from course.applications import language_model
from course.applications.training import Experiment

# The character run's settings and its sampling, shared so that the two compare
from language_model_experiment import BUDGET_S, SEED, sample  # this folder: run as a script

VOCABULARIES = (256, 512, 1024)
RESULTS = Path(__file__).with_name("subword_results.json")


def summary(run, corpus):
    nats, count = language_model.scored_nats(run["model"], corpus.test,
                                             run["device"], stride=8)
    bits_per_token = nats / math.log(2) / count
    return {
        "parameters": run["parameters"], "steps": run["history"].steps,
        "train_seconds": round(run["history"].seconds, 1),
        "bits": round(run["bits"], 3),
        "bits_per_token": round(bits_per_token, 3),
        "perplexity_per_token": round(2 ** bits_per_token, 2),
        "perplexity_per_character": round(2 ** run["bits"], 3),
        "scored_tokens": count,
        "scored_characters": corpus.scored_characters,
        "train_characters_per_token": round(
            len(corpus.characters.train_text) / len(corpus.train), 3),
        "characters_seen": round(run["history"].steps * 32 * 64
                                 * len(corpus.characters.train_text)
                                 / len(corpus.train)),
        "losses": [round(v, 4) for v in run["history"].losses],
        "sample": sample(run, n_new=100),
    }


def main():
    experiment = Experiment(RESULTS)
    characters = language_model.Corpus()
    n_grams = language_model.kneser_ney_bits(characters)
    runs = {}
    run = language_model.train(seed=SEED, threads=1, corpus=characters,
                               budget_s=BUDGET_S)
    # characters are tokens of one character each
    record = summary(run, _AsSubword(characters))
    record["characters_per_token"] = 1.0
    runs["characters"] = record
    print(f"characters: {run['bits']:.3f} bits per character")
    tokenizers = {}
    for vocabulary in VOCABULARIES:
        start = time.perf_counter()
        corpus = language_model.SubwordCorpus(characters, vocabulary)
        seconds = time.perf_counter() - start
        run = language_model.train(seed=SEED, threads=1, corpus=corpus,
                                   budget_s=BUDGET_S)
        record = summary(run, corpus)
        record["characters_per_token"] = round(
            len(characters.test_text) / len(corpus.test), 3)
        record["tokenizer_seconds"] = round(seconds, 2)
        runs[f"bpe_{vocabulary}"] = record
        tokenizers[vocabulary] = corpus
        print(f"BPE {vocabulary}: {run['bits']:.3f} bits per character, "
              f"{record['characters_per_token']} characters per token")
    largest = tokenizers[max(VOCABULARIES)]
    example = characters.test_text[:160]
    experiment.save({
        "text": "docstrings of Python's standard library, split as in "
                "language_model_results.json",
        "budget_seconds": BUDGET_S, "context_tokens": 64,
        "kneser_ney_bits": {str(n): round(b, 3) for n, b in n_grams.items()},
        "runs": runs,
        "first_merges": largest.pieces[len(characters.characters):][:40],
        "example_text": example,
        "example_tokens": {str(v): [c.pieces[i] for i in c.encode(example)]
                           for v, c in tokenizers.items()},
    }, indent=1)


class _AsSubword:
    """The character corpus seen through the attributes `summary` reads."""

    def __init__(self, corpus):
        self.characters, self.train, self.test = corpus, corpus.train, corpus.test
        self.scored_characters = corpus.scored_characters


if __name__ == "__main__":
    main()
