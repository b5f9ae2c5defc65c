"""Catalogues of known answers: the mistakes students make, and right answers written differently.

A catalogue is data, one YAML file per assignment in autograder/catalogues/:

    assignment: self_attention
    answers:
      - id: softmax-no-max-shift        # short, unique, safe as a file name
        function: softmax               # grade_id of the solution cell it replaces
        verdict: wrong                  # wrong: must lose points; right: must keep them all
        explanation: One line for a student, naming the mistake and its fix.
        hint: It matches a softmax   # optional: words the failed test's message must say
        loses: [test_softmax_large]  # optional: exactly the tests in which it loses points
        also: [other-id]             # optional: answers whose hint this one may get as well
        code: |
          def softmax(x, axis=-1):
              ...
      - probes: softmax                 # optional: the calls that tell its wrong answers apart
        setup: |                        # (see autograder/judging/diagnosis.py)
          x = np.array([[1.0, 2.0], [1000.0, 0.0]])
        calls: [softmax(x), softmax(x, axis=0)]

Each answer becomes a submission: the student version of the assignment with every
solution cell filled in from the reference solution, except the one the answer
replaces. The test suite grades them all and checks each verdict, that a wrong answer
loses points only in the tests of its own function (`tests_of`), and that the messages
it gets name its own mistake (`hint`) and no other answer's.
"""

from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

from autograder import paths
from autograder.judging.assemble import solution_code

VERDICTS = ("wrong", "right")


@dataclass(frozen=True)
class Answer:
    id: str
    function: str
    verdict: str
    explanation: str
    code: str
    hint: str = ""  # words the message of a failed test must contain, when the tests name this mistake
    also: tuple = ()  # ids of other answers whose hint this one may also get (it makes both mistakes)
    loses: tuple = ()  # when given: exactly the tests this wrong answer loses points in

    def also_matches(self, other_id):
        return other_id in self.also


def catalogue_path(assignment, catalogues=paths.CATALOGUES):
    return Path(catalogues) / f"{assignment}.yml"


def read_yaml(path):
    # LibYAML's parser where PyYAML has it: the same data, ten times faster (a grading
    # worker reads the catalogue once per submission)
    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load(assignment, catalogues=paths.CATALOGUES):
    """The answers of one assignment's catalogue, checked for shape and unique ids."""
    data = read_yaml(catalogue_path(assignment, catalogues))
    if data.get("assignment") != assignment:
        raise ValueError(f"catalogue for {assignment!r} names assignment {data.get('assignment')!r}")
    answers, seen = [], set()
    for entry in data["answers"]:
        if "probes" in entry:  # the probes of a function (autograder/judging/diagnosis.py), not an answer
            continue
        answer = Answer(**{**entry, "also": tuple(entry.get("also", ())), "loses": tuple(entry.get("loses", ()))})
        if answer.verdict not in VERDICTS:
            raise ValueError(f"{answer.id}: verdict must be one of {VERDICTS}, not {answer.verdict!r}")
        if answer.id in seen:
            raise ValueError(f"duplicate answer id {answer.id!r}")
        seen.add(answer.id)
        answers.append(answer)
    return answers


def probe_entries(assignment, catalogues=paths.CATALOGUES):
    """The catalogue's probe entries (`- probes: GRADE_ID`, read by autograder/judging/diagnosis.py)."""
    data = read_yaml(catalogue_path(assignment, catalogues))
    return [entry for entry in data["answers"] if "probes" in entry]


def reference_code(source_notebook):
    """grade_id -> the reference code of each solution cell, without the solution markers."""
    code = {}
    for cell in source_notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            code[meta["grade_id"]] = solution_code(cell.source)
    return code


def tests_of(source_notebook):
    """grade_id of each solution cell -> the test cells that grade it: those that follow it,
    up to the next solution cell (each function's tests sit right below it)."""
    tests, current = {}, None
    for cell in source_notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            current = meta["grade_id"]
            tests[current] = []
        elif meta.get("grade") and current is not None:
            tests[current].append(meta["grade_id"])
    return tests


def fill(student_notebook, code):
    """A copy of the student version whose solution cells hold `code` (grade_id -> source)."""
    notebook = nbformat.from_dict(student_notebook)
    notebook = nbformat.reads(nbformat.writes(notebook), as_version=4)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in code:
            cell.source = code[grade_id]
    return notebook


def write_submissions(assignment, answers, folder, solutions=paths.SOLUTIONS, book=paths.BOOK):
    """Write one notebook per answer into `folder` (named after the answer id); return their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (source_path,) = paths.assignment_notebooks(assignment, solutions)
    student_path = paths.student_version_folder(assignment, book) / source_path.name
    reference = reference_code(nbformat.read(source_path, as_version=4))
    student = nbformat.read(student_path, as_version=4)
    written = []
    for answer in answers:
        if answer.function not in reference:
            raise ValueError(f"{answer.id}: no solution cell with grade_id {answer.function!r}")
        notebook = fill(student, {**reference, answer.function: answer.code})
        path = folder / f"{answer.id}.ipynb"
        nbformat.write(notebook, path)
        written.append(path)
    return written
