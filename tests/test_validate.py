"""`python -m autograder validate` tells a student which visible tests pass."""

import re

import nbformat
import pytest

from autograder.judging import catalogue
from autograder import paths
from conftest import run_autograder, student_and_reference

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


def test_the_summary_names_the_function_that_fails(tmp_path):
    """validate prints the feedback page's summary: each graded function with its visible
    points, and the function whose test fails named with the test's message."""
    student, reference, code = student_and_reference("self_attention")
    broken = catalogue.fill(student, {**code, "causal_mask": "def causal_mask(n):\n    return np.triu(np.ones((n, n), dtype=bool))\n"})
    path = tmp_path / "self_attention.ipynb"
    nbformat.write(broken, path)
    status, _, log = run_autograder("validate", path)
    assert status == 1, log[-3000:]
    summary = log[log.index("Summary"):log.index("PASS")]
    for name in ("softmax", "causal_mask", "scaled_dot_product_attention", "self_attention", "SelfAttention"):
        assert f" {name} " in summary, name
    assert re.search(r"FAIL causal_mask +0 / 2 points", summary), summary
    assert "test_causal_mask: AssertionError" in summary
    assert re.search(r"ok   softmax +2 / 2 points \(\+2 in hidden tests\)", summary), summary
    assert "1 visible test(s) fail (in causal_mask)" in log
