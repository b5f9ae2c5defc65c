"""What the grader does after the tests ran never changes a grade.

The scores are in the submission's gradebook once nbgrader's autograde is done. A fault
in what follows (the feedback page, the examples of unknown mistakes for the class
report) is noted in the result's flags, and the grade is recorded as it stands. The
right answers of chapter 1 are graded once, in this process (autograder/worker.py's
`grade`, as a grading worker runs it), with both steps made to fail.
"""

import shutil

import pytest

from autograder import paths, worker
from autograder.grade import Grader
from autograder.records.submissions import collect

ASSIGNMENT = "soft_lookup"

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox"),
              pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]  # nbgrader's own session use


def test_a_fault_after_the_tests_is_noted_and_the_grade_stands(tmp_path, monkeypatch):
    from nbgrader.apps import NbGraderAPI

    def feedback_fails(self, *args, **kwargs):
        return {"success": False, "log": "a page that could not be written", "error": ""}

    def examples_fail(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(NbGraderAPI, "generate_feedback", feedback_fails)
    monkeypatch.setattr(worker, "_diagnoses", examples_fail)
    (source,) = paths.assignment_notebooks(ASSIGNMENT)
    folder = tmp_path / "submissions"
    folder.mkdir()
    shutil.copyfile(source, folder / "ada.ipynb")
    out = tmp_path / "grading"
    out.mkdir()
    grader = Grader(ASSIGNMENT, out)
    try:
        grader.settle_lateness()
        (submission,) = collect([folder], ASSIGNMENT, grader.expected)
        answer = worker.grade(grader.task(submission, 0))
        result = grader.finish(submission, answer, 1.0)
        recorded = grader.gradebook.recorded_score("ada")
    finally:
        grader.close()
    assert result.status == "graded" and result.score == result.max_score > 0, result.message
    assert any(worker.FEEDBACK_FAILED.split("(")[0] in flag and "could not be written" in flag
               for flag in result.flags), result.flags
    assert any("RecursionError" in flag and "the grade stands" in flag for flag in result.flags), result.flags
    assert not (out / "feedback").exists() or not list((out / "feedback").iterdir())
    assert recorded == result.score, "the class gradebook holds the grade"
