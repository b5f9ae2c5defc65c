"""Shared helpers of the test suite: run the course's command-line tools as a user would."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.fixture(scope="session")
def repo():
    return REPO
