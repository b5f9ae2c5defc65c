"""The encoder-decoder bottleneck, measured (Chapter 1).

Trains two GRU encoder-decoders of the same size to reverse random digit strings, one
that sees the source only through the encoder's last state and one that attends to
every encoder state (course/seq2seq.py), for several string lengths, and writes their
accuracy under greedy decoding to bottleneck_results.json next to this file. The
lesson plots that file; it does not train these models itself, to stay fast.

Run it from the repository root (about three to six minutes on one CPU core):

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


def reversal_batches(length, seed):
    """A function that returns a fresh batch (source, reversed source) at each call."""
    generator = torch.Generator().manual_seed(seed)

    def make_batch(size=BATCH):
        source = torch.randint(0, VOCAB, (size, length), generator=generator)  # (B, S)
        return source, source.flip(1)  # the target is the source read backwards

    return make_batch


def evaluate(model, make_batch, length):
    """Token and whole-string accuracy of greedy decoding on TEST_SIZE new strings."""
    source, target = make_batch(TEST_SIZE)
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
            token_accuracy, string_accuracy = evaluate(model, make_batch, length)
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
                "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
                "torch": torch.__version__, "machine": platform.machine()}
    RESULTS.write_text(json.dumps({"settings": settings, "results": rows}, indent=1) + "\n")
    print(f"wrote {RESULTS.name}: {wall:.0f} s wall, {cpu:.0f} s CPU")


if __name__ == "__main__":
    main()
