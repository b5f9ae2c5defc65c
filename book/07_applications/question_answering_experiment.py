"""The full run of the question-answering lesson, and what positions and flags are worth.

Trains `course.applications.question_answering.SpanReader` with the module's defaults
(800 steps of 32 questions), changing one thing at a time: rotary positions with the
question-word flags (the reader of the lesson), learned absolute positions, fixed
sinusoidal positions and no positions, each with the flags, and rotary positions
without the flags. The added position vectors start at the scale of the word
embeddings (unit variance); the learned table is also run from the 0.02 scale, and
for three times the steps. The position variants run with each of SEEDS (a seed draws
the vocabulary, the training passages, the held-out passages and the initial
weights), the last two variants with the first seed only. It writes
`question_answering_results.json` (settings, loss curves, held-out exact match overall
and per kind of question, training times, for every seed), which the lesson loads,
and checks that no held-out passage occurs in the training stream. Run from the
repository root:

    .venv/bin/python book/07_applications/question_answering_experiment.py

It trains on one CPU thread (forced CPU) and prints its running time: the committed
run took 15 minutes on a two-core machine busy with other work.
"""

from itertools import islice
from pathlib import Path

from course.applications import question_answering as qa
from course.applications.training import Experiment

SEEDS = (0, 1, 2)
STEPS = 800
BATCH = 32
# name: (positions, flags, initial scale of a learned table, steps, seeds)
VARIANTS = {
    "rotary, flags": ("rotary", True, None, STEPS, SEEDS),
    "learned, flags": ("learned", True, 1.0, STEPS, SEEDS),
    "sinusoidal, flags": ("sinusoidal", True, None, STEPS, SEEDS),
    "none, flags": ("none", True, None, STEPS, SEEDS),
    "learned at 0.02, flags": ("learned", True, 0.02, STEPS, SEEDS),
    "rotary, no flags": ("rotary", False, None, STEPS, SEEDS[:1]),
    "learned, flags, 3x steps": ("learned", True, 1.0, 3 * STEPS, SEEDS[:1]),
}
SETTINGS = {
    "batch": BATCH, "seeds": list(SEEDS),
    "seeds_of_the_last_two_variants": list(SEEDS[:1]), "threads": 1,
    "d_model": 64,
    "heads": 4, "layers": 2, "optimiser": "AdamW", "lr": 3e-3,
    "weight_decay": 0.01,
    "schedule": "linear warm-up over a tenth of the steps (at most 100), "
                "cosine decay to 10% at the last step",
    "position_scale": "word embeddings and a learned table N(0, 1) per entry "
                      "(squared norm about d_model); sinusoids times sqrt(2) "
                      "(squared norm d_model); 'at 0.02': N(0, 0.02^2)",
    "test_questions_per_seed": 2000,
}
RESULTS = Path(__file__).with_name("question_answering_results.json")


def passages_seen_in_training(world, test, seed, steps):
    """How many held-out passages the training stream also drew (it should be 0)."""
    seen = {tuple(example.passage)
            for data in islice(qa.training_stream(world, seed, BATCH), steps)
            for example in data.examples}
    return sum(tuple(example.passage) in seen for example in test.examples)


def jobs():
    """(variant, seed) in the order they run: every variant of the first seed,
    then the other seeds, the longest run last."""
    order = sorted(((name, seed) for name, variant in VARIANTS.items()
                    for seed in variant[4]),
                   key=lambda job: (VARIANTS[job[0]][3], job[1]))
    return order


def main():
    experiment = Experiment(RESULTS)
    runs, seen = {}, {}
    for name, seed in jobs():
        positions, flags, scale, steps, _ = VARIANTS[name]
        options = {} if scale is None else {"position_scale": scale}
        run = qa.train(steps=steps, batch=BATCH, seed=seed, threads=1,
                       positions=positions, flags=flags, **options)
        print(f"{name}, seed {seed}: exact match {run['accuracy']:.4f} "
              f"after {run['history'].seconds:.0f} s of training")
        if seed not in seen:
            # a seed's world and held-out passages are the same in every
            # variant: check them against its longest training stream
            longest = max(v[3] for v in VARIANTS.values() if seed in v[4])
            seen[seed] = passages_seen_in_training(run["world"], run["test"],
                                                   seed, longest)
        entry = runs.setdefault(name, {"steps": steps, "seeds": {}})
        entry["parameters"] = run["parameters"]
        entry["seeds"][str(seed)] = {
            "train_seconds": round(run["history"].seconds, 1),
            "exact_match": round(run["accuracy"], 4),
            "by_kind": {k: round(v, 4) for k, v in run["by_kind"].items()},
            "losses": [round(v, 4) for v in run["history"].losses]}
        # saved after every run: what has run so far stays if the rest stops
        experiment.save({
            "task": "3 people, 9 facts per passage; "
                    "where/when/what/who questions",
            "steps": STEPS, "batch": BATCH, "settings": SETTINGS,
            "test_questions": SETTINGS["test_questions_per_seed"],
            "test_passages_seen_in_training": sum(seen.values()),
            "runs": {name: runs[name] for name in VARIANTS if name in runs},
        }, indent=1)


if __name__ == "__main__":
    main()
