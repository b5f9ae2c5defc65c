"""The full run of the translation lesson: English number words to Spanish words.

Trains `course.applications.translation.Translator` at word level for STEPS steps,
then, on the same split:

* the same architecture at character level for the same training time, its
  learning-rate schedule fitted to the steps that time allows (warm-up over a
  tenth of them, cosine decay over all of them; a short probe measures the time
  of a step first);
* the same at character level for CHAR_LONG_STEPS steps, as many as the word
  model makes, with exact match on the first CHECKPOINT_NUMBERS held-out numbers
  every CHECKPOINT_EVERY steps;
* chapter 1's GRU encoder-decoder (`course.seq2seq`) with word tokens, for the
  word model's training time, once reading the source through the encoder's last
  state only and once with attention over all of its states.

It writes `translation_results.json` (settings, loss curves, held-out exact match,
the word model's mistakes and the cross-attention of a few held-out numbers), which
the lesson loads. Run from the repository root:

    .venv/bin/python book/07_applications/translation_experiment.py [budget|long]

`budget` runs the word model, the same-time character model and the GRU models,
`long` the long character run, each keeping what the other wrote; no argument runs
both. It trains on one CPU thread (forced CPU) and prints its running times: the
committed parts took 14 and 16 minutes on a two-core machine busy with other work
(load average about 12), much less on an idle one.
"""

import json
import os
import sys
import time
from pathlib import Path

import torch

from course.applications import translation
from course.applications.training import Experiment
from course.applications.attention_maps import decoder_cross_attention

STEPS = 400
CHAR_LONG_STEPS = 400
CHECKPOINT_EVERY, CHECKPOINT_NUMBERS = 100, 200
SEED = 0
SETTINGS = {
    "batch": 128, "threads": 1, "seed": SEED,
    "transformer": {"d_model": 128, "heads": 4, "encoder_layers": 2,
                    "decoder_layers": 2, "d_ff": 256, "dropout": 0.0,
                    "optimiser": "AdamW", "lr": 2e-3, "weight_decay": 0.01},
    "gru": {"embed": 128, "hidden": 256, "optimiser": "AdamW", "lr": 3e-3,
            "weight_decay": 0.01, "clip_grad_norm": 1.0,
            "source": "padding in front, so the last state follows <eos>"},
    "schedule": "linear warm-up over a tenth of the steps (at most 200), "
                "cosine decay to 10% at the last step",
    "same_budget": "the steps that fit the word model's training time, "
                   "measured by a 12-step probe of each model",
}
# held-out numbers (main checks): 1221 and 2028 end in a Spanish word that
# stands for two English ones (veintiuno, veintiocho)
EXAMPLES = (1221, 1235, 2028, 5018, 784)
RESULTS = Path(__file__).with_name("translation_results.json")


def alignments(result, numbers):
    """For each number: its words, its translation and the last layer's heads."""
    model, device = result["model"], result["device"]
    source_vocab, target_vocab = result["source_vocab"], result["target_vocab"]
    model.eval()
    records = {}
    for number in numbers:
        english = translation.english_words(number)
        source = torch.tensor([source_vocab.encode(english, len(english) + 1)],
                              device=device)
        longest = model.target_position.num_embeddings
        words = target_vocab.decode(model.translate(source, longest)[0])
        target_in = torch.tensor([[1] + [target_vocab.ids[w] for w in words]],
                                 device=device)
        memory = model.encode(source)
        maps = decoder_cross_attention(
            model.decoder, model.embed_target(target_in), memory,
            tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(
                target_in.shape[1], device=device))
        records[str(number)] = {
            "english": english + ["<eos>"],
            "spanish": words,
            "expected": translation.spanish_words(number),
            # rows: the decoder's input at each step (<bos>, words so far);
            # each row predicts the next Spanish word
            "cross_attention": [[[round(v, 4) for v in row] for row in head]
                                for head in maps[-1][0].cpu().tolist()],
        }
    return records


def summary(run):
    """What the results keep of a run of any of the models."""
    kept = {
        "parameters": run["parameters"], "steps": run["history"].steps,
        "warmup_steps": run["warmup"],
        "train_seconds": round(run["history"].seconds, 1),
        "exact_match": run["accuracy"],
        "losses": [round(v, 4) for v in run["history"].losses],
    }
    if "source_vocab" in run:
        kept.update(source_vocabulary=len(run["source_vocab"]),
                    target_vocabulary=len(run["target_vocab"]))
    return kept


def fitted(probe_seconds, budget_s):
    """The steps that fit `budget_s` at `probe_seconds` a step."""
    return max(10, round(budget_s / probe_seconds))


def same_budget(record):
    """The word model, and the others given its training time."""
    word = translation.train(steps=STEPS, seed=SEED, threads=1)
    held_out = set(word["test"].numbers.tolist())
    assert held_out.issuperset(EXAMPLES), "the alignments need held-out numbers"
    budget = word["history"].seconds
    print(f"word level: {word['accuracy']:.4f} exact match, "
          f"{budget:.0f} s of training")
    wrong = [(int(n), " ".join(p)) for n, p, row in
             zip(word["test"].numbers, word["predictions"],
                 word["test"].target)
             if p != word["target_vocab"].decode(row[1:])]
    record.update(held_out_numbers=len(word["test"].numbers),
                  word={**summary(word), "mistakes": wrong[:10],
                        "alignments": alignments(word, EXAMPLES)})
    per_step = translation.seconds_per_step(level="char", seed=SEED)
    char = translation.train(steps=fitted(per_step, budget), seed=SEED,
                             threads=1, level="char")
    print(f"character level: {char['accuracy']:.4f} exact match in "
          f"{char['history'].seconds:.0f} s ({char['history'].steps} steps)")
    record["char"] = {**summary(char), "probe_seconds_per_step":
                      round(per_step, 4)}
    record["recurrent"] = {}
    for name, attention in (("last state only", False), ("attention", True)):
        probe = translation.train_recurrent(attention, steps=12, seed=SEED,
                                            progress=False, threads=1)
        per_step = probe["history"].seconds / probe["history"].steps
        run = translation.train_recurrent(
            attention, steps=fitted(per_step, budget), seed=SEED, threads=1)
        print(f"GRU, {name}: {run['accuracy']:.4f} exact match in "
              f"{run['history'].seconds:.0f} s ({run['history'].steps} steps)")
        record["recurrent"][name] = {**summary(run), "probe_seconds_per_step":
                                     round(per_step, 4)}


def long_character_run(record):
    """The character model for CHAR_LONG_STEPS steps, with checkpoints."""
    char = translation.train(
        steps=CHAR_LONG_STEPS, seed=SEED, threads=1, level="char",
        checkpoints=(CHECKPOINT_EVERY, CHECKPOINT_NUMBERS))
    print(f"character level, long: {char['accuracy']:.4f} exact match in "
          f"{char['history'].seconds:.0f} s ({char['history'].steps} steps)")
    record["char_long"] = {
        **summary(char), "checkpoint_numbers": CHECKPOINT_NUMBERS,
        # (step, exact match on the first CHECKPOINT_NUMBERS held-out numbers)
        "checkpoints": char["checkpoints"]}


def main(part="all"):
    experiment = Experiment(RESULTS)
    record = (json.loads(RESULTS.read_text()) if part != "all"
              and RESULTS.exists() else {})
    record.update(task="English number words to Spanish words, 0 to 9999",
                  settings=SETTINGS)
    for name, run in (("budget", same_budget), ("long", long_character_run)):
        if part in ("all", name):
            start, load = time.perf_counter(), os.getloadavg()[0]
            run(record)
            record.setdefault("parts", {})[name] = {
                "load_average_at_start": round(load, 1),
                "wall_seconds": round(time.perf_counter() - start, 1)}
    experiment.save(record, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
