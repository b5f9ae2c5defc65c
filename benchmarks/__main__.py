"""`make bench`: run every benchmark that states targets and print one table.

    .venv/bin/python -m benchmarks [NAME ...]

Each module below has `targets() -> list[Target]` (see `benchmarks/targets.py`). With
names, only those modules run. Exits 1 when a target is missed. Run it on an idle
machine: the numbers are times.
"""

import importlib
import os
import sys

from benchmarks.targets import print_table

# Modules of this folder, in chapter order; a chapter adds its own as it lands.
BENCHMARKS = [
    "kv_cache",
    "applications",
    "efficient_attention",
]


def main(names):
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        sys.exit(f"unknown benchmark(s) {unknown}; known: {BENCHMARKS}")
    targets = []
    before = os.getloadavg()
    for name in names or BENCHMARKS:
        module = importlib.import_module(f"benchmarks.{name}")
        targets += module.targets()
    status = print_table(targets)
    # Times depend on what else the machine did: the load average travels with them.
    print(f"load average (1, 5, 15 min) before: {load(before)}; after: {load(os.getloadavg())} "
          f"on {os.cpu_count()} cores")
    return status


def load(averages):
    return ", ".join(f"{value:.2f}" for value in averages)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
