"""The training loop every application shares: seeds, a time budget, a progress bar.

The loop knows nothing about the task: it calls ``step(step_index) -> loss`` (one
optimiser step on one batch) until it has run ``steps`` times or ``budget_s`` seconds of
training have passed, whichever comes first, and records the loss of every step. Only
the time spent inside ``step`` counts as training time, so that evaluations between
steps do not eat the budget.
"""

import json
import os
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm


def seed_everything(seed):
    """Seed Python's, NumPy's and PyTorch's generators (CPU and every GPU)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass
class History:
    """What a run leaves behind: the loss of every step and the training time."""
    losses: list = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0


def fit(step, steps, budget_s=None, description="training", progress=True,
        device=None, threads=None):
    """Call ``step(i)`` for ``i = 0, 1, ...``; return a :class:`History`.

    Stops after ``steps`` steps or once ``budget_s`` seconds of training time have
    been spent. ``step`` returns the batch's loss as a float. On a GPU the clock waits
    for the device before it is read, so that the time is the time of the work.
    ``threads`` sets PyTorch's CPU threads for the run (and restores them after): on a
    machine whose cores are busy with other work, one thread is faster than two that
    wait for each other.
    """
    history = History()
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    synchronize = (device is not None and device.type == "cuda")
    bar = tqdm(total=steps, desc=description, disable=not progress,
               mininterval=0.5, leave=False)
    for i in range(steps):
        start = time.perf_counter()
        loss = step(i)
        if synchronize:
            torch.cuda.synchronize()
        history.seconds += time.perf_counter() - start
        history.losses.append(float(loss))
        history.steps = i + 1
        bar.update(1)
        if i % 20 == 0:
            bar.set_postfix(loss=f"{history.losses[-1]:.3f}")
        if budget_s is not None and history.seconds >= budget_s:
            break
    bar.close()
    torch.set_num_threads(previous_threads)
    return history


def descend(loss, optimiser, schedule):
    """One step of gradient descent on `loss`: backpropagate, move the weights and the
    learning rate on, then clear the gradients for the next step (they would otherwise
    add up across steps). The loops here train a model they have just built, which holds
    no gradients before its first step. Returns the loss as a number, for the curve."""
    loss.backward()
    optimiser.step()
    schedule.step()
    optimiser.zero_grad()
    return loss.item()


@contextmanager
def evaluating(model):
    """The block runs with `model` in evaluation mode (dropout off); the model goes
    back to the mode it was in afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def count_parameters(model):
    """The number of trainable numbers in a module."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def warmup_cosine(optimiser, warmup, total):
    """Linear warm-up over ``warmup`` steps, then a cosine decay to 10% at ``total``."""
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * progress))
    return torch.optim.lr_scheduler.LambdaLR(optimiser, factor)


class Experiment:
    """The bookkeeping of a committed full run, shared by the experiment scripts.

    Created at the start of the run: it forces the CPU (so that the committed numbers
    are CPU numbers on any machine) and notes the clock and the load average, since
    training times depend on how busy the machine is. ``save(record)`` adds the thread
    count, the load and the wall time to the record and writes it as JSON."""

    def __init__(self, results):
        os.environ["COURSE_FORCE_CPU"] = "1"
        self.results = Path(results)
        self.start = time.perf_counter()
        self.load = os.getloadavg()[0]

    def save(self, record, indent=None):
        record.update(threads=1, load_average_at_start=round(self.load, 1),
                      wall_seconds=round(time.perf_counter() - self.start, 1))
        self.results.write_text(json.dumps(record, indent=indent) + "\n")
        print(f"wrote {self.results.name} in {record['wall_seconds']:.0f} s")
        return record
