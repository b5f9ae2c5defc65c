"""The class gradebook, resuming after an interruption, and parallel grading.

* OUT/gradebook.db is a real nbgrader gradebook holding every graded student's scores,
  equal to the JSON lines;
* a batch killed in the middle (SIGKILL, no chance to clean up) and run again grades
  nothing twice, loses nothing and leaves no half-written grade;
* grading with two jobs gives the scores of grading with one;
* with --db, the gradebook is PostgreSQL (a throw-away server on loopback, started here
  when Debian's postgresql is installed).
"""

import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from autograder.judging import catalogue
from autograder import paths
from conftest import REPO, by_student, run_autograder

ASSIGNMENT = "self_attention"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox")


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gradebook-submissions")
    (source,) = paths.assignment_notebooks(ASSIGNMENT)
    student = paths.student_version_folder(ASSIGNMENT) / source.name
    shutil.copyfile(source, folder / "ada.ipynb")
    shutil.copyfile(student, folder / "bob.ipynb")
    wrong = [a for a in catalogue.load(ASSIGNMENT) if a.verdict == "wrong"][:2]
    for name, path in zip(("cy", "dee"), catalogue.write_submissions(ASSIGNMENT, wrong, folder / "wrong")):
        shutil.move(path, folder / f"{name}.ipynb")
    return [folder / f"{name}.ipynb" for name in ("ada", "bob", "cy", "dee")]


def gradebook_scores(url):
    with Gradebook(url, course_id="attention-course") as gradebook:
        return {s.student.id: (float(s.score), {g.name: float(g.score) for n in s.notebooks for g in n.grades})
                for s in gradebook.assignment_submissions(ASSIGNMENT)}


def scores_by_test(result):
    return {name: score for name, (score, _) in result["tests"].items()}


@pytest.fixture(scope="module")
def interrupted(submissions, tmp_path_factory):
    """Grade one job at a time; kill the grader (SIGKILL) just after the first result is out."""
    out = tmp_path_factory.mktemp("interrupted")
    env = {**os.environ, "COURSE_FORCE_CPU": "1"}
    process = subprocess.Popen([sys.executable, "-m", "autograder", "grade", ASSIGNMENT, *map(str, submissions),
                                "--out", str(out), "--jobs", "1", "--no-progress"], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    first = ""
    while not first.startswith("{"):
        first = process.stdout.readline()
        assert first or process.poll() is None, "the grader stopped before grading anything"
    # Into the next submission, which takes a second or less (an unanswered notebook
    # fails fast): kill the grader while it is being graded.
    time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    before = {p.name: p.read_text() for p in (out / "results").glob("*.json")}
    recorded = gradebook_scores(f"sqlite:///{out / 'gradebook.db'}")
    code, lines, log = run_autograder("grade", ASSIGNMENT, *submissions, "--out", out, "--jobs", "1", "--no-progress")
    assert code == 0, log[-3000:]
    return {"out": out, "first": json.loads(first), "before": before, "recorded": recorded,
            "results": by_student(lines)}


def test_a_killed_batch_leaves_only_whole_grades(interrupted):
    first = interrupted["first"]["student"]
    assert set(interrupted["before"]) == {f"{first}.json"}, interrupted["before"].keys()
    assert set(interrupted["recorded"]) == {first}, "the gradebook holds a grade the results do not"


def test_running_again_grades_only_what_is_missing(interrupted):
    first = interrupted["first"]
    again = interrupted["results"][first["student"]]
    assert again["seconds"] == first["seconds"] and again["score"] == first["score"], "graded twice"
    assert set(interrupted["results"]) == {"ada", "bob", "cy", "dee"}
    assert interrupted["results"]["ada"]["score"] == interrupted["results"]["ada"]["max_score"]
    out = interrupted["out"]
    leftovers = [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    assert not leftovers, leftovers


def test_gradebook_holds_every_graded_students_scores(interrupted):
    out = interrupted["out"]
    scores = gradebook_scores(f"sqlite:///{out / 'gradebook.db'}")
    assert set(scores) == set(interrupted["results"])
    for student, result in interrupted["results"].items():
        total, tests = scores[student]
        assert total == result["score"]
        assert tests == scores_by_test(result)
    files = {p.stem: json.loads(p.read_text())["score"] for p in (out / "results").glob("*.json")}
    assert files == {s: r["score"] for s, r in interrupted["results"].items()}


def test_two_jobs_give_the_scores_of_one(submissions, interrupted, tmp_path):
    code, lines, log = run_autograder("grade", ASSIGNMENT, *submissions, "--out", tmp_path, "--jobs", "2",
                                      "--no-progress")
    assert code == 0, log[-3000:]
    parallel = by_student(lines)
    serial = interrupted["results"]
    assert {s: scores_by_test(r) for s, r in parallel.items()} == {s: scores_by_test(r) for s, r in serial.items()}
    assert parallel["cy"]["score"] < parallel["cy"]["max_score"]


# -- PostgreSQL ---------------------------------------------------------------------------

def _postgres_binaries():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="module")
def postgres():
    binaries = _postgres_binaries()
    if binaries is None:
        pytest.skip("no PostgreSQL server (Debian package postgresql): the PostgreSQL gradebook is not tested")
    owner = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and no `postgres` user to run a PostgreSQL server as")

    def preexec():  # the server runs as `postgres` when the tests run as root
        if owner is not None:
            os.setgid(owner.pw_gid)
            os.setuid(owner.pw_uid)

    folder = Path(tempfile.mkdtemp(prefix="gradebook-pg-"))
    if owner is not None:
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def run(*args):
        subprocess.run([str(binaries / args[0]), *args[1:]], check=True, preexec_fn=preexec, cwd=folder,
                       capture_output=True, timeout=120)

    try:
        run("initdb", "-D", str(folder / "data"), "--auth=trust", "-U", "grader", "--no-sync")
        run("pg_ctl", "-D", str(folder / "data"), "-w", "-l", str(folder / "log"), "-o",
            f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off", "start")
        run("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "grader", "gradebook")
        yield f"postgresql://grader@127.0.0.1:{port}/gradebook"
    finally:
        subprocess.run([str(binaries / "pg_ctl"), "-D", str(folder / "data"), "-m", "immediate", "stop"],
                       preexec_fn=preexec, capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


def test_postgresql_gradebook_and_resume(postgres, submissions, tmp_path):
    chosen = submissions[:2]
    code, lines, log = run_autograder("grade", ASSIGNMENT, *chosen, "--out", tmp_path, "--db", postgres,
                                      "--no-progress")
    assert code == 0, log[-3000:]
    first = by_student(lines)
    scores = gradebook_scores(postgres)
    assert {s: total for s, (total, _) in scores.items()} == {s: r["score"] for s, r in first.items()}
    assert not (tmp_path / "gradebook.db").exists(), "the SQLite default was used instead of --db"
    code, lines, log = run_autograder("grade", ASSIGNMENT, *chosen, "--out", tmp_path, "--db", postgres,
                                      "--no-progress")
    assert code == 0, log[-3000:]
    again = by_student(lines)
    assert {s: r["seconds"] for s, r in again.items()} == {s: r["seconds"] for s, r in first.items()}, "graded twice"
