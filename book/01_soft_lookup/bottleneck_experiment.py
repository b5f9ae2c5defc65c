"""The encoder-decoder bottleneck, measured (Chapter 1).

Trains two GRU encoder-decoders of the same size to reverse random digit strings, one
that sees the source only through the encoder's last state and one that attends to
every encoder state (course/seq2seq.py), for several string lengths, and writes their
accuracy under greedy decoding to bottleneck_results.json next to this file. The
lesson plots that file; it does not train these models itself, to stay fast.

The test strings are held out for real: a string belongs to the test class when its
weighted digit sum (weights 1, 3, 7, 9, 1, 3, ...) is a multiple of 10, which holds
for exactly one string in ten, and training never draws a string of that class. At
length 4 the test set is the whole class (all 1000 such strings); at the other lengths
it is 1000 strings drawn from it.

Run it from the repository root (about two minutes of CPU time on one core, four to
five minutes of wall time on a busy two-core machine):

    .venv/bin/python book/01_soft_lookup/bottleneck_experiment.py
"""

import json
import platform
import time
from pathlib import Path

import torch

from course.seq2seq import Seq2Seq, train

LENGTHS = [4, 8, 12, 16, 24, 32]
VOCAB = 10  # digits 0..9; id 10 is the decoder's start token
HIDDEN = 64
STEPS = 1000
BATCH = 64
TEST_SIZE = 1000
SEED = 0
RESULTS = Path(__file__).with_name("bottleneck_results.json")


def held_out(strings):
    """True for the strings of the test class: weighted digit sum divisible by 10."""
    length = strings.shape[-1]
    weights = torch.tensor([1, 3, 7, 9]).repeat(length)[:length]  # (S,)
    # Weight 1 is coprime to 10, so the sum mod 10 is uniform: one string in ten.
    return (strings * weights).sum(dim=-1) % VOCAB == 0  # (B,)


def draw_strings(size, length, generator, test):
    """`size` random strings of the test class (test=True) or of the training class."""
    kept = []
    while sum(len(part) for part in kept) < size:
        strings = torch.randint(0, VOCAB, (4 * size, length), generator=generator)
        kept.append(strings[held_out(strings) == test])  # (<= 4 size, S)
    return torch.cat(kept)[:size]  # (size, S)


def reversal_batches(length, seed):
    """A function that returns a fresh training batch (source, reversed source)."""
    generator = torch.Generator().manual_seed(seed)

    def make_batch(size=BATCH):
        source = draw_strings(size, length, generator, test=False)  # (B, S)
        return source, source.flip(1)  # the target is the source read backwards

    return make_batch


def evaluation_strings(length, seed):
    """TEST_SIZE strings of the held-out class: all of them at length 4."""
    if VOCAB ** (length - 1) == TEST_SIZE:  # the class holds exactly TEST_SIZE strings
        every = torch.cartesian_prod(*[torch.arange(VOCAB)] * length)  # (10^S, S)
        return every[held_out(every)]
    generator = torch.Generator().manual_seed(seed + 1)
    return draw_strings(TEST_SIZE, length, generator, test=True)


def evaluate(model, length):
    """Token and whole-string accuracy of greedy decoding on the held-out strings."""
    source = evaluation_strings(length, SEED)
    assert len(source) == TEST_SIZE and held_out(source).all()
    target = source.flip(1)
    predicted, _ = model.generate(source, length)
    correct = predicted == target  # (TEST_SIZE, length)
    return correct.float().mean().item(), correct.all(dim=1).float().mean().item()


def main():
    torch.set_num_threads(1)  # the machine is shared; one core is enough for these sizes
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    rows = []
    for length in LENGTHS:
        for attention in (False, True):
            torch.manual_seed(SEED)
            model = Seq2Seq(VOCAB, VOCAB + 1, begin=VOCAB, hidden_size=HIDDEN, attention=attention)
            make_batch = reversal_batches(length, SEED)
            losses = train(model, make_batch, STEPS)
            token_accuracy, string_accuracy = evaluate(model, length)
            rows.append({"length": length, "attention": attention,
                         "token_accuracy": round(token_accuracy, 4),
                         "string_accuracy": round(string_accuracy, 4),
                         "final_loss": round(sum(losses[-50:]) / 50, 4)})
            print(f"length {length:2d}  attention {attention!s:5}  token accuracy {token_accuracy:.3f}  "
                  f"string accuracy {string_accuracy:.3f}  ({time.perf_counter() - start_wall:.0f} s)",
                  flush=True)
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    settings = {"vocabulary": VOCAB, "hidden_size": HIDDEN, "embed_size": 16, "steps": STEPS,
                "batch_size": BATCH, "test_size": TEST_SIZE, "seed": SEED,
                "test_strings": "held out: weighted digit sum (weights 1, 3, 7, 9, ...) "
                                "divisible by 10; never drawn in training",
                "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
                "torch": torch.__version__, "machine": platform.machine()}
    RESULTS.write_text(json.dumps({"settings": settings, "results": rows}, indent=1) + "\n")
    print(f"wrote {RESULTS.name}: {wall:.0f} s wall, {cpu:.0f} s CPU")


if __name__ == "__main__":
    main()
