"""Notebooks whose instructor cells or nbgrader metadata were tampered with, in one batch.

Test cells and read-only cells come from the instructor's copy, never the student's:
editing, emptying, duplicating, moving or deleting test cells, or forging nbgrader
metadata (a test cell relabelled as an answer, changed points, checksums or grade_ids,
a cell that claims to be a test) changes nothing. The tampered notebooks keep the
untouched student version's answers (stubs), so each must score zero; the same tampering
around the reference answers keeps full marks (nothing is lost for cells a student
moved or edited by mistake).
"""

import json
import shutil

import nbformat
import pytest
from nbgrader.utils import compute_checksum

from autograder.records.submissions import MAX_CELLS
from conftest import Submissions, by_student, run_autograder, student_and_reference

ASSIGNMENT = "self_attention"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox")


def _meta(cell):
    return cell.metadata.get("nbgrader", {})


def _is_test(cell):
    return bool(_meta(cell).get("grade")) and not _meta(cell).get("solution")


def _copy(notebook):
    return nbformat.reads(nbformat.writes(notebook), as_version=4)


def emptied(notebook):
    for cell in notebook.cells:
        if _is_test(cell):
            cell.source = ""
    return notebook


def replaced_by_pass(notebook):
    for cell in notebook.cells:
        if _is_test(cell):
            cell.source = "pass"
    return notebook


def deleted(notebook):
    notebook.cells = [c for c in notebook.cells if not _is_test(c)]
    return notebook


def duplicated_first(notebook):
    """A forged copy of each test cell (same grade_id, source `pass`) placed before it."""
    cells = []
    for cell in notebook.cells:
        if _is_test(cell):
            fake = _copy(nbformat.v4.new_notebook(cells=[cell])).cells[0]
            fake.source = "pass"
            fake["id"] = nbformat.v4.nbbase.random_cell_id()
            cells.append(fake)
        cells.append(cell)
    notebook.cells = cells
    return notebook


def moved_to_top(notebook):
    tests = [c for c in notebook.cells if _is_test(c)]
    notebook.cells = tests + [c for c in notebook.cells if not _is_test(c)]
    return notebook


def relabelled_as_answers(notebook):
    for cell in notebook.cells:
        if _is_test(cell):
            cell.metadata["nbgrader"].update(solution=True, grade=False, locked=False)
            cell.source = "pass"
    return notebook


def points_and_checksums_forged(notebook):
    for cell in notebook.cells:
        if _is_test(cell):
            cell.source = "pass"
            cell.metadata["nbgrader"]["points"] = 100
            cell.metadata["nbgrader"]["checksum"] = compute_checksum(cell)
    return notebook


def grade_ids_renamed(notebook):
    for cell in notebook.cells:
        if _is_test(cell):
            cell.metadata["nbgrader"]["grade_id"] += "_mine"
            cell.source = "pass"
    return notebook


def fake_test_added(notebook):
    fake = nbformat.v4.new_code_cell("pass")
    fake.metadata["nbgrader"] = {"grade": True, "grade_id": "bonus", "points": 50, "locked": True,
                                 "solution": False, "schema_version": 3, "task": False}
    notebook.cells.append(fake)
    return notebook


def locked_cells_rewritten(notebook):
    """The setup and helper cells rewritten so that every check passes."""
    for cell in notebook.cells:
        grade_id = _meta(cell).get("grade_id")
        if grade_id == "test_helpers":
            cell.source = ("def expect_shape(*a, **k): pass\ndef expect_close(*a, **k): pass\n"
                           "def first_match(*a, **k): return ''\ndef as_numpy(v): return v")
        elif grade_id == "setup":
            cell.source += "\nimport builtins\nbuiltins.AssertionError = Warning\n"
    return notebook


TAMPERINGS = {f.__name__: f for f in (emptied, replaced_by_pass, deleted, duplicated_first, moved_to_top,
                                      relabelled_as_answers, points_and_checksums_forged, grade_ids_renamed,
                                      fake_test_added, locked_cells_rewritten)}


def build(folder):
    student, reference, _ = student_and_reference(ASSIGNMENT)
    batch = Submissions(folder)
    save = batch.save
    save("honest", reference)
    save("untouched", student)
    for name, tamper in TAMPERINGS.items():
        save(f"stubs_{name}", tamper(_copy(student)))
    for name in ("moved_to_top", "deleted", "duplicated_first", "replaced_by_pass"):
        save(f"answers_{name}", TAMPERINGS[name](_copy(reference)))
    # Scratch cells between the answers, and a helper the answers use defined in one.
    extra = _copy(reference)
    position = next(i for i, c in enumerate(extra.cells) if _meta(c).get("grade_id") == "softmax")
    extra.cells[position].source = "def softmax(x, axis=-1):\n    return _my_softmax(x, axis)"
    extra.cells.insert(position, nbformat.v4.new_code_cell(
        "def _my_softmax(x, axis):\n    e = np.exp(x - np.max(x, axis=axis, keepdims=True))\n"
        "    return e / e.sum(axis=axis, keepdims=True)\nprint('scratch work')"))
    extra.cells.insert(position, nbformat.v4.new_markdown_cell("My notes."))
    save("answers_with_scratch_cells", extra)
    # Not the assignment's notebook at all: a clear error, no kernel.
    save("unrelated_notebook", nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('hello')")]))
    (folder / "lists_cells_as_text.ipynb").write_text(json.dumps({"cells": "none", "nbformat": 4}))
    batch["lists_cells_as_text"] = folder / "lists_cells_as_text.ipynb"
    # Past the cell limit: refused before nbformat reads it (it took 154 s to grade, for
    # full marks, under --submission-timeout 20). At the limit: graded as any other.
    many = json.loads(nbformat.writes(reference))
    many["cells"] += [{"cell_type": "code", "execution_count": None, "id": f"c{k}", "metadata": {}, "outputs": [],
                       "source": ""} for k in range(120_000)]
    (folder / "very_many_cells.ipynb").write_text(json.dumps(many))
    batch["very_many_cells"] = folder / "very_many_cells.ipynb"
    at_limit = _copy(reference)
    at_limit.cells += [nbformat.v4.new_code_cell("") for _ in range(MAX_CELLS - len(at_limit.cells))]
    save("answers_with_scratch_cells_at_the_cell_limit", at_limit)
    return batch


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile-notebooks")
    batch = build(folder / "submissions")
    code, lines, log = run_autograder("grade", ASSIGNMENT, *batch.values(), "--out", folder / "grading",
                                      "--no-progress", "--jobs", "2")
    assert code == 0, log[-3000:]
    return {"results": by_student(lines), "log": log}


def test_controls(graded):
    results = graded["results"]
    assert results["honest"]["score"] == results["honest"]["max_score"] == 24, results["honest"]["message"]
    assert results["untouched"]["score"] == 0


@pytest.mark.parametrize("tampering", sorted(TAMPERINGS))
def test_tampered_tests_and_metadata_score_nothing(graded, tampering):
    result = graded["results"][f"stubs_{tampering}"]
    assert result["status"] == "graded", result["message"]
    assert result["score"] == 0, result["message"]
    assert result["max_score"] == 24, "points come from the instructor's notebook"
    assert set(result["tests"]) == set(graded["results"]["honest"]["tests"]), "every test was graded"


@pytest.mark.parametrize("tampering", ["moved_to_top", "deleted", "duplicated_first", "replaced_by_pass"])
def test_tampering_around_right_answers_keeps_full_marks(graded, tampering):
    result = graded["results"][f"answers_{tampering}"]
    assert result["score"] == result["max_score"], result["message"]


def test_scratch_cells_run_where_the_student_put_them(graded):
    result = graded["results"]["answers_with_scratch_cells"]
    assert result["score"] == result["max_score"], result["message"]
    assert not result["flags"], result["flags"]


def test_the_student_is_told_what_was_replaced(graded):
    results = graded["results"]
    assert any("was changed" in flag for flag in results["stubs_emptied"]["flags"])
    assert any("was missing" in flag for flag in results["stubs_deleted"]["flags"])
    assert any("more than once" in flag for flag in results["stubs_duplicated_first"]["flags"])
    assert any("metadata" in flag for flag in results["stubs_relabelled_as_answers"]["flags"])
    assert any("claims to be graded" in flag for flag in results["stubs_fake_test_added"]["flags"])


def test_notebooks_that_are_not_the_assignment_fail_alone(graded):
    results = graded["results"]
    assert results["unrelated_notebook"]["status"] == "error"
    assert "none of the assignment's answer cells" in results["unrelated_notebook"]["message"]
    assert results["lists_cells_as_text"]["status"] == "error"
    assert "not a valid notebook" in results["lists_cells_as_text"]["message"] or \
        "not a notebook" in results["lists_cells_as_text"]["message"]


def test_a_notebook_past_the_cell_limit_is_refused_before_grading(graded):
    result = graded["results"]["very_many_cells"]
    assert result["status"] == "error" and result["score"] == 0
    assert f"at most {MAX_CELLS} cells" in result["message"], result["message"]
    assert result["seconds"] == 0, "no worker read it"


def test_a_notebook_at_the_cell_limit_keeps_full_marks(graded):
    result = graded["results"]["answers_with_scratch_cells_at_the_cell_limit"]
    assert result["score"] == result["max_score"], result["message"]
    assert not result["problems"], result["problems"]
