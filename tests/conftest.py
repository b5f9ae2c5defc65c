"""Shared helpers of the test suite: run the course's command-line tools as a user would."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.judging import catalogue
from autograder import paths

REPO = Path(__file__).resolve().parent.parent


def run_autograder(*args, timeout=1800):
    """Run `python -m autograder ARGS`; return (exit code, parsed JSON lines, stderr)."""
    env = {**os.environ, "COURSE_FORCE_CPU": "1"}
    done = subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines, done.stdout + done.stderr


def by_student(lines):
    results = {line["student"]: line for line in lines}
    assert len(results) == len(lines), "one JSON line per student"
    return results


def student_and_reference(assignment):
    """The untouched student version of `assignment`, the same notebook with the reference
    answers filled in, and those answers (grade_id -> code)."""
    (source,) = paths.assignment_notebooks(assignment)
    student = nbformat.read(paths.student_version_folder(assignment) / source.name, as_version=4)
    reference_code = catalogue.reference_code(nbformat.read(source, as_version=4))
    return student, catalogue.fill(student, reference_code), reference_code


class Submissions(dict):
    """A batch to grade together, written into one folder: student name -> notebook file."""

    def __init__(self, folder):
        super().__init__()
        self.folder = Path(folder)
        self.folder.mkdir(parents=True)

    def save(self, name, notebook):
        self[name] = self.folder / f"{name}.ipynb"
        nbformat.write(notebook, self[name])
        return self[name]


class GradedBatches(dict):
    """Each assignment's batch, graded with `python -m autograder grade` the first time a
    test asks for it, so that `pytest -k ASSIGNMENT` grades that assignment's batch alone.
    `write(assignment, folder)` writes the batch's submissions into `folder` and returns
    their paths; the batch's results are indexed by student."""

    def __init__(self, folder_factory, prefix, write):
        super().__init__()
        self.folder_factory, self.prefix, self.write = folder_factory, prefix, write

    def __missing__(self, assignment):
        folder = self.folder_factory.mktemp(f"{self.prefix}-{assignment}")
        submissions = self.write(assignment, folder / "submitted")
        code, lines, log = run_autograder("grade", assignment, *submissions, "--out", folder / "grading",
                                          "--no-progress")
        assert code == 0, log[-3000:]
        self[assignment] = by_student(lines)
        return self[assignment]


def _closed_folders(paths):
    """The topmost folders on the way to `paths` that other users may not enter."""
    closed = []
    for path in paths:
        for folder in reversed(Path(path).parents):
            if not folder.stat().st_mode & 0o001:
                if not any(folder == c or c in folder.parents for c in closed):
                    closed.append(folder)
                break
    return closed


def opened_to_other_users(needed):
    """bubblewrap arguments that open the folders of `needed` to every user in a mount
    namespace of their own: each closed folder on the way becomes an empty one (0755)
    into which only the needed folders are bound. [] where nothing is closed."""
    needed = sorted({Path(os.path.realpath(p)) for p in needed})
    closed = _closed_folders(needed)
    if not closed:
        return []
    args = [shutil.which("bwrap"), "--dev-bind", "/", "/", "--die-with-parent"]
    for folder in closed:
        args += ["--perms", "0755", "--tmpfs", str(folder)]
        for path in (p for p in needed if folder in p.parents):
            between = [p for p in reversed(path.parents) if folder in p.parents]
            args += [a for p in between for a in ("--perms", "0755", "--dir", str(p))]  # else made 0700
            args += ["--bind", str(path), str(path)]
    return args + ["--"]


def processes_with(marker):
    """Pids of the running processes whose command line contains `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(pid)
        except OSError:  # it ended while we looked
            pass
    return found


@pytest.fixture(scope="session")
def repo():
    return REPO
