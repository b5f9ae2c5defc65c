"""Grading throughput: plain `nbgrader autograde` against `python -m autograder grade`.

    .venv/bin/python benchmarks/grading_throughput.py [--submissions 8] [--jobs 1,2] [--repeats 3]

Grades N identical honest submissions (copies of the reference solution) three ways on
this machine, one after the other, and prints submissions per minute; with --repeats R,
R rounds of all of them in turn (so that a change in the machine's load falls on every
side), the median of each and the median of the per-round ratios:

* nbgrader: one `nbgrader autograde ASSIGNMENT` over a course directory holding the N
  submissions (serial, no sandbox, no feedback pages);
* ours, for each --jobs value: `python -m autograder grade ... --jobs J` (sandboxed
  kernels, test cells run in the grader against the student's functions, feedback pages
  and the class gradebook written; each worker starts the next kernel while it grades).

Wall-clock times include each tool's start-up. Run it by hand on an idle machine; the
test suite does not run it.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder import paths  # noqa: E402
from autograder.judging.course_directory import KERNEL_ENV, CourseDirectory  # noqa: E402


def environment():
    bin_dir = os.path.dirname(sys.executable)
    return {**os.environ, **KERNEL_ENV, "COURSE_FORCE_CPU": "1",
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def plain_nbgrader(assignment, count, scratch):
    course = CourseDirectory(scratch / "nbgrader-course", cell_timeout=120)
    course.add_source(assignment, paths.SOLUTIONS)
    course.generate_assignment(assignment)
    for index in range(count):
        folder = course.root / "submitted" / f"s{index:03d}" / assignment
        folder.mkdir(parents=True)
        for notebook in paths.assignment_notebooks(assignment):
            shutil.copyfile(notebook, folder / notebook.name)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"], cwd=course.root,
                   env=environment(), check=True, capture_output=True)
    seconds = time.monotonic() - started
    graded = len(list((course.root / "autograded").glob(f"*/{assignment}")))
    assert graded == count, f"nbgrader graded {graded} of {count}"
    return seconds


def ours(assignment, count, jobs, scratch):
    submissions = scratch / f"ours-{jobs}" / "submissions"
    submissions.mkdir(parents=True)
    (notebook,) = paths.assignment_notebooks(assignment)
    for index in range(count):
        shutil.copyfile(notebook, submissions / f"s{index:03d}.ipynb")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", assignment, *sorted(map(str, submissions.iterdir())),
                           "--out", str(scratch / f"ours-{jobs}" / "out"), "--jobs", str(jobs), "--no-progress"],
                          cwd=REPO, env=environment(), capture_output=True, text=True, check=True)
    seconds = time.monotonic() - started
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    full = [r for r in results if r["status"] == "graded" and r["score"] == r["max_score"]]
    assert len(full) == count, done.stdout[-2000:] + done.stderr[-2000:]
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="self_attention")
    parser.add_argument("--submissions", type=int, default=8)
    parser.add_argument("--jobs", default=f"1,{os.cpu_count() or 1}", help="comma-separated --jobs values")
    parser.add_argument("--repeats", type=int, default=1, help="rounds of every side, in turn")
    args = parser.parse_args()
    count = args.submissions
    sides = [("nbgrader autograde (serial, no sandbox, no feedback)", None)]
    sides += [(f"autograder grade --jobs {jobs}", jobs) for jobs in sorted({int(j) for j in args.jobs.split(",")})]
    times = {name: [] for name, _ in sides}
    load_before = os.getloadavg()[0]
    for round_ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="throughput-") as scratch:
            scratch = Path(scratch)
            for name, jobs in sides:
                seconds = plain_nbgrader(args.assignment, count, scratch) if jobs is None \
                    else ours(args.assignment, count, jobs, scratch)
                times[name].append(seconds)
    baseline = times[sides[0][0]]
    print(f"{count} submissions of {args.assignment}, {os.cpu_count()} cores, {args.repeats} round(s); "
          f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"{'':56} {'seconds':>8} {'per minute':>11} {'vs nbgrader':>12}  rounds (s)")
    for name, _ in sides:
        seconds = statistics.median(times[name])
        ratio = statistics.median(b / s for b, s in zip(baseline, times[name]))
        rounds = " ".join(f"{s:.1f}" for s in times[name])
        print(f"{name:56} {seconds:8.1f} {count * 60 / seconds:11.2f} {ratio:11.2f}x  {rounds}")


if __name__ == "__main__":
    main()
