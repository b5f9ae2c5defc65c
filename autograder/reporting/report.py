"""The class report: what to re-teach, from what grading stored.

    python -m autograder report ASSIGNMENT --out DIR [--grading GRADING] [--names]

reads the class gradebook (GRADING/gradebook.db, or --db) for every graded student's
test scores, and GRADING/results/*.json for the diagnoses (autograder/judging/diagnosis.py),
and writes to DIR:

* `index.html`: one page, no script, the charts embedded;
* `functions.png`: for each graded function, how many students got full marks, part of
  its points, none;
* `mistakes.png`: how many students made each catalogued mistake (the diagnoses);
* `report.json`: the same numbers, for a program.

Unknown mistakes (a function that lost points and behaves like no catalogued answer) are
grouped by behaviour: students whose answers give the same values on the function's
probes, to the probes' tolerance, make one group. Each group is shown with its size and
one example of the code, anonymized (comments and docstrings left out), from which an
instructor can write a new catalogue entry. Students are named only with `--names`.
"""

import base64
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.judging import catalogue, diagnosis
from autograder import paths
from autograder.records.gradebook import COURSE_ID


@dataclass
class Group:
    """Students whose unknown mistake in one function behaves the same on its probes."""
    function: str
    behaviour: list
    students: list = field(default_factory=list)
    example: str = ""


@dataclass
class ClassReport:
    assignment: str
    students: list  # graded students, sorted
    functions: dict  # function -> {"full": n, "partial": n, "none": n}
    mistakes: dict  # (function, id) -> [students]
    explanations: dict  # id -> explanation
    groups: list  # [Group], largest first

    def as_json(self, names=False):
        return {
            "assignment": self.assignment,
            "students": len(self.students),
            "functions": self.functions,
            "mistakes": [{"function": f, "id": i, "count": len(s), **({"students": s} if names else {})}
                         for (f, i), s in self.mistakes.items()],
            "unknown": [{"function": g.function, "size": len(g.students), "example": g.example,
                         **({"students": g.students} if names else {})} for g in self.groups],
        }


def _test_scores(db_url, assignment):
    """student -> {test cell: (score, max_score)} of every submission in the class gradebook."""
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
            scores[student.id] = tests
    return scores


def _results(grading, assignment):
    found = {}
    for path in sorted((Path(grading) / "results").glob("*.json")):
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if result.get("assignment") == assignment and result.get("status") == "graded":
            found[result["student"]] = result
    return found


def build(assignment, grading, db_url=None, solutions=paths.SOLUTIONS):
    """The ClassReport of `assignment` graded into the folder `grading`."""
    grading = Path(grading)
    db_url = db_url or f"sqlite:///{(grading / 'gradebook.db').resolve()}"
    (source,) = paths.assignment_notebooks(assignment, solutions)
    tests_of = catalogue.tests_of(nbformat.read(source, as_version=4))
    scores = _test_scores(db_url, assignment)
    results = _results(grading, assignment)
    students = sorted(scores)
    functions = {}
    for function, tests in tests_of.items():
        counts = {"full": 0, "partial": 0, "none": 0}
        for student in students:
            got = [scores[student].get(test, (0.0, 0.0)) for test in tests]
            earned, possible = sum(g for g, _ in got), sum(p for _, p in got)
            counts["full" if earned >= possible else "partial" if earned > 0 else "none"] += 1
        functions[function] = counts
    explanations = {}
    if catalogue.catalogue_path(assignment).exists():
        explanations = {a.id: a.explanation for a in catalogue.load(assignment)}
    probes = diagnosis.load_probes(assignment) if catalogue.catalogue_path(assignment).exists() else {}
    mistakes, groups = {}, []
    for student in students:
        result = results.get(student, {})
        for function, mistake in sorted(result.get("diagnoses", {}).items()):
            mistakes.setdefault((function, mistake), []).append(student)
        for function, unknown in sorted(result.get("unknown_mistakes", {}).items()):
            tolerance = probes.get(function)
            rtol, atol = (tolerance.rtol, tolerance.atol) if tolerance else (1e-6, 1e-9)
            for group in groups:
                if group.function == function and diagnosis.same(unknown["behaviour"], group.behaviour, rtol, atol):
                    group.students.append(student)
                    break
            else:
                groups.append(Group(function, unknown["behaviour"], [student], unknown.get("code", "")))
    order = list(tests_of)
    mistakes = dict(sorted(mistakes.items(), key=lambda item: (-len(item[1]), order.index(item[0][0])
                                                                if item[0][0] in order else 0, item[0][1])))
    groups.sort(key=lambda g: (-len(g.students), order.index(g.function) if g.function in order else 0))
    return ClassReport(assignment, students, functions, mistakes, explanations, groups)


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
                                ("none", "#c62828", "no points")):
        values = [report.functions[n][kind] for n in names]
        ax.barh(names, values, left=left, color=colour, label=label)
        for y, (x, v) in enumerate(zip(left, values)):
            if v:
                ax.text(x + v / 2, y, str(v), ha="center", va="center", color="white", fontsize=9)
        left = [a + b for a, b in zip(left, values)]
    ax.set_xlabel("students")
    ax.set_ylabel("graded function")
    ax.set_title(f"{report.assignment}: points per graded function ({len(report.students)} students)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.5 / (len(names) + 1)), ncol=3, fontsize=8,
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

STYLE = """
body { font-family: system-ui, sans-serif; font-size: 15px; line-height: 1.45; margin: 0; color: #222; }
main { max-width: 1100px; margin: 0 auto; padding: 1em 1.2em 3em; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.35em 0.7em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.n { text-align: right; }
img { max-width: 100%; height: auto; }
pre { background: #f6f6f6; padding: 0.6em; white-space: pre-wrap; overflow-wrap: anywhere; }
.group { border-left: 4px solid #c77700; padding-left: 0.8em; margin: 1em 0 1.6em; }
.note { color: #555; }
"""


def _image(path):
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


def render(report, out, names=False):
    """Write index.html, functions.png, mistakes.png and report.json to `out`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _functions_chart(report, out / "functions.png")
    _mistakes_chart(report, out / "mistakes.png")
    (out / "report.json").write_text(json.dumps(report.as_json(names), indent=1))
    e = html.escape
    rows = "".join(
        f"<tr><td><code>{e(f)}</code></td><td class='n'>{c['full']}</td><td class='n'>{c['partial']}</td>"
        f"<td class='n'>{c['none']}</td></tr>" for f, c in report.functions.items())
    mistakes = "".join(
        f"<tr><td><code>{e(f)}</code></td><td><code>{e(i)}</code></td><td class='n'>{len(s)}</td>"
        f"<td>{e(report.explanations.get(i, ''))}"
        + (f"<br><span class='note'>{e(', '.join(s))}</span>" if names else "") + "</td></tr>"
        for (f, i), s in report.mistakes.items())
    groups = "".join(
        f"<div class='group'><h3>{len(g.students)} student{'s' if len(g.students) != 1 else ''}: "
        f"<code>{e(g.function)}</code></h3>"
        + (f"<p class='note'>{e(', '.join(g.students))}</p>" if names else "")
        + f"<p>One of their answers, anonymized:</p><pre>{e(g.example)}</pre></div>"
        for g in report.groups)
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
<p>{len(report.students)} graded students. {'' if names else 'Students are not named (run with --names to name them).'}</p>
<h2>Points per graded function</h2>
<img src="{_image(out / 'functions.png')}" alt="For each graded function, the students with full marks, part of the points, and none.">
<table><thead><tr><th>graded function</th><th>full marks</th><th>part</th><th>none</th></tr></thead>
<tbody>{rows}</tbody></table>
<h2>Known mistakes</h2>
<p class="note">A function that lost points is called on its probes; its answer behaves like a catalogued
mistake when it gives that mistake's values on every probe.</p>
<img src="{_image(out / 'mistakes.png')}" alt="How many students made each catalogued mistake.">
<table><thead><tr><th>graded function</th><th>mistake</th><th>students</th><th>what it is</th></tr></thead>
<tbody>{mistakes or '<tr><td colspan="4">none</td></tr>'}</tbody></table>
<h2>Unknown mistakes, grouped by behaviour</h2>
<p class="note">Answers that lost points and behave like no catalogued mistake; students whose answers give the
same values on the probes form one group. A large group is a candidate for a new catalogue entry.</p>
{groups or '<p>none</p>'}
</main>
</body>
</html>
"""
    (out / "index.html").write_text(page)
    return out / "index.html"
