"""A function is graded on its own, gradients included.

A right `MultiHeadAttention` that calls the student's own `split_heads` and
`merge_heads`, both wrong, keeps every point of its tests, its gradient test too: while
the module is graded, those calls are answered by the reference functions, and the
backward pass through them by the references' vector-Jacobian products (computed in the
grader), so that gradients flow as through the student's own functions.
"""

import shutil

import nbformat
import pytest

from autograder.judging import catalogue
from autograder import paths
from conftest import Submissions, by_student, run_autograder, student_and_reference

ASSIGNMENT = "multi_head_attention"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox")


def answer(verdict, function, identifier=None):
    return next(a for a in catalogue.load(ASSIGNMENT) if a.verdict == verdict and a.function == function
                and (identifier is None or a.id == identifier))


def test_a_module_keeps_its_points_beside_wrong_helpers_it_calls(tmp_path):
    student, _, code = student_and_reference(ASSIGNMENT)
    module = answer("right", "MultiHeadAttention", "mha-calls-split-and-merge")
    split, merge = answer("wrong", "split_heads"), answer("wrong", "merge_heads")
    batch = Submissions(tmp_path / "submitted")
    batch.save("wrong_helpers", catalogue.fill(student, {**code, "MultiHeadAttention": module.code,
                                                         "split_heads": split.code, "merge_heads": merge.code}))
    status, lines, log = run_autograder("grade", ASSIGNMENT, *batch.values(), "--out", tmp_path / "grading",
                                        "--no-progress")
    assert status == 0, log[-3000:]
    result = by_student(lines)["wrong_helpers"]
    lost = sorted(test for test, (got, top) in result["tests"].items() if got < top)
    (source,) = paths.assignment_notebooks(ASSIGNMENT)
    own = catalogue.tests_of(nbformat.read(source, as_version=4))
    assert lost and set(lost) <= set(own["split_heads"]) | set(own["merge_heads"]), (lost, result["messages"])
