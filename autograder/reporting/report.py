"""The class report: what to re-teach, from what grading stored.

    python -m autograder report ASSIGNMENT --out DIR [--grading GRADING] [--names]

reads the class gradebook (GRADING/gradebook.db, or --db) for every graded student's
test scores and late penalty, and GRADING/results/*.json for the diagnoses
(autograder/judging/diagnosis.py), the messages of failed tests and the submissions that
could not be graded, and writes to DIR:

* `index.html`: one page, no script (its Content-Security-Policy forbids them), the
  charts embedded: a table with a row per student (score, points per graded function,
  lateness, what stopped the notebook), offered in several orders; a histogram of the
  scores (inline SVG); for each graded function, the students with full marks, part of
  the points, none, and those who did not attempt it; the known and unknown mistakes,
  each with the tests it lost; the submissions that could not be graded, and why;
* `functions.png`: the points per graded function, as a chart;
* `mistakes.png`: how many students made each catalogued mistake (the diagnoses);
* `report.json`: the same numbers, for a program.

A function is *not attempted* when it is still the stub it was given: each of its tests
failed on the stub (its message names NotImplementedError, or says the function "is not
written yet", autograder/reporting/summary.py's STUB_FAILURES) and its code, where grading
kept it, is the stub (`summary.is_stub`). It is counted apart from wrong answers, and never
among the unknown mistakes.

Unknown mistakes (a function that lost points and behaves like no catalogued answer) are
grouped by behaviour: students whose answers give the same values on the function's
probes, to the probes' tolerance, make one group. Each group is shown with its size, the
tests its students lost and one example of the code, anonymized (comments and docstrings
left out), from which an instructor can write a new catalogue entry. Students are named
only with `--names`: without it, the table's rows are numbered by score, and a reason a
submission could not be graded is shown with the student's id and file name hidden.
"""

import base64
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.judging import catalogue, diagnosis
from autograder import paths
from autograder.records.gradebook import COURSE_ID
from autograder.records.lateness import how_late
from autograder.reporting.summary import STUB_FAILURES, is_stub


@dataclass
class Group:
    """Students whose unknown mistake in one function behaves the same on its probes."""
    function: str
    behaviour: list
    students: list = field(default_factory=list)
    example: str = ""
    lost: dict = field(default_factory=dict)  # test -> how many of the group lost points in it


@dataclass
class Student:
    """One student's row of the class table."""
    id: str
    graded: bool
    score: float = 0.0  # the late penalty taken off
    max_score: float = 0.0
    points: dict = field(default_factory=dict)  # function -> (earned, possible)
    not_attempted: list = field(default_factory=list)  # functions still as given
    diagnoses: dict = field(default_factory=dict)  # function -> id of the catalogued mistake
    unknown: list = field(default_factory=list)  # functions that lost points like no catalogued mistake
    penalty: float = 0.0
    seconds_late: float = 0.0
    problems: list = field(default_factory=list)  # what stopped the notebook (a time limit, a dead kernel)
    reason: str = ""  # why it could not be graded
    source: str = ""  # the file handed in, as grading recorded it

    @property
    def percent(self):
        return 100.0 * self.score / self.max_score if self.max_score else 0.0


@dataclass
class ClassReport:
    assignment: str
    students: list  # graded students, sorted
    functions: dict  # function -> {"full": n, "partial": n, "none": n, "not_attempted": n}
    mistakes: dict  # (function, id) -> [students]
    explanations: dict  # id -> explanation
    groups: list  # [Group], largest first
    roster: list = field(default_factory=list)  # [Student]: every student, graded or not, by id
    tests_of: dict = field(default_factory=dict)  # function -> its test cells, in notebook order
    lost: dict = field(default_factory=dict)  # (function, id) -> {test: how many lost points in it}
    max_score: float = 0.0

    @property
    def graded(self):
        return [s for s in self.roster if s.graded]

    @property
    def not_graded(self):
        return [s for s in self.roster if not s.graded]

    def histogram(self):
        """[(label, count)]: the graded students by score, in tenths of the maximum (the
        last tenth, 90 to 100%, less full marks), then full marks."""
        counts = [0] * 11
        for student in self.graded:
            percent = student.percent
            counts[10 if percent >= 100 - 1e-9 else min(9, max(0, int(percent // 10)))] += 1
        labels = [f"{10 * i}\u2013{10 * i + 9}%" for i in range(10)] + ["100%"]
        return list(zip(labels, counts))

    def as_json(self, names=False):
        ranked = _by_score(self.graded)
        return {
            "assignment": self.assignment,
            "students": len(self.students),
            "max_score": self.max_score,
            "functions": self.functions,
            "mistakes": [{"function": f, "id": i, "count": len(s), "lost": self.lost.get((f, i), {}),
                          **({"students": s} if names else {})}
                         for (f, i), s in self.mistakes.items()],
            "unknown": [{"function": g.function, "size": len(g.students), "example": g.example, "lost": g.lost,
                         **({"students": g.students} if names else {})} for g in self.groups],
            "histogram": [{"scores": label, "students": count} for label, count in self.histogram()],
            "table": [{**({"student": s.id} if names else {}), "score": s.score, "max_score": s.max_score,
                       "points": {f: list(p) for f, p in s.points.items()}, "not_attempted": s.not_attempted,
                       "diagnoses": s.diagnoses, "unknown": s.unknown, "penalty": s.penalty,
                       "seconds_late": s.seconds_late, "problems": s.problems} for s in ranked],
            "not_graded": [{**({"student": s.id} if names else {}),
                            "reason": s.reason if names else _hidden(s.reason, s)} for s in self.not_graded],
        }


def _test_scores(db_url, assignment):
    """student -> ({test cell: (score, max_score)}, late penalty, seconds late) of every
    submission in the class gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    scores = {}
    with Gradebook(db_url, course_id=COURSE_ID) as gradebook:
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission(assignment, student.id)
            except MissingEntry:
                continue
            tests = {}
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    if grade.max_score and grade.max_score > 0:
                        tests[grade.name] = (float(grade.score or 0.0), float(grade.max_score))
            scores[student.id] = (tests, float(submission.late_submission_penalty or 0.0),
                                  float(submission.total_seconds_late or 0.0))
    return scores


def _results(grading, assignment):
    """student -> the result grading recorded (results/STUDENT.json), graded or not."""
    found = {}
    for path in sorted((Path(grading) / "results").glob("*.json")):
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(result, dict) and result.get("assignment") == assignment and result.get("student"):
            found[result["student"]] = result
    return found


def stub_failure(message):
    """Whether a failed test's message is what a test says of an untouched stub."""
    return any(said in str(message or "") for said in STUB_FAILURES)


def not_attempted(tests, scores, messages, code=None):
    """Whether a function is still the stub it was given: it has tests, none earned a
    point, each failed on the stub (`stub_failure`), and its code, where known, is a stub."""
    return (bool(tests) and all(scores.get(t, (0.0, 0.0))[0] <= 0 and stub_failure(messages.get(t)) for t in tests)
            and (not code or is_stub(code)))


def _hidden(text, student):
    """`text` with the student's id and file name hidden (a report without --names)."""
    hidden = str(text)
    for name in sorted({student.source, Path(student.source).name if student.source else "", student.id},
                       key=len, reverse=True):
        if name:
            hidden = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", "(student)", hidden)
    return hidden


def _by_score(students):
    return sorted(students, key=lambda s: (-s.percent, s.id))


def build(assignment, grading, db_url=None, solutions=paths.SOLUTIONS):
    """The ClassReport of `assignment` graded into the folder `grading`."""
    grading = Path(grading)
    db_url = db_url or f"sqlite:///{(grading / 'gradebook.db').resolve()}"
    (source,) = paths.assignment_notebooks(assignment, solutions)
    tests_of = catalogue.tests_of(nbformat.read(source, as_version=4))
    results = _results(grading, assignment)
    # A submission that could not be graded has a 0 in the gradebook, and status "error".
    scores = {student: recorded for student, recorded in _test_scores(db_url, assignment).items()
              if (results.get(student) or {}).get("status") != "error"}
    students = sorted(scores)
    order = list(tests_of)
    roster = []
    for student in students:
        tests, penalty, seconds_late = scores[student]
        result = results.get(student) or {}
        messages = result.get("messages") or {}
        unknown = result.get("unknown_mistakes") or {}
        row = Student(student, True, penalty=penalty, seconds_late=seconds_late,
                      problems=list(result.get("problems") or []), source=str(result.get("source", "")))
        for function, function_tests in tests_of.items():
            got = [tests.get(test, (0.0, 0.0)) for test in function_tests]
            row.points[function] = (sum(g for g, _ in got), sum(p for _, p in got))
            if not_attempted(function_tests, tests, messages, (unknown.get(function) or {}).get("code")):
                row.not_attempted.append(function)
        row.max_score = sum(p for _, p in row.points.values())
        row.score = max(0.0, sum(e for e, _ in row.points.values()) - penalty)
        row.diagnoses = {f: i for f, i in sorted((result.get("diagnoses") or {}).items())
                         if f not in row.not_attempted}
        row.unknown = [f for f in order if f in unknown and f not in row.not_attempted]
        roster.append(row)
    for student, result in results.items():
        if student not in scores:  # recorded, but it could not be graded
            roster.append(Student(student, False, max_score=float(result.get("max_score") or 0.0),
                                  reason=str(result.get("message") or "no reason recorded"),
                                  problems=list(result.get("problems") or []),
                                  source=str(result.get("source", ""))))
    roster.sort(key=lambda s: s.id)
    by_id = {s.id: s for s in roster}

    functions = {}
    for function, tests in tests_of.items():
        counts = {"full": 0, "partial": 0, "none": 0, "not_attempted": 0}
        for student in students:
            row = by_id[student]
            earned, possible = row.points[function]
            counts["not_attempted" if function in row.not_attempted else
                   "full" if earned >= possible else "partial" if earned > 0 else "none"] += 1
        functions[function] = counts
    explanations = {}
    if catalogue.catalogue_path(assignment).exists():
        explanations = {a.id: a.explanation for a in catalogue.load(assignment)}
    probes = diagnosis.load_probes(assignment) if catalogue.catalogue_path(assignment).exists() else {}

    def lost_by(function, group):
        lost = {}
        for test in tests_of.get(function, []):
            count = 0
            for student in group:
                got, top = scores[student][0].get(test, (0.0, 0.0))
                count += got < top
            if count:
                lost[test] = count
        return lost

    mistakes, groups = {}, []
    for student in students:
        row, result = by_id[student], results.get(student) or {}
        for function, mistake in row.diagnoses.items():
            mistakes.setdefault((function, mistake), []).append(student)
        for function in sorted(row.unknown):
            unknown = result["unknown_mistakes"][function]
            tolerance = probes.get(function)
            rtol, atol = (tolerance.rtol, tolerance.atol) if tolerance else (1e-6, 1e-9)
            for group in groups:
                if group.function == function and diagnosis.same(unknown["behaviour"], group.behaviour, rtol, atol):
                    group.students.append(student)
                    break
            else:
                groups.append(Group(function, unknown["behaviour"], [student], unknown.get("code", "")))
    mistakes = dict(sorted(mistakes.items(), key=lambda item: (-len(item[1]), order.index(item[0][0])
                                                                if item[0][0] in order else 0, item[0][1])))
    groups.sort(key=lambda g: (-len(g.students), order.index(g.function) if g.function in order else 0))
    for group in groups:
        group.lost = lost_by(group.function, group.students)
    lost = {key: lost_by(key[0], who) for key, who in mistakes.items()}
    max_score = max([s.max_score for s in roster if s.graded] or [sum(
        float(c.get("metadata", {}).get("nbgrader", {}).get("points", 0) or 0)
        for c in nbformat.read(source, as_version=4).cells
        if c.get("metadata", {}).get("nbgrader", {}).get("grade"))])
    return ClassReport(assignment, students, functions, mistakes, explanations, groups, roster, tests_of, lost,
                       max_score)


# -- charts --------------------------------------------------------------------------------

def _functions_chart(report, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    names = list(report.functions)[::-1]
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(names) + 1.6), dpi=110)
    left = [0] * len(names)
    for kind, colour, label in (("full", "#2e7d32", "full marks"), ("partial", "#f9a825", "part of the points"),
                                ("none", "#c62828", "no points"), ("not_attempted", "#8a8a8a", "not attempted")):
        values = [report.functions[n].get(kind, 0) for n in names]
        ax.barh(names, values, left=left, color=colour, label=label)
        for y, (x, v) in enumerate(zip(left, values)):
            if v:
                ax.text(x + v / 2, y, str(v), ha="center", va="center", color="white", fontsize=9)
        left = [a + b for a, b in zip(left, values)]
    ax.set_xlabel("students")
    ax.set_ylabel("graded function")
    ax.set_title(f"{report.assignment}: points per graded function ({len(report.students)} students)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.5 / (len(names) + 1)), ncol=4, fontsize=8,
              frameon=False)
    ax.set_xlim(0, max(1, len(report.students)))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _mistakes_chart(report, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    labels = [f"{function}: {mistake}" for function, mistake in report.mistakes][::-1]
    counts = [len(students) for students in report.mistakes.values()][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.45 * max(1, len(labels)) + 1.6), dpi=110)
    if labels:
        ax.barh(labels, counts, color="#c77700")
        for y, count in enumerate(counts):
            ax.text(count, y, f" {count}", va="center", fontsize=9)
        ax.set_xlim(0, max(counts) * 1.15 + 0.5)
    else:
        ax.text(0.5, 0.5, "no student's answer behaves like a catalogued mistake", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_yticks([])
    ax.set_xlabel("students")
    ax.set_ylabel("catalogued mistake")
    ax.set_title(f"{report.assignment}: catalogued mistakes found")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# -- the page ------------------------------------------------------------------------------

PAGE_POLICY = ("default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; img-src data:; "
               "form-action 'none'; base-uri 'none'")

# The student table is sorted without a script (the policy forbids them): the page holds
# one copy of the table per order, each a section with an id; a link to `#order-...` (the
# order's name above the table, or a column's heading) shows that copy (`:target`) and
# hides the others. The default order comes last in the page, so that a chosen order,
# before it, can hide it with `:target ~`: no `:has()`, which older browsers lack.
STYLE = """
body { font-family: system-ui, sans-serif; font-size: 15px; line-height: 1.45; margin: 0; color: #222; }
main { max-width: 1200px; margin: 0 auto; padding: 1em 1.2em 3em; }
h1 { font-size: 1.6em; line-height: 1.2; overflow-wrap: anywhere; }
h2 { margin-top: 1.8em; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.35em 0.7em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.n, th.n { text-align: right; }
img { max-width: 100%; height: auto; }
h3 code, p code { overflow-wrap: anywhere; }
td code, th code { white-space: nowrap; }
td.what { min-width: 16em; max-width: 34em; }
ul.lost li { white-space: nowrap; }
.stack { display: flex; width: 12em; height: 1.05em; margin-top: 0.2em; background: #f4f4f4; }
.stack span { display: block; height: 100%; }
.key { display: inline-block; width: 0.75em; height: 0.75em; margin-right: 0.3em; }
.stack .full, .key.full { background: #2e7d32; } .stack .partial, .key.partial { background: #f9a825; }
.stack .none, .key.none { background: #c62828; } .stack .not_attempted, .key.not_attempted { background: #8a8a8a; }
.scroll { overflow-x: auto; max-width: 100%; }
.scroll table { margin: 0; }
.note { color: #555; }
.order { display: none; }
.order:target, .order.default { display: block; }
.order:target ~ .order.default { display: none; }
.orders { margin: 0.4em 0; }
.orders a, th a { color: #0b57a4; }
.orders b { padding: 0 0.15em; }
table.students { font-size: 14px; }
table.students td, table.students th { padding: 0.3em 0.45em; white-space: nowrap; }
table.students th:first-child, table.students td:first-child { position: sticky; left: 0; background: #fff;
  box-shadow: 1px 0 0 #ddd; }
table.students th:first-child { background: #f4f4f4; }
table.students td.notes { white-space: normal; max-width: 24em; }
td.full { background: #e8f3e8; }
td.partial { background: #fdf3dc; }
td.none { background: #f9e2e2; }
td.na { background: #eee; color: #555; }
table.students td.ungraded { background: #eee; color: #444; white-space: normal; overflow-wrap: anywhere; }
.reason { max-width: 44em; }
td small { display: block; color: #555; font-size: 0.8em; }
table.histogram { width: 100%; max-width: 40em; }
table.histogram td { border: 0; padding: 0.15em 0.5em; white-space: nowrap; }
table.histogram td.bar { width: 100%; min-width: 8em; }
.bar span { display: block; height: 1.05em; background: #4f7cac; min-width: 1px; }
.bar span.empty { background: transparent; }
pre.code { background: #f6f6f6; padding: 0.6em; white-space: pre-wrap; overflow-wrap: anywhere;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
pre.code .line { display: block; }
.group { border-left: 4px solid #c77700; padding-left: 0.8em; margin: 1em 0 1.6em; }
ul.lost { margin: 0.2em 0 0.6em; padding-left: 1.2em; }
@media (max-width: 600px) {
  body { font-size: 14px; }
  main { padding: 0.6em 0.7em 2em; }
  th, td { padding: 0.3em 0.45em; }
  .chart { display: none; }  /* its text would be 4 px: the tables below say the same */
  .reason { max-width: 17em; }  /* within the screen, the table scrolled or not */
  /* a table of text, row by row: each row a block, its cells one under the other */
  table.stacked, table.stacked tbody, table.stacked tr, table.stacked td { display: block; }
  table.stacked thead { display: none; }
  table.stacked tr { border-bottom: 1px solid #ddd; padding: 0.4em 0; }
  table.stacked td { border: 0; padding: 0.1em 0; text-align: left; max-width: none; min-width: 0; }
  table.stacked td[data-label]::before { content: attr(data-label); color: #555; }
  table.stacked td:first-child { font-weight: 600; }
}
"""


def _image(path):
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


e = html.escape


def code_block(code):
    """A code example whose wrapped lines keep their indentation: each line a block of its
    own with a hanging indent four characters deeper than the line's own indentation, so
    that a line too long for the screen continues inside its block, not at the margin.
    Its text is the code, unchanged."""
    lines = []
    for line in str(code).expandtabs(4).split("\n"):
        hang = len(line) - len(line.lstrip(" ")) + 4
        lines.append(f'<span class="line" style="padding-left:{hang}ch;text-indent:-{hang}ch">{e(line)}\n</span>')
    return f'<pre class="code">{"".join(lines)}</pre>'


def _points(value):
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _lost(lost, size):
    if not lost:
        return "<span class='note'>none recorded</span>"
    return "<ul class='lost'>" + "".join(
        f"<li><code>{e(test)}</code> ({count} of {size})</li>" for test, count in lost.items()) + "</ul>"


def _histogram(report):
    bins = report.histogram()[::-1]  # full marks first
    top = max([count for _, count in bins] + [1])
    rows = "".join(
        f"<tr><td class='n'>{e(label)}</td><td class='bar'><span class='{'' if count else 'empty'}' "
        f"style='width:{100 * count / top:.1f}%'></span></td><td class='n'>{count}</td></tr>"
        for label, count in bins)
    return (f"<table class='histogram' aria-label='Students by score'><thead><tr><th class='n'>score</th><th>"
            f"</th><th class='n'>students</th></tr></thead><tbody>{rows}</tbody></table>")


ORDERS = {"score-desc": "score, highest first", "score-asc": "score, lowest first", "name": "student",
          "late": "lateness, latest first"}


def _orders(report, names):
    """order id -> (its name, the students in that order). Students not graded come last."""
    graded, ungraded = report.graded, sorted(report.not_graded, key=lambda s: s.id)
    orders = {"score-desc": _by_score(graded) + ungraded,
              "score-asc": sorted(graded, key=lambda s: (s.percent, s.id)) + ungraded}
    if names:
        orders["name"] = sorted(report.roster, key=lambda s: s.id)
    orders["late"] = sorted(graded, key=lambda s: (-s.seconds_late, -s.percent, s.id)) + ungraded
    named = {key: ORDERS[key] for key in orders}
    for index, function in enumerate(report.tests_of):
        def weakest(s, function=function):
            earned, possible = s.points.get(function, (0.0, 0.0))
            return (function not in s.not_attempted, earned / possible if possible else 1.0, s.percent, s.id)
        orders[f"f{index}"] = sorted(graded, key=weakest) + ungraded
        named[f"f{index}"] = f"{function}, fewest points first"
    return {key: (named[key], students) for key, students in orders.items()}


def _student_table(report, names):
    functions = list(report.tests_of)
    labels = {s.id: (s.id if names else f"student {i + 1}")
              for i, s in enumerate(_by_score(report.graded) + sorted(report.not_graded, key=lambda s: s.id))}
    orders = _orders(report, names)
    column_order = {"student": "name" if names else None, "score": "score-desc", "late": "late",
                    **{f: f"f{i}" for i, f in enumerate(functions)}}

    def heading(key, text, current, numeric=False, title=""):
        target = column_order.get(key)
        if target == "score-desc" and current == "score-desc":
            target = "score-asc"
        sort = ""
        if current == column_order.get(key) or (key == "score" and current == "score-asc"):
            sort = " aria-sort='descending'" if current in ("score-desc", "late") else " aria-sort='ascending'"
            text += " \u25bc" if current in ("score-desc", "late") else " \u25b2"
        inner = f"<a href='#order-{target}'>{text}</a>" if target else text
        titled = f" title='{e(title)}'" if title else ""
        return f"<th{' class=n' if numeric else ''}{sort}{titled}>{inner}</th>"

    def cells(student):
        if not student.graded:
            reason = student.reason if names else _hidden(student.reason, student)
            return (f"<td class='ungraded' colspan='{len(functions) + 2}'><div class='reason'>not graded: "
                    f"{e(reason)}</div></td>"
                    f"<td class='notes'>{e('; '.join(student.problems))}</td>")
        out = [f"<td class='n'>{_points(student.score)} / {_points(student.max_score)}</td>"]
        for function in functions:
            earned, possible = student.points.get(function, (0.0, 0.0))
            text = f"{_points(earned)} / {_points(possible)}"
            if function in student.not_attempted:
                out.append(f"<td class='na'>{text}<small>not attempted</small></td>")
                continue
            kind = "full" if earned >= possible else "partial" if earned > 0 else "none"
            note = (f"<small>{e(student.diagnoses[function])}</small>" if function in student.diagnoses else
                    "<small>unknown mistake</small>" if function in student.unknown else "")
            out.append(f"<td class='{kind}'>{text}{note}</td>")
        late = (f"{e(how_late(student.seconds_late))}"
                + (f"<small>\u2212{_points(student.penalty)} points</small>" if student.penalty else "")
                ) if student.seconds_late > 0 else ""
        out.append(f"<td>{late}</td><td class='notes'>{e('; '.join(student.problems))}</td>")
        return "".join(out)

    sections = []
    for key, (name, students) in orders.items():
        choices = " \u00b7 ".join(f"<b>{e(text)}</b>" if other == key else f"<a href='#order-{other}'>{e(text)}</a>"
                                   for other, (text, _) in orders.items() if not other.startswith("f"))
        head = (heading("student", "student", key) + heading("score", "score", key, numeric=True)
                + "".join(heading(f, f"<code>{e(f)}</code>", key, title=f"{f}: fewest points first")
                          for f in functions)
                + heading("late", "late", key) + "<th>notes</th>")
        body = "".join(f"<tr><td>{e(labels[s.id])}</td>{cells(s)}</tr>" for s in students)
        if key.startswith("f"):
            choices += f" \u00b7 <b>{e(name)}</b>"
        sections.append((key, f"<section class='order{' default' if key == 'score-desc' else ''}' "
                              f"id='order-{key}'><p class='orders'>Order: {choices}</p>"
                              f"<div class='scroll'><table class='students'><thead><tr>{head}</tr></thead>"
                              f"<tbody>{body}</tbody></table></div></section>"))
    sections.sort(key=lambda item: item[0] == "score-desc")  # the default order last (see STYLE)
    return "".join(html for _, html in sections)


def _stack(counts):
    """A function's students as one bar: full marks, part, none, not attempted."""
    total = sum(counts.values()) or 1
    return "<div class='stack' aria-hidden='true'>" + "".join(
        f"<span class='{kind}' style='width:{100 * counts.get(kind, 0) / total:.1f}%'></span>"
        for kind in ("full", "partial", "none", "not_attempted")) + "</div>"


def render(report, out, names=False):
    """Write index.html, functions.png, mistakes.png and report.json to `out`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _functions_chart(report, out / "functions.png")
    _mistakes_chart(report, out / "mistakes.png")
    (out / "report.json").write_text(json.dumps(report.as_json(names), indent=1))
    rows = "".join(
        f"<tr><td><code>{e(f)}</code>{_stack(c)}</td><td class='n'>{c['full']}</td><td class='n'>{c['partial']}</td>"
        f"<td class='n'>{c['none']}</td><td class='n'>{c.get('not_attempted', 0)}</td></tr>"
        for f, c in report.functions.items())
    mistakes = "".join(
        f"<tr><td><code>{e(f)}</code></td><td class='what'><code>{e(i)}</code><br>"
        f"{e(report.explanations.get(i, ''))}"
        + (f"<br><span class='note'>{e(', '.join(s))}</span>" if names else "") + "</td>"
        f"<td class='n' data-label='students: '>{len(s)}</td>"
        f"<td data-label='tests they lost:'>{_lost(report.lost.get((f, i), {}), len(s))}</td></tr>"
        for (f, i), s in report.mistakes.items())
    groups = "".join(
        f"<div class='group'><h3>{len(g.students)} student{'s' if len(g.students) != 1 else ''}: "
        f"<code>{e(g.function)}</code></h3>"
        + (f"<p class='note'>{e(', '.join(g.students))}</p>" if names else "")
        + f"<p>Tests lost:</p>{_lost(g.lost, len(g.students))}"
        + f"<p>One of their answers, anonymized:</p>{code_block(g.example)}</div>"
        for g in report.groups)
    graded, ungraded = report.graded, report.not_graded
    late = [s for s in graded if s.seconds_late > 0]
    attempted_none = [s for s in graded if s.not_attempted and len(s.not_attempted) == len(report.tests_of)]
    percents = sorted(s.percent for s in graded)
    median = (percents[len(percents) // 2] if len(percents) % 2 else
              (percents[len(percents) // 2 - 1] + percents[len(percents) // 2]) / 2) if percents else 0.0
    facts = [f"{len(graded)} graded"]
    if ungraded:
        facts.append(f"<a href='#not-graded'>{len(ungraded)} could not be graded</a>")
    if late:
        facts.append(f"{len(late)} late")
    if attempted_none:
        facts.append(f"{len(attempted_none)} handed in the notebook as it was given")
    not_graded = "".join(
        f"<tr><td>{e(s.id if names else f'student {len(graded) + i + 1}')}</td>"
        f"<td>{e(s.reason if names else _hidden(s.reason, s))}</td></tr>"
        for i, s in enumerate(sorted(ungraded, key=lambda s: s.id)))
    not_attempted = sum(c.get("not_attempted", 0) for c in report.functions.values())
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{PAGE_POLICY}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(report.assignment)}: class report</title>
<style>{STYLE}</style>
</head>
<body>
<main>
<h1>{e(report.assignment)}: class report</h1>
<p>{len(report.roster)} students: {', '.join(facts)}. {'' if names else 'Students are not named (run with --names to name them).'}</p>
<p>Median score: {_points(round(median * report.max_score / 100, 2))} of {_points(report.max_score)} points ({_points(round(median, 1))}%).</p>
<h2 id="scores">Scores</h2>
<p class="note">Graded students by their score (the late penalty taken off), in tenths of the full marks.</p>
{_histogram(report)}
<h2 id="students">Students</h2>
<p class="note">Each graded function's points; a function that lost points is labelled with the catalogued
mistake it behaves like, <i>unknown mistake</i>, or <i>not attempted</i> (still the stub it was given).
Choose an order above the table, or follow a column's heading.</p>
<div class="orders-box">{_student_table(report, names)}</div>
<h2 id="functions">Points per graded function</h2>
<img class="chart" src="{_image(out / 'functions.png')}" alt="For each graded function, the students with full marks, part of the points, none, and those who did not attempt it.">
<div class="scroll"><table><thead><tr><th>graded function</th><th class='n'><span class='key full'></span>full marks</th><th class='n'><span class='key partial'></span>part</th><th class='n'><span class='key none'></span>none</th><th class='n'><span class='key not_attempted'></span>not attempted</th></tr></thead>
<tbody>{rows}</tbody></table></div>
<p class="note">Not attempted: the function is still the stub it was given ({not_attempted} in all); it is
counted apart from the wrong answers and never among the unknown mistakes.</p>
<h2 id="known">Known mistakes</h2>
<p class="note">A function that lost points is called on its probes; its answer behaves like a catalogued
mistake when it gives that mistake's values on every probe. The probes are public (in the catalogue), so an
answer can give a mistake's values on purpose: a label never changes a score, and a count is of answers that
behaved so.</p>
<img class="chart" src="{_image(out / 'mistakes.png')}" alt="How many students made each catalogued mistake.">
<div class="scroll"><table class="stacked"><thead><tr><th>graded function</th><th>mistake, and what it is</th><th class='n'>students</th><th>tests they lost</th></tr></thead>
<tbody>{mistakes or '<tr><td colspan="4">none</td></tr>'}</tbody></table></div>
<h2 id="unknown">Unknown mistakes, grouped by behaviour</h2>
<p class="note">Answers that lost points and behave like no catalogued mistake (functions not attempted left
out); students whose answers give the same values on the probes form one group. A large group is a
candidate for a new catalogue entry.</p>
{groups or '<p>none</p>'}
<h2 id="not-graded">Submissions that could not be graded</h2>
{f'<div class="scroll"><table class="stacked"><thead><tr><th>student</th><th>why</th></tr></thead><tbody>{not_graded}</tbody></table></div>' if ungraded else '<p>none</p>'}
</main>
</body>
</html>
"""
    (out / "index.html").write_text(page)
    return out / "index.html"
