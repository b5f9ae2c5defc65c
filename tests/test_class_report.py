"""What a class's grading tells people: each student's feedback page (its summary, in a
browser at 1280 px and at phone width) and the instructor's class report
(`python -m autograder report`), from one generated class graded once.

The class of chapter 1 mixes right answers, catalogued mistakes and mistakes the
catalogue does not know, some shared by several students who wrote them differently: the
report must count exactly what the class holds, and group the unknown mistakes by
behaviour. A class of thirty of chapter 6, handed in through nbgrader's exchange layout
with due date and late penalty, adds what an instructor meets in a real class: the
untouched release, notebooks half written, late submissions and two that cannot be
graded; its report is read at 1280 and 390 px. Screenshots go to
`_build/feedback_screenshots/` (or `$FEEDBACK_SCREENSHOTS`).
"""

import html
import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder import paths
from autograder.judging import catalogue
from autograder.records import lateness
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


# -- a class of thirty, chapter 6 ---------------------------------------------------------------
#
# What an instructor opens first after grading: the report of a class of thirty, graded in one
# batch, each student's notebook handed in through nbgrader's exchange layout (with the time of
# submission). The class: right answers (the reference and the catalogue's right answers),
# catalogued mistakes, mistakes the catalogue does not know (one written two ways), the
# untouched release, notebooks half written, late submissions and two that cannot be graded.

THIRTY = "transformer_block"
DUE = "2026-12-01T17:00+00:00"
ON_TIME = "2026-12-01 15:00:00.000000 UTC"
LATE = {"late_a": ("2026-12-02 18:00:00.000000 UTC", 25 * 3600),  # 1 day 1 h: two days started, 20 %
        "late_b": ("2026-12-01 17:30:00.000000 UTC", 30 * 60)}  # 30 min: one day started, 10 %
GELU = [  # FeedForward with GELU instead of ReLU, written two ways (one unknown mistake)
    "class FeedForward(nn.Module):\n"
    "    def __init__(self, d_model, d_ff, dropout=0.0):\n"
    "        super().__init__()\n"
    "        self.linear1 = nn.Linear(d_model, d_ff)\n"
    "        self.linear2 = nn.Linear(d_ff, d_model)\n"
    "        self.dropout = nn.Dropout(dropout)\n\n"
    "    def forward(self, x):\n"
    "        return self.linear2(self.dropout(torch.nn.functional.gelu(self.linear1(x))))\n",
    "class FeedForward(nn.Module):\n"
    "    def __init__(self, d_model, d_ff, dropout=0.0):\n"
    "        super().__init__()\n"
    "        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)\n"
    "        self.act, self.dropout = nn.GELU(), nn.Dropout(dropout)\n\n"
    "    def forward(self, x):\n"
    "        # my version: GELU is smoother\n"
    "        h = self.act(self.linear1(x))\n"
    "        return self.linear2(self.dropout(h))\n",
]
# generate that reads the logits of the first position: an unknown mistake with a long line.
GENERATE_FIRST = (
    "def generate(model, prompt, n_new):\n"
    "    tokens = prompt.clone()\n"
    "    if n_new <= 0:\n"
    "        return tokens\n"
    "    logits, caches = model(prompt, caches=None, start=0)\n"
    "    for step in range(n_new):\n"
    "        next_token = torch.argmax(logits[:, 0], dim=-1, keepdim=True).to(dtype=tokens.dtype, device=tokens.device)\n"
    "        tokens = torch.cat([tokens, next_token], dim=1)\n"
    "        if step + 1 < n_new:\n"
    "            logits, caches = model(next_token, caches=caches, start=tokens.shape[1] - 1)\n"
    "    return tokens\n")
# The headline mistake, written as the reference is (need_weights=False): the course mask handed
# to nn.MultiheadAttention without inverting it.
ENCODER_MASK_AS_IS = ("blocked = None if mask is None else ~mask", "blocked = mask")
WRONG = ["ff-no-relu", "ff-dropout-ignored", "enc-residual-after-norm", "enc-mask-not-inverted",
         "dec-masks-not-inverted", "dec-cross-attention-on-x", "csa-no-causal-mask", "csa-cache-wrong-axis",
         "gen-without-cache", "gen-argmax-wrong-axis"]
RIGHT = ["ff-sequential", "enc-float-mask", "dec-written-out", "csa-token-loop", "gen-prefill-in-loop"]


@pytest.fixture(scope="module")
def thirty(tmp_path_factory):
    """The class of thirty, graded in one batch and reported with and without names:
    {"plan": student -> {function: kind} ("wrong", "unknown", "stub"), "untouched",
    "not_graded": {student: words its reason says}, "lines", "out", "named", "anonymous"}."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed: the grader refuses to run student code")
    folder = tmp_path_factory.mktemp("thirty")
    submitted = folder / "submitted"
    student, _, reference = student_and_reference(THIRTY)
    known = {a.id: a for a in catalogue.load(THIRTY)}
    functions = list(reference)
    plan = {}

    def hand_in(name, notebook, stamp=ON_TIME):
        mine = submitted / name / THIRTY
        mine.mkdir(parents=True)
        nbformat.write(notebook, mine / f"{THIRTY}.ipynb")
        (mine / "timestamp.txt").write_text(stamp + "\n")

    def answers(name, stamp=ON_TIME, **code):
        plan[name] = {function: kind for function, (kind, _) in code.items()}
        hand_in(name, catalogue.fill(student, {**reference, **{f: text for f, (_, text) in code.items()}}), stamp)

    for index in range(3):
        answers(f"right{index}")
    for index, answer_id in enumerate(RIGHT):
        answers(f"alt{index}", **{known[answer_id].function: ("right", known[answer_id].code)})
    for index, answer_id in enumerate(WRONG):
        answers(f"known{index}", **{known[answer_id].function: ("wrong", known[answer_id].code)})
    answers("two_known", **{known[i].function: ("wrong", known[i].code) for i in ("ff-no-relu", "gen-without-cache")})
    for index, code in enumerate(GELU):
        answers(f"gelu{index}", FeedForward=("unknown", code))
    answers("first_logits", generate=("unknown", GENERATE_FIRST))
    answers("mask_as_is", EncoderBlock=("wrong or unknown", reference["EncoderBlock"].replace(*ENCODER_MASK_AS_IS)))
    for name, (stamp, _) in LATE.items():
        answers(name, stamp, **({"CausalSelfAttention": ("wrong", known["csa-no-causal-mask"].code)}
                                if name == "late_b" else {}))
    for index in range(2):  # the release, untouched
        plan[f"untouched{index}"] = {function: "stub" for function in functions}
        hand_in(f"untouched{index}", student)
    half = {f: reference[f] for f in ("FeedForward", "EncoderBlock")}
    plan["half_done"] = {function: "stub" for function in functions if function not in half}
    hand_in("half_done", catalogue.fill(student, half))
    other = nbformat.read(paths.student_version_folder(ASSIGNMENT) / f"{ASSIGNMENT}.ipynb", as_version=4)
    hand_in("wrong_notebook", other)
    hand_in("teatime", catalogue.fill(student, reference), "around teatime")
    not_graded = {"wrong_notebook": "none of the assignment's answer cells", "teatime": "timestamp.txt"}
    assert len(plan) + len(not_graded) == 30
    out = folder / "grading"
    code, lines, log = run_autograder("grade", THIRTY, submitted, "--out", out, "--due", DUE, "--late-penalty", "10",
                                      "--no-progress")
    assert code == 0, log[-3000:]
    reports = {}
    for kind, flags in (("named", ["--names"]), ("anonymous", [])):
        code, _, log = run_autograder("report", THIRTY, "--grading", out, "--out", folder / kind, *flags)
        assert code == 0, log[-3000:]
        reports[kind] = folder / kind
    return {"plan": plan, "not_graded": not_graded, "lines": by_student(lines), "out": out, **reports,
            "functions": functions}


def _table(report, order="score-desc"):
    """The rows of the student table in one order: [[cell text]], header first."""
    page = (report / "index.html").read_text()
    section = page[page.index(f"id='order-{order}'"):]
    section = section[:section.index("</section>")]
    rows = re.findall(r"<tr>(.*?)</tr>", section, re.S)

    def text(cell):
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).replace("\u25b2", "").replace("\u25bc", "").split())

    return [[text(cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)] for row in rows]


def test_the_class_table_has_each_students_score_points_and_lateness(thirty):
    """One row per student: the score the grader recorded (late penalty taken off), each graded
    function's points as the gradebook has them, and how late."""
    header, *rows = _table(thirty["named"], "name")
    assert header[:2] == ["student", "score"] and header[2:2 + len(thirty["functions"])] == thirty["functions"]
    assert [r[0] for r in rows] == sorted(thirty["lines"])
    tests_of = catalogue.tests_of(nbformat.read(paths.assignment_notebooks(THIRTY)[0], as_version=4))
    for row in rows:
        line = thirty["lines"][row[0]]
        if line["status"] != "graded":
            continue
        assert row[1] == f"{line['score']:g} / {line['max_score']:g}", row
        for function, cell in zip(thirty["functions"], row[2:]):
            earned = sum(line["tests"][t][0] for t in tests_of[function])
            possible = sum(line["tests"][t][1] for t in tests_of[function])
            assert cell.startswith(f"{earned:g} / {possible:g}"), (row[0], function, cell)
        late = row[2 + len(thirty["functions"])]
        if row[0] in LATE:
            assert late.startswith(lateness.how_late(LATE[row[0]][1])) and f"\u2212{line['penalty']:g}" in late
        else:
            assert late == "", row


def test_the_class_table_sorts_without_a_script(thirty):
    """The page forbids scripts; the table comes in orders, each a section a link shows: by
    score both ways, by name, by lateness, by each function; the default (by score) last."""
    page = (thirty["named"] / "index.html").read_text()
    assert "script-src 'none'" in page and "<script" not in page.lower()
    orders = re.findall(r"<section class='order[^']*' id='order-([\w-]+)'", page)
    assert set(orders) == {"score-desc", "score-asc", "name", "late"} | {f"f{i}" for i in range(5)}
    assert orders[-1] == "score-desc" and "class='order default' id='order-score-desc'" in page
    for order in orders:
        assert f"href='#order-{order}'" in page, order
    graded = {n: l for n, l in thirty["lines"].items() if l["status"] == "graded"}
    by_score = [r[0] for r in _table(thirty["named"], "score-desc")[1:]]
    assert by_score[:len(graded)] == sorted(graded, key=lambda n: (-graded[n]["score"], n))
    assert set(by_score[len(graded):]) == set(thirty["not_graded"])
    assert [r[0] for r in _table(thirty["named"], "score-asc")[1:len(graded) + 1]] == sorted(
        graded, key=lambda n: (graded[n]["score"], n))
    assert [r[0] for r in _table(thirty["named"], "late")[1:3]] == ["late_a", "late_b"]
    weakest = [r[0] for r in _table(thirty["named"], "f0")[1:4]]  # FeedForward: not attempted first
    assert weakest[:2] == ["untouched0", "untouched1"] and weakest[2] != "half_done"


def test_the_histogram_counts_each_graded_student_once_by_score(thirty):
    data = json.loads((thirty["named"] / "report.json").read_text())
    bins = {b["scores"]: b["students"] for b in data["histogram"]}
    graded = [l for l in thirty["lines"].values() if l["status"] == "graded"]
    assert sum(bins.values()) == len(graded) == data["students"]
    assert bins["100%"] == sum(1 for l in graded if l["score"] == l["max_score"])
    assert bins["0\u20139%"] == sum(1 for l in graded if l["score"] < 0.1 * l["max_score"])
    page = (thirty["named"] / "index.html").read_text()
    assert "<table class='histogram'" in page


def test_not_attempted_is_counted_apart_and_never_an_unknown_mistake(thirty):
    """A function still as released (NotImplementedError stubs) is not attempted: counted in its
    own column, never among the wrong answers with no points, never in an unknown group."""
    data = json.loads((thirty["named"] / "report.json").read_text())
    stubs = {f: {n for n, p in thirty["plan"].items() if p.get(f) == "stub"} for f in thirty["functions"]}
    for function, counts in data["functions"].items():
        assert counts["not_attempted"] == len(stubs[function]), function
        assert sum(counts.values()) == data["students"]
    for group in data["unknown"]:
        assert not set(group["students"]) & stubs[group["function"]], group
        assert "NotImplementedError" not in group["example"]
    rows = {r["student"]: r for r in data["table"]}
    for name, planned in thirty["plan"].items():
        assert sorted(rows[name]["not_attempted"]) == sorted(f for f, k in planned.items() if k == "stub"), name
    assert {"FeedForward", "EncoderBlock"}.isdisjoint(rows["half_done"]["not_attempted"])


def test_each_mistake_group_lists_the_tests_it_lost(thirty):
    data = json.loads((thirty["named"] / "report.json").read_text())
    tests_of = catalogue.tests_of(nbformat.read(paths.assignment_notebooks(THIRTY)[0], as_version=4))
    assert data["mistakes"] and data["unknown"]
    for entry in data["mistakes"] + data["unknown"]:
        students = entry["students"]
        expected = {t: sum(1 for s in students if thirty["lines"][s]["tests"][t][0] < thirty["lines"][s]["tests"][t][1])
                    for t in tests_of[entry["function"]]}
        assert entry["lost"] == {t: c for t, c in expected.items() if c}, entry
        assert entry["lost"], f"{entry['function']}: a mistake that lost no test"
    gelu = [g for g in data["unknown"] if g["function"] == "FeedForward"]
    assert [sorted(g["students"]) for g in gelu] == [["gelu0", "gelu1"]]
    page = (thirty["named"] / "index.html").read_text()
    first = next(iter(data["unknown"][0]["lost"]))
    assert f"<p>Tests lost:</p><ul class='lost'><li><code>{first}</code>" in page


def test_submissions_that_could_not_be_graded_are_listed_with_why(thirty):
    for kind in ("named", "anonymous"):
        data = json.loads((thirty[kind] / "report.json").read_text())
        assert len(data["not_graded"]) == len(thirty["not_graded"])
        reasons = " | ".join(entry["reason"] for entry in data["not_graded"])
        for name, words in thirty["not_graded"].items():
            assert words in reasons, (kind, name)
            if kind == "anonymous":
                assert not re.search(rf"\b{name}\b", reasons), name
        page = (thirty[kind] / "index.html").read_text()
        assert "<h2 id=\"not-graded\">Submissions that could not be graded</h2>" in page
        assert "could not be graded</a>" in page


def test_an_anonymous_report_names_no_student(thirty):
    page = (thirty["anonymous"] / "index.html").read_text()
    data = (thirty["anonymous"] / "report.json").read_text()
    for name in thirty["lines"]:
        assert not re.search(rf"\b{name}\b", page), name
        assert not re.search(rf"\b{name}\b", data), name


def test_code_examples_keep_their_indentation_when_lines_wrap():
    """Each line of a code example is a block with a hanging indent deeper than its own, and
    the example's text is the code, unchanged."""
    from autograder.reporting.report import code_block

    code = "def f(x):\n    if x:\n        return x + 1  # a long line\n\n    return 0"
    block = code_block(code)
    lines = re.findall(r'<span class="line" style="padding-left:(\d+)ch;text-indent:-(\d+)ch">(.*?)</span>',
                       block, re.S)
    assert html.unescape("".join(text for _, _, text in lines)) == code + "\n"
    for (pad, indent, text), line in zip(lines, code.split("\n")):
        assert pad == indent and int(pad) == len(line) - len(line.lstrip()) + 4, line


@pytest.mark.parametrize("width", [1280, 390])
def test_the_class_report_reads_at_desktop_and_phone_width(thirty, width):
    """No script error, nothing wider than the screen (the tables scroll in their own box), a
    wrapped line of code starts right of its own line's indentation, and a heading's link
    shows the table in its order."""
    sync_api = _browser()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--proxy-server=http://127.0.0.1:9"])
        try:
            tab, problems = _open(browser, thirty["named"] / "index.html", width, f"thirty-{width}.png")
            assert problems == [], problems
            assert tab.evaluate("document.documentElement.scrollWidth") <= width
            tab.screenshot(path=str(SCREENSHOTS / f"thirty-{width}-full.png"), full_page=True)
            assert tab.evaluate("""() => [...document.querySelectorAll('.scroll')]
                .every(e => e.getBoundingClientRect().right <= window.innerWidth + 1)""")
            visible = tab.evaluate("[...document.querySelectorAll('section.order')].filter(s => s.offsetParent)"
                                   ".map(s => s.id)")
            assert visible == ["order-score-desc"]
            tab.click("#order-score-desc thead a[href='#order-late']")
            visible = tab.evaluate("[...document.querySelectorAll('section.order')].filter(s => s.offsetParent)"
                                   ".map(s => s.id)")
            assert visible == ["order-late"]
            assert tab.locator("#order-late tbody tr td").first.inner_text() == "late_a"
            lines = tab.evaluate("""() => [...document.querySelectorAll('pre.code .line')].map(l => {
                const r = document.createRange(); r.selectNodeContents(l);
                const boxes = [...r.getClientRects()].filter(b => b.width > 0);
                const top = Math.min(...boxes.map(b => b.top));
                return {text: l.textContent, left: l.getBoundingClientRect().left,
                        pad: parseFloat(getComputedStyle(l).paddingLeft),
                        continued: boxes.filter(b => b.top > top + 1).map(b => b.left)};
            })""")
            wrapped = [line for line in lines if line["continued"]]
            if width == 390:
                assert wrapped, "a long line of code wraps on a phone"
            for line in wrapped:  # each continuation starts at the hanging indent, right of the line's own
                indent = len(line["text"]) - len(line["text"].lstrip(" "))
                assert line["pad"] > 0 and min(line["continued"]) >= line["left"] + line["pad"] - 1, line
                assert line["pad"] >= (indent + 4) * 7, line  # four characters deeper (7 px or more each)
        finally:
            browser.close()
