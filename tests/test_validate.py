"""`python -m autograder validate` tells a student which visible tests pass."""

import pytest

from autograder import paths
from conftest import run_autograder

ASSIGNMENTS = paths.assignments()


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_solution_passes_every_visible_test(assignment):
    (source,) = paths.assignment_notebooks(assignment)
    code, _, log = run_autograder("validate", source)
    assert code == 0, log[-3000:]
    assert "FAIL" not in log and "Every visible test passes." in log


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_untouched_student_version_is_told_what_fails(assignment):
    (source,) = paths.assignment_notebooks(assignment)
    student = paths.student_version_folder(assignment) / source.name
    code, _, log = run_autograder("validate", student)
    assert code == 1
    assert "FAIL" in log and "NotImplementedError" in log
    assert "HIDDEN" in log, "cells whose tests are all hidden are listed as such"
