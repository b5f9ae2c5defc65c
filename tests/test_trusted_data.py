"""Tests judge from what only they hold: attacks on each chapter's tests gain nothing.

For every assignment, tests/attacks/ASSIGNMENT.py holds wrong answers of the right
shapes for every graded name (GARBAGE, the baseline) and three attacks on the tests
themselves, each graded beside that baseline in one batch:

* IN_PLACE: the same garbage, which also changes every array and tensor it is handed in
  place (arguments, upstream gradients, weights loaded into a module). Only copies cross
  into the kernel, so the test's own data stays as the test made it.
* MODULES (and MODULE_VARIANTS): modules whose parameters start at zero, or at constant
  values, and compute nothing. Tests load weights they made themselves and compute their
  references from their own copy, never from the student's parameters.
* HELPERS: a student cell, right after the test helpers, that redefines every helper in
  the kernel to say what would help. Helpers run from the instructor's source, and what
  they return is compared with what the test computed itself.

Each attack must score no more than the garbage on every test; the reference solution,
in the same batch, keeps full marks.
"""

import importlib
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.judging import catalogue
from autograder import paths
from conftest import GradedBatches, Submissions, student_and_reference

ATTACKS = Path(__file__).parent / "attacks"
ASSIGNMENTS = [a for a in paths.assignments() if (ATTACKS / f"{a}.py").exists()]

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox")


def load_attacks(assignment):
    return importlib.import_module(f"attacks.{assignment}")


def with_cell_after(notebook, grade_id, source):
    """A copy of `notebook` with a code cell of the student's right after the cell `grade_id`."""
    notebook = nbformat.reads(nbformat.writes(notebook), as_version=4)
    at = next(i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    notebook.cells.insert(at + 1, nbformat.v4.new_code_cell(source.strip()))
    return notebook


def attack_notebooks(assignment):
    """name -> notebook: the reference, the garbage, and each attack on top of the garbage."""
    attacks = load_attacks(assignment)
    student, reference, _ = student_and_reference(assignment)
    garbage_code = {name: code.strip() for name, code in attacks.GARBAGE.items()}
    garbage = catalogue.fill(student, garbage_code)
    notebooks = {"reference": reference, "garbage": garbage,
                 "in_place": catalogue.fill(student, {**garbage_code, **{k: v.strip() for k, v in
                                                                         attacks.IN_PLACE.items()}})}
    for name, code in getattr(attacks, "MODULES", {}).items():
        notebooks[f"module_{name}"] = catalogue.fill(student, {**garbage_code, name: code.strip()})
    for name, variants in getattr(attacks, "MODULE_VARIANTS", {}).items():
        for number, code in enumerate(variants, 1):
            notebooks[f"module_{name}_{number}"] = catalogue.fill(student, {**garbage_code, name: code.strip()})
    helpers_cell = next(c.metadata["nbgrader"]["grade_id"] for c in garbage.cells
                        if c.metadata.get("nbgrader", {}).get("grade_id") == "test_helpers")
    notebooks["helpers"] = with_cell_after(garbage, helpers_cell, attacks.HELPERS)
    return notebooks


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    def write(assignment, folder):
        batch = Submissions(folder)
        for name, notebook in attack_notebooks(assignment).items():
            batch.save(name, notebook)
        return list(batch.values())

    return GradedBatches(tmp_path_factory, "attacks", write)


def test_every_assignment_has_its_attacks():
    assert ASSIGNMENTS == paths.assignments()


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_reference_keeps_full_marks_and_the_garbage_does_not(graded, assignment):
    results = graded[assignment]
    assert results["reference"]["score"] == results["reference"]["max_score"], results["reference"]["message"]
    garbage = results["garbage"]
    assert garbage["status"] == "graded" and garbage["score"] < garbage["max_score"] / 2, garbage["message"]


def attack_names(assignment):
    return [name for name in attack_notebooks(assignment) if name not in ("reference", "garbage")]


@pytest.mark.parametrize("assignment, attack", [(a, n) for a in ASSIGNMENTS for n in attack_names(a)])
def test_an_attack_on_the_tests_gains_nothing(graded, assignment, attack):
    results = graded[assignment]
    result, control = results[attack], results["garbage"]
    assert result["status"] == "graded", result["message"]
    gained = {test: f"{score:g} > {control['tests'][test][0]:g}" for test, (score, _) in result["tests"].items()
              if score > control["tests"][test][0]}
    assert not gained, f"{attack} gained points on {gained}: {result['message']}"
