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

TRANSCRIPTIONS are the other side: what a student who wants the points without the
thinking makes of the code the course hands them (the chapter's lessons, `course/`, the
student notebook's helper and visible-test cells), adapted to the contract's names and
signatures in a few minutes. Each is a submission ({graded name: code}, garbage for the
rest) and scores no more than the garbage plus one point per graded function.
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
    for name, code in getattr(attacks, "TRANSCRIPTIONS", {}).items():
        notebooks[f"transcribed_{name}"] = catalogue.fill(
            student, {**garbage_code, **{k: v.strip() for k, v in code.items()}})
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
    return [name for name in attack_notebooks(assignment)
            if name not in ("reference", "garbage") and not name.startswith("transcribed_")]


def transcription_names(assignment):
    return [name for name in attack_notebooks(assignment) if name.startswith("transcribed_")]


TRANSCRIBED = [(a, n) for a in ASSIGNMENTS for n in transcription_names(a)]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_assignment_has_transcriptions(assignment):
    """Every chapter is tried by the student who copies what the course hands them."""
    assert transcription_names(assignment), f"tests/attacks/{assignment}.py has no TRANSCRIPTIONS"


@pytest.mark.parametrize("assignment, transcription", TRANSCRIBED, ids=[f"{a}:{n}" for a, n in TRANSCRIBED])
def test_a_transcription_of_what_the_course_hands_over_scores_little(graded, assignment, transcription):
    """No code a student is given computes a right answer to a graded function, or becomes
    one by renaming: copied and adapted, it scores at most the garbage's points plus one
    point per graded function."""
    import nbformat

    results = graded[assignment]
    result, control = results[transcription], results["garbage"]
    assert result["status"] == "graded", result["message"]
    (source,) = paths.assignment_notebooks(assignment)
    functions = catalogue.tests_of(nbformat.read(source, as_version=4))
    gained = {function: sum(result["tests"][t][0] - control["tests"][t][0] for t in tests)
              for function, tests in functions.items()}
    total = result["score"] - control["score"]
    print(f"{assignment} {transcription}: {result['score']:g} of {result['max_score']:g} "
          f"(garbage {control['score']:g}); gained per function {gained}")
    assert total <= len(functions), (
        f"{transcription} scored {result['score']:g} of {result['max_score']:g}, {total:g} more than the garbage "
        f"({len(functions)} allowed, one per graded function); gained per function: {gained}")


@pytest.mark.parametrize("assignment, attack", [(a, n) for a in ASSIGNMENTS for n in attack_names(a)])
def test_an_attack_on_the_tests_gains_nothing(graded, assignment, attack):
    results = graded[assignment]
    result, control = results[attack], results["garbage"]
    assert result["status"] == "graded", result["message"]
    gained = {test: f"{score:g} > {control['tests'][test][0]:g}" for test, (score, _) in result["tests"].items()
              if score > control["tests"][test][0]}
    assert not gained, f"{attack} gained points on {gained}: {result['message']}"
