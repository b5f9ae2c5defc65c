"""The targets that `make bench` checks: one line per target, `met` or `missed`.

Each benchmark module listed in `benchmarks/__main__.py` has a function
`targets() -> list[Target]` that measures on this machine and returns one `Target` per
stated goal, and may add baselines (``met=None``: no goal of their own, printed beside
the targets they put in context). `print_table` prints them as one table and returns
the exit status: 1 when any target is missed.
"""

from dataclasses import dataclass


@dataclass
class Target:
    task: str          # what was measured, e.g. "KV cache, n = 512"
    parameters: int | None  # the model's parameter count, None where there is no model
    seconds: float     # the time the measurement took (training time for training)
    reached: str       # the quality or figure reached, e.g. "12.3x faster"
    goal: str          # the stated target, e.g. ">= 10x"
    met: bool | None   # None: a baseline shown beside a target, with no goal


def print_table(targets):
    """Print every target as a row of one table; return 1 if any was missed, else 0."""
    header = ("task", "parameters", "time", "reached", "target", "")
    rows = [header] + [
        (t.task, "-" if t.parameters is None else f"{t.parameters:,}",
         f"{t.seconds:.1f} s", t.reached, t.goal,
         "-" if t.met is None else "met" if t.met else "missed")
        for t in targets]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for number, row in enumerate(rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if number == 0:
            print("  ".join("-" * width for width in widths).rstrip())
    return 0 if all(t.met is not False for t in targets) else 1
