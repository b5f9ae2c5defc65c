"""The size limits of a submitted notebook (autograder/records/submissions.py), checked on a plain
JSON parse before nbformat reads it: a notebook past them is refused with a message for
the student, quickly; one within them is read, checked and assembled in bounded time.
No kernel runs here."""

import json
import time

import nbformat

from autograder import paths
from autograder.judging.assemble import assemble
from autograder.records.submissions import (MAX_ATTACHMENTS, MAX_CELLS, MAX_NOTEBOOK_VALUES, check_notebook, collect,
                                    read_notebook)
from conftest import student_and_reference

ASSIGNMENT = "self_attention"


def reference():
    """The student version with the reference answers, as JSON (a dict)."""
    return json.loads(nbformat.writes(student_and_reference(ASSIGNMENT)[1]))


def code_cell(index, source=""):
    return {"cell_type": "code", "execution_count": None, "id": f"scratch-{index}", "metadata": {},
            "outputs": [], "source": source}


def collect_one(tmp_path, notebook):
    """(the submission, seconds) of collecting `notebook` saved as alice.ipynb."""
    path = tmp_path / "alice.ipynb"
    path.write_text(json.dumps(notebook))
    started = time.monotonic()
    (submission,) = collect([path], ASSIGNMENT, [f"{ASSIGNMENT}.ipynb"])
    return submission, time.monotonic() - started


def test_a_notebook_of_very_many_cells_is_refused_quickly(tmp_path):
    # Graded before the limits: 154 s under --submission-timeout 20, full marks, no note.
    notebook = reference()
    notebook["cells"] += [code_cell(k) for k in range(120_000)]
    submission, seconds = collect_one(tmp_path, notebook)
    assert not submission.notebooks
    assert f"alice.ipynb has {len(notebook['cells'])} cells" in submission.error
    assert f"at most {MAX_CELLS} cells" in submission.error
    assert seconds < 10, seconds  # about 0.6 s: a JSON parse and a count


def test_a_notebook_at_the_cell_limit_is_read_and_assembled(tmp_path):
    notebook = reference()
    notebook["cells"] += [code_cell(k, "pass") for k in range(MAX_CELLS - len(notebook["cells"]))]
    submission, seconds = collect_one(tmp_path, notebook)
    assert not submission.error, submission.error
    started = time.monotonic()
    (source,) = paths.assignment_notebooks(ASSIGNMENT)
    submitted = read_notebook(submission.notebooks[f"{ASSIGNMENT}.ipynb"])
    graded, notes = assemble(nbformat.read(source, as_version=4), submitted)
    seconds += time.monotonic() - started
    assert not notes, notes
    assert sum(cell.source == "pass" for cell in graded.cells) == MAX_CELLS - len(reference()["cells"])
    assert seconds < 20, seconds  # about 0.3 s


def test_saved_outputs_are_neither_read_nor_checked(tmp_path):
    # nbformat validates outputs one by one: 300 000 of them took 45 s to read, three times.
    notebook = reference()
    cell = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ""}] * 300_000
    cell["outputs"].append({"output_type": "not an output"})
    submission, seconds = collect_one(tmp_path, notebook)
    assert not submission.error, submission.error
    assert seconds < 10, seconds  # about 0.2 s
    read = read_notebook(submission.notebooks[f"{ASSIGNMENT}.ipynb"])
    assert all(c.outputs == [] for c in read.cells if c.cell_type == "code")
    assert all(isinstance(c.source, str) for c in read.cells)  # lines joined, as nbformat reads them


def test_tags_that_are_not_text_are_refused_before_validation(tmp_path):
    # nbformat's schema wants unique tags: jsonschema compares dicts pairwise, and 2 000
    # of them took 21 s to validate (20 000, hours).
    notebook = reference()
    notebook["cells"][1]["metadata"]["tags"] = [{"tag": k} for k in range(20_000)]
    submission, seconds = collect_one(tmp_path, notebook)
    assert "the tags of cell 2 are not a list of text" in submission.error
    assert seconds < 10, seconds


def test_too_many_values_or_attachments_are_refused(tmp_path):
    notebook = reference()
    notebook["cells"][0]["source"] = ["line\n"] * MAX_NOTEBOOK_VALUES
    submission, _ = collect_one(tmp_path, notebook)
    assert f"more than {MAX_NOTEBOOK_VALUES} JSON values outside its outputs" in submission.error
    notebook = reference()
    scratch = {"cell_type": "markdown", "id": "pictures", "metadata": {}, "source": "![a](attachment:a0.png)",
               "attachments": {f"a{k}.png": {"image/png": "iVBORw0KGgo="} for k in range(MAX_ATTACHMENTS + 1)}}
    notebook["cells"].append(scratch)
    submission, _ = collect_one(tmp_path, notebook)
    assert f"has {MAX_ATTACHMENTS + 1} attachments" in submission.error
    scratch["attachments"] = {"a0.png": {"image/png": "iVBORw0KGgo="}}
    submission, _ = collect_one(tmp_path, notebook)
    assert not submission.error, submission.error


def test_what_is_not_a_notebook_is_named():
    assert "not a notebook (invalid JSON" in check_notebook(b"{", "x")
    assert "not a notebook (invalid JSON: nested too deeply)" in check_notebook(b"[" * 100_000, "x")
    assert "no nbformat version" in check_notebook(b"[1, 2]", "x")
    assert "has nbformat 3" in check_notebook(b'{"nbformat": 3, "worksheets": []}', "x")
    assert "not a valid notebook" in check_notebook(b'{"nbformat": 4, "nbformat_minor": 5, "cells": "none",'
                                                    b' "metadata": {}}', "x")
