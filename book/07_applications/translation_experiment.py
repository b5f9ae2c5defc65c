"""The full run of the translation lesson: English number words to Spanish words.

Trains `course.applications.translation.Translator` at word level for STEPS steps,
then the same architecture at character level for the same training time, and
writes `translation_results.json` (loss curves, held-out exact match, examples and the
cross-attention of a few held-out numbers), which the lesson loads. Run from the
repository root:

    .venv/bin/python book/07_applications/translation_experiment.py

It trains on one CPU thread (forced CPU) and prints its running time: about a minute
and a half on a shared two-core machine.
"""

from pathlib import Path

import torch

from course.applications import translation
from course.applications.training import Experiment
from course.applications.attention_maps import decoder_cross_attention

STEPS = 400
SEED = 0
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
    """What the results keep of a run at either level."""
    return {
        "parameters": run["parameters"], "steps": run["history"].steps,
        "train_seconds": round(run["history"].seconds, 1),
        "exact_match": run["accuracy"],
        "losses": [round(v, 4) for v in run["history"].losses],
        "source_vocabulary": len(run["source_vocab"]),
        "target_vocabulary": len(run["target_vocab"]),
    }


def main():
    experiment = Experiment(RESULTS)
    word = translation.train(steps=STEPS, seed=SEED, threads=1)
    held_out = set(word["test"].numbers.tolist())
    assert held_out.issuperset(EXAMPLES), "the alignments need held-out numbers"
    print(f"word level: {word['accuracy']:.4f} exact match, "
          f"{word['history'].seconds:.0f} s of training")
    char = translation.train(steps=100_000, seed=SEED, threads=1, level="char",
                             budget_s=word["history"].seconds)
    print(f"character level: {char['accuracy']:.4f} exact match in "
          f"{char['history'].seconds:.0f} s ({char['history'].steps} steps)")
    wrong = [(int(n), " ".join(p)) for n, p, row in
             zip(word["test"].numbers, word["predictions"],
                 word["test"].target)
             if p != word["target_vocab"].decode(row[1:])]
    record = {
        "task": "English number words to Spanish words, 0 to 9999",
        "held_out_numbers": len(word["test"].numbers),
        "word": {**summary(word), "mistakes": wrong[:10],
                 "alignments": alignments(word, EXAMPLES)},
        "char": summary(char),
    }
    experiment.save(record, indent=1)


if __name__ == "__main__":
    main()
