"""Deprecated behaviour fails the suite when the course's own code relies on it
(`autograder/strict_warnings.py`): in the test process, and in the kernels nbval runs."""

import subprocess
import sys
import warnings

import nbformat
import pytest
import torch

from autograder import strict_warnings


def test_a_deprecation_in_the_course_code_is_an_error():
    with pytest.raises(DeprecationWarning):
        warnings.warn("an old way", DeprecationWarning)
    with pytest.raises(UserWarning, match="deprecated"):
        torch.zeros(3).T  # PyTorch deprecates .T on tensors that are not matrices


def test_other_warnings_stay_warnings():
    with pytest.warns(UserWarning, match="just a note"):
        warnings.warn("just a note", UserWarning)


def test_the_filters_cover_only_the_course_modules():
    for action, message, category, module in strict_warnings.filters(strict_warnings.COURSE_MODULES):
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            warnings.filterwarnings(action, message=message, category=category, module=module)
            text = "this is deprecated" if category is UserWarning else "old"
            for name, fails in (("course.plotting", True), ("autograder.grade", True),
                                ("test_grading", True), ("numpy.core", False), ("nbformat", False)):
                try:
                    warnings.warn_explicit(text, category, "file.py", 1, module=name)
                except category:
                    assert fails, f"{category.__name__} from {name} became an error"
                else:
                    assert not fails, f"{category.__name__} from {name} stayed a warning"


@pytest.mark.parametrize("cell, fails", [("torch.zeros(3).T", True), ("torch.zeros(3).mT if False else 1", False)])
def test_a_notebook_cell_that_relies_on_deprecated_behaviour_fails_under_nbval(tmp_path, cell, fails):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch"),
                                               nbformat.v4.new_code_cell(cell)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "probe.ipynb")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "--nbval-lax",
                           "-p", "autograder.strict_warnings", "-o", "addopts=", str(tmp_path / "probe.ipynb")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if fails:
        assert done.returncode != 0 and "deprecated" in done.stdout, done.stdout[-2000:]
    else:
        assert done.returncode == 0, done.stdout[-2000:]
