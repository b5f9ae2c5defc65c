"""`python -m autograder grade` end to end: full marks, zero, broken submissions, resume.

Each assignment is graded once, in one batch that mixes the reference solution, the
untouched student version and submissions that cannot be graded; the tests below read
that batch's output.
"""

import csv
import json
import shutil
import zipfile

import pytest

from autograder import paths
from conftest import by_student, run_autograder

ASSIGNMENTS = paths.assignments()


def make_batch(assignment, folder):
    """Submissions of every kind the grader accepts, honest and broken; student -> path."""
    (source,) = paths.assignment_notebooks(assignment)
    student_version = paths.student_version_folder(assignment) / source.name
    folder.mkdir()
    batch = {}
    batch["reference"] = folder / "reference.ipynb"
    batch["reference"].write_bytes(source.read_bytes())
    batch["untouched"] = folder / "untouched.ipynb"
    batch["untouched"].write_bytes(student_version.read_bytes())
    # nbgrader's layout, and a zip from a learning management system
    nested = folder / "nested" / assignment
    nested.mkdir(parents=True)
    (nested / source.name).write_bytes(source.read_bytes())
    batch["nested"] = folder / "nested"
    batch["zipped"] = folder / "zipped.zip"
    with zipfile.ZipFile(batch["zipped"], "w") as archive:
        archive.writestr(f"zipped/{source.name}", source.read_bytes())
    # things that cannot be graded
    batch["empty"] = folder / "empty.ipynb"
    batch["empty"].write_text("")
    batch["not_json"] = folder / "not_json.ipynb"
    batch["not_json"].write_text('{"cells": [')
    batch["old_format"] = folder / "old_format.ipynb"
    batch["old_format"].write_text(json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}))
    batch["escaping"] = folder / "escaping.zip"
    with zipfile.ZipFile(batch["escaping"], "w") as archive:
        archive.writestr("../../outside.ipynb", source.read_bytes())
    batch["no_notebook"] = folder / "no_notebook.zip"
    with zipfile.ZipFile(batch["no_notebook"], "w") as archive:
        archive.writestr("notes.txt", "nothing here")
    return batch


@pytest.fixture(scope="module", params=ASSIGNMENTS)
def graded(request, tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed: the grader refuses to run "
                    "student code without a sandbox")
    assignment = request.param
    folder = tmp_path_factory.mktemp(assignment)
    batch = make_batch(assignment, folder / "submissions")
    out = folder / "grading"
    code, lines, log = run_autograder("grade", assignment, *batch.values(), "--out", out, "--no-progress")
    return {"assignment": assignment, "code": code, "results": by_student(lines), "log": log,
            "out": out, "batch": batch, "folder": folder}


def test_exit_code_is_zero_whatever_the_scores(graded):
    assert graded["code"] == 0, graded["log"][-3000:]
    assert set(graded["results"]) == set(graded["batch"]), graded["log"][-3000:]


def test_every_line_has_the_documented_fields(graded):
    for result in graded["results"].values():
        for key in ("student", "score", "max_score", "status", "message"):
            assert key in result
        assert result["status"] in ("graded", "error")


@pytest.mark.parametrize("student", ["reference", "nested", "zipped"])
def test_reference_solution_scores_full_marks(graded, student):
    result = graded["results"][student]
    assert result["status"] == "graded", result["message"]
    assert result["max_score"] > 0
    assert result["score"] == result["max_score"], result["message"]


def test_untouched_student_version_scores_zero(graded):
    result = graded["results"]["untouched"]
    assert result["status"] == "graded", result["message"]
    assert result["score"] == 0
    assert all(score == 0 for score, _ in result["tests"].values())
    assert len(result["tests"]) >= 5, "points are split across several test cells"


@pytest.mark.parametrize("student, words", [
    ("empty", "empty"),
    ("not_json", "invalid JSON"),
    ("old_format", "nbformat"),
    ("escaping", "climbs out"),
    ("no_notebook", "no notebook"),
])
def test_broken_submission_fails_alone_with_a_message(graded, student, words):
    result = graded["results"][student]
    assert result["status"] == "error"
    assert result["score"] == 0
    assert words in result["message"], result["message"]
    assert not (graded["folder"] / "outside.ipynb").exists()
    assert not (graded["folder"].parent / "outside.ipynb").exists()


def test_grades_csv_and_feedback(graded):
    with open(graded["out"] / "grades.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert set(rows) == set(graded["batch"])
    assert float(rows["reference"]["score"]) == graded["results"]["reference"]["max_score"]
    assert rows["not_json"]["status"] == "error"
    for student in ("reference", "untouched", "nested", "zipped"):
        page = graded["out"] / "feedback" / f"{student}.html"
        assert page.is_file() and page.stat().st_size > 1000, f"no feedback page for {student}"
    assert not (graded["out"] / "feedback" / "not_json.html").exists()


def test_rerun_resumes_without_grading_again(graded):
    """A second run over the same submissions reuses every recorded result."""
    before = {p.name: p.stat().st_mtime_ns for p in (graded["out"] / "results").glob("*.json")}
    batch = graded["batch"]
    code, lines, log = run_autograder("grade", graded["assignment"], batch["reference"], batch["untouched"],
                                      "--out", graded["out"], "--no-progress")
    assert code == 0, log[-2000:]
    again = by_student(lines)
    for student in ("reference", "untouched"):
        assert again[student]["score"] == graded["results"][student]["score"]
        assert again[student]["seconds"] == graded["results"][student]["seconds"], "regraded instead of resumed"
    after = {p.name: p.stat().st_mtime_ns for p in (graded["out"] / "results").glob("*.json")}
    assert after == before


def test_unknown_assignment_is_refused(tmp_path):
    code, _, log = run_autograder("grade", "no_such_assignment", tmp_path / "x.ipynb", "--out", tmp_path)
    assert code == 2 and "unknown assignment" in log
