"""What a student reads first: for each graded function, the points earned of those possible,
and for each function that lost points what failed and which known mistake it behaves like.

The feedback page (autograder/reporting/feedback.py) opens with this summary as a table, and
`python -m autograder validate` (autograder/reporting/validate.py) prints it. The functions and
their tests come from the notebook's nbgrader metadata: each answer cell is followed by
the test cells that grade it (as autograder/judging/catalogue.py's `tests_of` reads them).
"""

from dataclasses import dataclass, field

from autograder.judging import diagnosis


@dataclass
class Test:
    name: str  # the test cell's grade_id
    points: float
    earned: float
    status: str  # "passed", "failed" or "hidden" (validate: a cell of hidden tests only)
    message: str = ""  # what a failed test said


@dataclass
class Function:
    name: str  # the grade_id of its answer cell (the name of what the student writes)
    tests: list = field(default_factory=list)
    diagnosis: str = ""  # "behaves like ...", or empty

    @property
    def points(self):
        return sum(t.points for t in self.tests)

    @property
    def earned(self):
        return sum(t.earned for t in self.tests)

    @property
    def failed(self):
        return [t for t in self.tests if t.status == "failed"]


def _grade(cell):
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def error_message(cell):
    """`Name: message` of a test cell's error output, or ""."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"{output.get('ename', '')}: {output.get('evalue', '')}".strip(": ")
    return ""


def functions(nb, outcome, diagnosed=None):
    """[Function] in notebook order. `outcome(cell) -> (status, earned, message)` says how each
    test cell ended; `diagnosed`: function -> {"id", "explanation"} (autograder/judging/diagnosis.py).
    Test cells above the first answer cell are listed under "setup"."""
    diagnosed = diagnosed or {}
    found, current = [], None
    for cell in nb.get("cells", []):
        meta = _grade(cell)
        if cell.get("cell_type") == "code" and meta.get("solution"):
            current = Function(str(meta.get("grade_id", "?")))
            found.append(current)
        elif cell.get("cell_type") == "code" and meta.get("grade"):
            if current is None:
                current = Function("setup")
                found.append(current)
            status, earned, message = outcome(cell)
            current.tests.append(Test(str(meta.get("grade_id", "?")), float(meta.get("points", 0) or 0),
                                      float(earned), status, message))
    for function in found:
        mistake = diagnosed.get(function.name)
        if mistake and function.earned < function.points:  # full marks are never labelled
            function.diagnosis = diagnosis.sentence(f"`{function.name}`", mistake["id"], mistake["explanation"])
    return [f for f in found if f.tests]


def graded_outcome(cell):
    """How a test cell of a graded notebook ended (nbgrader's GetGrades put its score in its metadata)."""
    meta = _grade(cell)
    earned = float(meta.get("score", 0) or 0)
    message = error_message(cell)
    passed = earned >= float(meta.get("points", 0) or 0) and not message
    return ("passed" if passed else "failed"), earned, message


def as_text(functions, hidden_note=True):
    """The summary as lines of text (what `validate` prints)."""
    lines = []
    width = max([len(f.name) for f in functions] + [8])
    for function in functions:
        shown = [t for t in function.tests if t.status != "hidden"]
        hidden = [t for t in function.tests if t.status == "hidden"]
        points = sum(t.points for t in shown)
        state = "ok  " if not function.failed else "FAIL"
        extra = f" (+{sum(t.points for t in hidden):g} in hidden tests)" if hidden and hidden_note else ""
        lines.append(f"{state} {function.name:<{width}} {function.earned:g} / {points:g} points{extra}")
        for test in function.failed:
            lines.append(f"       {test.name}: {test.message}")
        if function.diagnosis:
            lines.append(f"       {function.diagnosis}")
    return lines
