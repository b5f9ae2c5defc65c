"""Tell a student, before submitting, which tests of a notebook pass.

The notebook runs from a fresh kernel with nbgrader's own execution preprocessor. A
test cell passes when it ends without an error, as when it is graded: a warning or a
print on stderr does not fail it (nbgrader's own rule would). Only the visible tests
are in a student version; cells whose tests are all hidden are listed as such.
"""

import ast
import os
from pathlib import Path

import nbformat
from nbgrader.preprocessors import Execute
from nbgrader.utils import is_grade

from autograder import translation
from autograder.reporting import language, summary
from autograder.judging.course_directory import KERNEL_ENV


def _has_visible_checks(source):
    """True if a test cell holds more than its docstring."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return True
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return bool(body)


def _first_line(source):
    try:
        doc = ast.get_docstring(ast.parse(source))
    except SyntaxError:
        doc = None
    return (doc or source.strip().splitlines()[0] if source.strip() else "").splitlines()[0]


def _error_text(cell):
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            return f"{output.ename}: {output.evalue}"
    return ""


class Validation(list):
    """[(test name, status, points, message)], and `functions`: the summary of each graded
    function (autograder/reporting/summary.py), as the feedback page shows it."""

    functions = ()
    language = ""  # the notebook's: the summary's words and messages in it


def validate(path, timeout=120):
    """Execute the notebook; return a Validation: [(test name, status, points, message)]."""
    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    previous = {key: os.environ.get(key) for key in KERNEL_ENV}
    os.environ.update(KERNEL_ENV)
    try:
        executor = Execute(timeout=timeout, interrupt_on_timeout=True)
        notebook, _ = executor.preprocess(notebook, {"metadata": {"path": str(path.parent.resolve())}})
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    report = Validation()
    report.language = translation.language_of(notebook)
    outcomes = {}
    for cell in notebook.cells:
        if not is_grade(cell) or cell.cell_type != "code":
            continue
        name = cell.metadata.nbgrader.get("grade_id", "?")
        points = float(cell.metadata.nbgrader.get("points", 0))
        if not _has_visible_checks(cell.source):
            report.append((name, "hidden", points, _first_line(cell.source)))
            outcomes[name] = ("hidden", 0.0, "")
            continue
        failed = any(output.output_type == "error" for output in cell.get("outputs", []))
        status = "fail" if failed else "pass"
        report.append((name, status, points, _error_text(cell) if status == "fail" else _first_line(cell.source)))
        outcomes[name] = ("failed", 0.0, _error_text(cell).rstrip(": ")) if failed else ("passed", points, "")
    report.functions = summary.functions(
        notebook, lambda cell: outcomes.get(cell.metadata.nbgrader.get("grade_id", "?"), ("hidden", 0.0, "")))
    return report


def print_report(report, emit=print):
    functions = getattr(report, "functions", ())
    code = getattr(report, "language", "")
    _ = language.words(code)
    if functions:
        emit(_("Summary (visible tests; the hidden ones run when your work is graded):"))
        for line in summary.as_text(functions, language=code):
            emit("  " + line)
        emit("")
    marks = {"pass": "PASS  ", "fail": "FAIL  ", "hidden": "HIDDEN"}
    for name, status, points, message in report:
        if status == "fail":
            message = language.translate_message(message, code)
        count = _("{points:g} point", points=points) if points == 1 else _("{points:g} points", points=points)
        emit(f"{marks[status]} {name} ({count}): {message}")
    failed = [r for r in report if r[1] == "fail"]
    hidden = [r for r in report if r[1] == "hidden"]
    emit("")
    if failed:
        names = [f.name for f in functions if f.failed]
        where = _(" (in {names})", names=", ".join(names)) if names else ""
        emit(_("{count} visible test(s) fail{where}. Fix them before you submit.", count=len(failed), where=where))
    else:
        emit(_("Every visible test passes."))
    if hidden:
        emit(_("{count} test cell(s) hold only hidden tests; they run when your work is graded.",
               count=len(hidden)))
    return 1 if failed else 0
