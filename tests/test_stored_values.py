"""Visible tests carry values, not algorithms: the values they store are the reference's.

A visible test compares one small case with values written into its cell by `make
release` (`stored("CALL", VALUE)`, autograder/stored_values.py). These tests recompute
every stored value from the reference solution and fail when one drifted, and check the
machinery itself on a small notebook.
"""

import nbformat
import numpy as np
import pytest

from autograder import paths, stored_values

NOTEBOOKS = sorted(paths.SOLUTIONS.glob("*/*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.parent.name for p in NOTEBOOKS])
def test_stored_values_are_what_the_reference_gives(path):
    problems = stored_values.drifted(nbformat.read(path, as_version=4))
    assert not problems, "stored values that drifted from the reference (run `make release`):\n" + "\n".join(
        f"cell {index}: stored({text!r}): {why}" for index, text, why in problems)


def small_notebook(test_source):
    cells = [
        nbformat.v4.new_code_cell("import numpy as np\n\ndef stored(call, value):\n    return np.asarray(value)",
                                  metadata={"nbgrader": {"locked": True, "grade": False, "solution": False,
                                                         "grade_id": "helpers"}}),
        nbformat.v4.new_code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * np.asarray(x)\n"
                                  "    ### END SOLUTION",
                                  metadata={"nbgrader": {"locked": False, "grade": False, "solution": True,
                                                         "grade_id": "double"}}),
        nbformat.v4.new_code_cell(test_source, metadata={"nbgrader": {"locked": True, "grade": True,
                                                                      "solution": False, "points": 1,
                                                                      "grade_id": "test_double"}}),
    ]
    return nbformat.v4.new_notebook(cells=cells)


def test_refresh_writes_the_reference_values_as_data():
    notebook = small_notebook('x = np.array([[1.5, -2.0], [0.1, 3.0]])\n'
                              'assert np.allclose(double(x), stored("double(x)", None))\n'
                              'flags = stored("double(x) > 0", [])\n')
    assert stored_values.drifted(notebook)
    assert stored_values.refresh(notebook) == 2
    source = notebook.cells[2].source
    assert 'stored("double(x)", [[3.0, -4.0],' in source and "[0.2, 6.0]]" in source
    assert 'stored("double(x) > 0", [[True, False],' in source
    assert "double(x) * " not in source and "2 *" not in source  # values, not the computation
    assert stored_values.drifted(notebook) == []
    assert stored_values.refresh(notebook) == 0  # nothing drifted: nothing rewritten
    namespace = {}
    for cell in notebook.cells:
        exec(stored_values.solution_code(cell.source), namespace)  # the values pass the test they serve
    assert namespace["flags"].dtype == bool


def test_a_changed_reference_is_caught():
    notebook = small_notebook('assert np.allclose(double(1.25), stored("double(1.25)", 2.5))\n')
    assert stored_values.drifted(notebook) == []
    notebook.cells[1].source = notebook.cells[1].source.replace("2 *", "3 *")
    (problem,) = stored_values.drifted(notebook)
    assert problem[1] == "double(1.25)" and "3.75" in problem[2]


def test_a_stored_value_inside_a_function_is_refused():
    notebook = small_notebook('def check():\n    return stored("double(1)", 2)\n')
    with pytest.raises(stored_values.StoredValueError, match="top level"):
        stored_values.compute(notebook)


def test_literals_keep_precision_and_read_back():
    values = np.array([1 / 3, -2e-9, 12345.678901234567, 0.0])
    text = stored_values.literal(values)
    assert np.allclose(eval(text), values, rtol=1e-11, atol=0)
    assert stored_values.literal(np.array([[True, False]])) == "[[True, False]]"
    assert stored_values.literal(np.array([np.nan, -np.inf])) == '[float("nan"), float("-inf")]'
    notebook = small_notebook('bias = stored("np.array([0.0, -np.inf, np.inf]) * double(1)", None)\n')
    assert stored_values.refresh(notebook) == 1 and 'float("-inf")' in notebook.cells[2].source
    assert stored_values.drifted(notebook) == []  # infinities read back as they were written
