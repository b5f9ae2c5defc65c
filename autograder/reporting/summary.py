"""What a student reads first: for each graded function, the points earned of those possible,
and for each function that lost points what failed and which known mistake it behaves like.

The feedback page (autograder/reporting/feedback.py) opens with this summary as a table, and
`python -m autograder validate` (autograder/reporting/validate.py) prints it. The functions and
their tests come from the notebook's nbgrader metadata: each answer cell is followed by
the test cells that grade it (as autograder/judging/catalogue.py's `tests_of` reads them).

A function left as it was given (its answer cell still the stub, every function in it
only `raise NotImplementedError()`) whose tests all failed on that stub (each message names
NotImplementedError, or is a test that reads the code saying it "is not written yet") is
"not attempted": said once, instead of one NotImplementedError message per test. A
function with anything written in it shows each failure, whatever it raised, and so does
a stub with a test that failed on anything else.
"""

import ast
from dataclasses import dataclass, field

from autograder import translation
from autograder.judging import diagnosis
from autograder.reporting import language as lang

# What a test that failed on an untouched stub says: the stub's error, or (a test that reads
# the answer's code rather than calling it) "NAME is not written yet: this test reads its
# code once it is."
STUB_FAILURES = ("NotImplementedError", "is not written yet")


@dataclass
class Test:
    name: str  # the test cell's grade_id
    points: float
    earned: float
    status: str  # "passed", "failed" or "hidden" (validate: a cell of hidden tests only)
    message: str = ""  # what a failed test said
    translated: str = ""  # that message in the notebook's language (autograder/reporting/language.py)

    @property
    def text(self):
        """The message as the student reads it."""
        return self.translated or self.message


@dataclass
class Function:
    name: str  # the grade_id of its answer cell (the name of what the student writes)
    tests: list = field(default_factory=list)
    diagnosis: str = ""  # "behaves like ...", or empty
    stub: bool = False  # its answer cell is still the stub it was given
    language: str = ""  # the notebook's ("es": the grader's words in Spanish)

    @property
    def points(self):
        return sum(t.points for t in self.tests)

    @property
    def earned(self):
        return sum(t.earned for t in self.tests)

    @property
    def failed(self):
        return [t for t in self.tests if t.status == "failed"]

    @property
    def not_attempted(self):
        """Still the stub, and every test that ran failed on it (STUB_FAILURES)."""
        ran = [t for t in self.tests if t.status != "hidden"]
        return (self.stub and bool(ran) and self.earned == 0 and all(
            t.status == "failed" and any(said in t.message for said in STUB_FAILURES) for t in ran))

    @property
    def not_attempted_sentence(self):
        count, _ = len(self.failed), lang.words(self.language)
        if count == 1:
            return _("Not attempted: `{name}` still raises NotImplementedError, as it was given, "
                     "so its test fails until you write it.", name=self.name)
        return _("Not attempted: `{name}` still raises NotImplementedError, as it was given, "
                 "so its {count} tests fail until you write it.", name=self.name, count=count)


def _grade(cell):
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def error_message(cell):
    """`Name: message` of a test cell's error output, or ""."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"{output.get('ename', '')}: {output.get('evalue', '')}".strip(": ")
    return ""


def _raises_not_implemented(node):
    if not isinstance(node, ast.Raise) or node.cause is not None:
        return False
    raised = node.exc.func if isinstance(node.exc, ast.Call) and not (node.exc.args or node.exc.keywords) \
        else node.exc
    return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"


def _given(statement):
    """A docstring, `pass`, or `super().__init__(...)`: what a stub holds besides its raise."""
    if isinstance(statement, ast.Pass):
        return True
    if not isinstance(statement, ast.Expr):
        return False
    value = statement.value
    if isinstance(value, ast.Constant):
        return isinstance(value.value, str)
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "__init__"
            and isinstance(value.func.value, ast.Call) and isinstance(value.func.value.func, ast.Name)
            and value.func.value.func.id == "super")


def is_stub(source):
    """Whether an answer cell is still the stub: it defines at least one function, and each
    function it defines holds nothing but `raise NotImplementedError()` (after a
    docstring, `pass` or `super().__init__()`)."""
    try:
        tree = ast.parse(str(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    defined = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return bool(defined) and all(
        _raises_not_implemented(f.body[-1]) and all(_given(s) for s in f.body[:-1]) for f in defined)


def functions(nb, outcome, diagnosed=None, language=None):
    """[Function] in notebook order. `outcome(cell) -> (status, earned, message)` says how each
    test cell ended; `diagnosed`: function -> {"id", "explanation"} (autograder/judging/diagnosis.py).
    Test cells above the first answer cell are listed under "setup". `language`: the
    notebook's (its metadata's, by default), in which the messages and diagnoses are given."""
    diagnosed = diagnosed or {}
    language = translation.language_of(nb) if language is None else language
    found, current = [], None
    for cell in nb.get("cells", []):
        meta = _grade(cell)
        if cell.get("cell_type") == "code" and meta.get("solution"):
            source = cell.get("source", "")
            current = Function(str(meta.get("grade_id", "?")),
                               stub=is_stub("".join(source) if isinstance(source, list) else source),
                               language=language)
            found.append(current)
        elif cell.get("cell_type") == "code" and meta.get("grade"):
            if current is None:
                current = Function("setup", language=language)
                found.append(current)
            status, earned, message = outcome(cell)
            current.tests.append(Test(str(meta.get("grade_id", "?")), float(meta.get("points", 0) or 0),
                                      float(earned), status, message,
                                      lang.translate_message(message, language) if message else ""))
    for function in found:
        mistake = diagnosed.get(function.name)
        if mistake and function.earned < function.points and not function.not_attempted:  # full marks: no label
            function.diagnosis = diagnosis.sentence(f"`{function.name}`", mistake["id"], mistake["explanation"],
                                                    language)
    return [f for f in found if f.tests]


def graded_outcome(cell, message=None):
    """How a test cell of a graded notebook ended (nbgrader's GetGrades put its score in its metadata);
    `message`: its error, where its error output was taken out of the cell (else read from it)."""
    meta = _grade(cell)
    earned = float(meta.get("score", 0) or 0)
    message = error_message(cell) if message is None else message
    passed = earned >= float(meta.get("points", 0) or 0) and not message
    return ("passed" if passed else "failed"), earned, message


def as_text(functions, hidden_note=True, language=""):
    """The summary as lines of text (what `validate` prints), in `language`."""
    lines, _ = [], lang.words(language)
    width = max([len(f.name) for f in functions] + [8])
    for function in functions:
        shown = [t for t in function.tests if t.status != "hidden"]
        hidden = [t for t in function.tests if t.status == "hidden"]
        points = sum(t.points for t in shown)
        state = "ok  " if not function.failed else "FAIL"
        extra = _(" (+{points:g} in hidden tests)", points=sum(t.points for t in hidden)) \
            if hidden and hidden_note else ""
        name = function.name.ljust(width)
        lines.append(_("{state} {name} {earned:g} / {points:g} points{extra}", state=state, name=name,
                       earned=function.earned, points=points, extra=extra))
        if function.not_attempted:
            lines.append(f"       {function.not_attempted_sentence}")
            continue
        for test in function.failed:
            lines.append(f"       {test.name}: {test.text}")
        if function.diagnosis:
            lines.append(f"       {function.diagnosis}")
    return lines
