"""What a class's grading tells people: each student's feedback page (its summary, in a
browser at 1280 px and at phone width) and the instructor's class report
(`python -m autograder report`), from one generated class graded once.

The class of chapter 1 mixes right answers, catalogued mistakes and mistakes the
catalogue does not know, some shared by several students who wrote them differently: the
report must count exactly what the class holds, and group the unknown mistakes by
behaviour. Screenshots go to `_build/feedback_screenshots/` (or `$FEEDBACK_SCREENSHOTS`).
"""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from autograder.judging import catalogue
from conftest import REPO, Submissions, by_student, run_autograder, student_and_reference

ASSIGNMENT = "soft_lookup"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = Path(os.environ.get("FEEDBACK_SCREENSHOTS", REPO / "_build" / "feedback_screenshots"))

# Mistakes the catalogue does not have, each written in more than one way.
SCALED_BY_LOG = [
    "def scaled_dot_score(q, K):\n    return dot_score(q, K) / math.log(np.shape(K)[-1])\n",
    "def scaled_dot_score(q, K):\n    # my own version\n    d = K.shape[-1]\n"
    "    return (q[..., None, :] * K).sum(axis=-1) / np.log(d)\n",
    'def scaled_dot_score(q, K):\n    """Scores, scaled."""\n    scale = 1.0 / math.log(K.shape[-1])\n'
    "    return scale * dot_score(q, K)\n",
]
WINDOW_DOUBLED = [
    "def local_window_mask(n_q, n_k, centers, width):\n"
    "    keys = np.arange(n_k)[None, :]\n"
    "    return np.abs(keys - np.asarray(centers).reshape(n_q, 1)) <= 2 * width\n",
    "def local_window_mask(n_q, n_k, centers, width):\n"
    "    mask = np.zeros((n_q, n_k), dtype=bool)\n"
    "    for i, c in enumerate(centers):\n"
    "        for j in range(n_k):\n"
    "            mask[i, j] = abs(j - c) <= width + width\n"
    "    return mask\n",
]


def attend_halved(reference):
    """The reference attend with its context halved (a mistake of its own)."""
    return reference.replace("    return context, weights", "    return 0.5 * context, weights")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class, graded once: {"out": grading folder, "lines": JSON lines by student, "class": what
    each student handed in (function -> (kind, id or group))}."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed: the grader refuses to run student code")
    folder = tmp_path_factory.mktemp("class")
    student, _, reference = student_and_reference(ASSIGNMENT)
    known = {a.id: a for a in catalogue.load(ASSIGNMENT)}
    batch = Submissions(folder / "submitted")
    plan = {}

    def hand_in(name, **answers):
        code = dict(reference)
        for function, (kind, label, text) in answers.items():
            code[function] = text
        plan[name] = {function: (kind, label) for function, (kind, label, _) in answers.items()}
        batch.save(name, catalogue.fill(student, code))

    def known_answer(answer_id):
        answer = known[answer_id]
        return {answer.function: (answer.verdict, answer_id, answer.code)}

    hand_in("ada")
    hand_in("ben")
    hand_in("cleo", **known_answer("attend-log-sum-exp"))
    for index, code in enumerate(SCALED_BY_LOG):
        hand_in(f"log{index}", scaled_dot_score=("unknown", "scaled-by-log", code))
    for index, code in enumerate(WINDOW_DOUBLED):
        hand_in(f"window{index}", local_window_mask=("unknown", "window-doubled", code))
    hand_in("half", attend=("unknown", "attend-halved", attend_halved(reference["attend"])))
    hand_in("mean0", **known_answer("attend-mean-context"))
    hand_in("mean1", **known_answer("attend-mean-context"), **known_answer("scaled-no-scale"))
    hand_in("noscale", **known_answer("scaled-no-scale"))
    hand_in("offbyone", **known_answer("window-off-by-one"))
    code, lines, log = run_autograder("grade", ASSIGNMENT, *batch.values(), "--out", folder / "grading",
                                      "--no-progress")
    assert code == 0, log[-3000:]
    return {"out": folder / "grading", "lines": by_student(lines), "class": plan, "folder": folder}


@pytest.fixture(scope="module")
def report(graded):
    out = graded["folder"] / "report"
    code, _, log = run_autograder("report", ASSIGNMENT, "--grading", graded["out"], "--out", out, "--names")
    assert code == 0, log[-3000:]
    return out


def test_each_student_is_diagnosed_with_their_own_mistakes(graded):
    for name, handed in graded["class"].items():
        line = graded["lines"][name]
        assert line["status"] == "graded", line["message"]
        expected = {f: label for f, (kind, label) in handed.items() if kind == "wrong"}
        assert line["diagnoses"] == expected, (name, line["diagnoses"])
        unknown = {f for f, (kind, _) in handed.items() if kind == "unknown"}
        assert set(line["unknown_mistakes"]) == unknown, (name, line["unknown_mistakes"].keys())
        for function, found in line["unknown_mistakes"].items():
            assert "#" not in found["code"] and '"""' not in found["code"], found["code"]
        assert (line["score"] == line["max_score"]) == (not expected and not unknown), name


def test_the_report_counts_exactly_the_class(graded, report):
    data = json.loads((report / "report.json").read_text())
    plan, lines = graded["class"], graded["lines"]
    assert data["students"] == len(plan)
    for function, counts in data["functions"].items():
        wrong = {n for n, handed in plan.items() if handed.get(function, ("right",))[0] != "right"}
        assert counts["full"] == len(plan) - len(wrong), function
        tests = [t for t in lines["ada"]["tests"]
                 if t in catalogue.tests_of(_source())[function]]
        none = {n for n in wrong if sum(lines[n]["tests"][t][0] for t in tests) == 0}
        assert (counts["partial"], counts["none"]) == (len(wrong - none), len(none)), function
    mistakes = {(m["function"], m["id"]): sorted(m["students"]) for m in data["mistakes"]}
    assert mistakes == {("attend", "attend-mean-context"): ["mean0", "mean1"],
                        ("scaled_dot_score", "scaled-no-scale"): ["mean1", "noscale"],
                        ("local_window_mask", "window-off-by-one"): ["offbyone"]}
    groups = sorted((g["function"], g["size"], sorted(g["students"])) for g in data["unknown"])
    assert groups == [("attend", 1, ["half"]), ("local_window_mask", 2, ["window0", "window1"]),
                      ("scaled_dot_score", 3, ["log0", "log1", "log2"])]
    examples = {g["function"]: g["example"] for g in data["unknown"]}
    assert "/ math.log(np.shape(K)[-1])" in examples["scaled_dot_score"] or "log" in examples["scaled_dot_score"]
    assert "# my own version" not in examples["scaled_dot_score"]
    for chart in ("functions.png", "mistakes.png"):
        assert (report / chart).stat().st_size > 5000, chart


def test_students_are_named_only_when_asked(graded, report):
    out = graded["folder"] / "anonymous"
    code, _, log = run_autograder("report", ASSIGNMENT, "--grading", graded["out"], "--out", out)
    assert code == 0, log[-3000:]
    page = (out / "index.html").read_text()
    data = json.loads((out / "report.json").read_text())
    for name in graded["class"]:
        assert not re.search(rf"\b{name}\b", page), name
    assert all("students" not in m for m in data["mistakes"] + data["unknown"])
    assert "mean0" in (report / "index.html").read_text()


def _source():
    import nbformat

    from autograder import paths

    (source,) = paths.assignment_notebooks(ASSIGNMENT)
    return nbformat.read(source, as_version=4)


def test_each_page_summarizes_every_graded_function_with_its_points(graded):
    functions = list(catalogue.tests_of(_source()))
    for name, line in graded["lines"].items():
        page = (graded["out"] / "feedback" / f"{name}.html").read_text()
        table = page[page.index('<table class="summary">'):page.index("</table>")]
        rows = re.findall(r"<td><code>([^<]+)</code></td>\s*<td class=\"points\">([\d.]+) / ([\d.]+)</td>", table)
        assert [r[0] for r in rows] == functions, name
        for function, earned, possible in rows:
            tests = catalogue.tests_of(_source())[function]
            assert float(earned) == sum(line["tests"][t][0] for t in tests), (name, function)
            assert float(possible) == sum(line["tests"][t][1] for t in tests), (name, function)
        for function, mistake in line["diagnoses"].items():
            assert f"Your `{function}` behaves like a known mistake ({mistake}): " in page.replace("&#x60;", "`")


def _browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"no Chromium at {CHROMIUM}")
    return sync_api


def _open(browser, path, width, shot):
    tab = browser.new_page(viewport={"width": width, "height": 900})
    problems = []
    tab.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    tab.on("pageerror", lambda e: problems.append(str(e)))
    tab.on("dialog", lambda d: (problems.append(f"dialog {d.message}"), d.dismiss()))
    tab.goto(Path(path).as_uri())
    tab.wait_for_load_state("load")
    tab.wait_for_timeout(500)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SCREENSHOTS / shot), full_page=False)
    print(f"screenshot: {SCREENSHOTS / shot}")
    return tab, problems


@pytest.mark.parametrize("width", [1280, 390])
def test_a_feedback_page_reads_well_in_a_browser(graded, width):
    """The page of a student with a known mistake: no error, nothing wider than the screen,
    the summary first with the diagnosis, the instructions' math typeset."""
    sync_api = _browser()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--proxy-server=http://127.0.0.1:9"])
        try:
            tab, problems = _open(browser, graded["out"] / "feedback" / "mean1.html", width, f"mean1-{width}.png")
            tab.wait_for_function("document.querySelectorAll('mjx-container').length > 0", timeout=20_000)
            assert problems == [], problems
            assert tab.evaluate("document.documentElement.scrollWidth") <= width
            wide = tab.evaluate("""() => [...document.querySelectorAll('table.summary, .test-message, pre')]
                .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).length""")
            assert wide == 0, "something is wider than the screen"
            summary = tab.locator("table.summary")
            assert summary.bounding_box()["y"] < 400, "the summary comes first"
            text = summary.inner_text()
            assert "behaves like a known mistake (attend-mean-context)" in text
            assert "behaves like a known mistake (scaled-no-scale)" in text
            assert tab.locator("mjx-container").count() > 5
            assert tab.locator("mjx-container [data-mml-node=merror]").count() == 0, "TeX that MathJax could not read"
            tab.locator("a[id=test_attend]").scroll_into_view_if_needed()
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            tab.screenshot(path=str(SCREENSHOTS / f"mean1-{width}-test.png"))
        finally:
            browser.close()


def test_the_report_opens_in_a_browser(report):
    sync_api = _browser()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--proxy-server=http://127.0.0.1:9"])
        try:
            tab, problems = _open(browser, report / "index.html", 1280, "class-report.png")
            assert problems == [], problems
            loaded = tab.evaluate("[...document.images].map(i => i.complete && i.naturalWidth > 0)")
            assert loaded == [True, True]
            assert tab.evaluate("document.documentElement.scrollWidth") <= 1280
            tab.screenshot(path=str(SCREENSHOTS / "class-report-full.png"), full_page=True)
        finally:
            browser.close()
