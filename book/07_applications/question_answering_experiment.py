"""The full run of the question-answering lesson, and what positions and flags are worth.

Trains `course.applications.question_answering.SpanReader` four times with the module's
defaults (800 steps of 32 questions), changing one thing at a time: rotary positions
with the question-word flags (the reader of the lesson), rotary positions without the
flags, learned absolute positions with the flags, and no positions with the flags. It
writes `question_answering_results.json` (loss curves, held-out exact match overall and
per kind of question, training times), which the lesson loads, and checks that no
held-out passage occurs in the training stream. Run from the repository root:

    .venv/bin/python book/07_applications/question_answering_experiment.py

It trains on one CPU thread (forced CPU) and prints its running time: about two
minutes on a shared two-core machine.
"""

from itertools import islice
from pathlib import Path

from course.applications import question_answering as qa
from course.applications.training import Experiment

SEED = 0
STEPS = 800
BATCH = 32
VARIANTS = {  # name: (positions, flags)
    "rotary, flags": ("rotary", True),
    "rotary, no flags": ("rotary", False),
    "learned, flags": ("learned", True),
    "none, flags": ("none", True),
}
RESULTS = Path(__file__).with_name("question_answering_results.json")


def passages_seen_in_training(world, test):
    """How many held-out passages the training stream also drew (it should be 0)."""
    seen = {tuple(example.passage)
            for data in islice(qa.training_stream(world, SEED, BATCH), STEPS)
            for example in data.examples}
    return sum(tuple(example.passage) in seen for example in test.examples)


def main():
    experiment = Experiment(RESULTS)
    runs = {}
    for name, (positions, flags) in VARIANTS.items():
        run = qa.train(steps=STEPS, batch=BATCH, seed=SEED, threads=1,
                       positions=positions, flags=flags)
        print(f"{name}: exact match {run['accuracy']:.4f} after "
              f"{run['history'].seconds:.0f} s of training")
        runs[name] = run
    reader = runs["rotary, flags"]
    record = {
        "task": "3 people, 9 facts per passage; where/when/what/who questions",
        "steps": STEPS, "batch": BATCH,
        "test_questions": len(reader["test"].examples),
        "test_passages_seen_in_training": passages_seen_in_training(
            reader["world"], reader["test"]),
        "runs": {name: {
            "parameters": run["parameters"],
            "train_seconds": round(run["history"].seconds, 1),
            "exact_match": round(run["accuracy"], 4),
            "by_kind": {k: round(v, 4) for k, v in run["by_kind"].items()},
            "losses": [round(v, 4) for v in run["history"].losses]}
            for name, run in runs.items()},
    }
    experiment.save(record, indent=1)


if __name__ == "__main__":
    main()
