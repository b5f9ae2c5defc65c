"""Feedback pages (autograder/reporting/feedback.py), rendered from a small notebook built here, as
nbgrader's GenerateFeedback renders them (its template and exporter config), without a
grading run: no hidden test source, nothing from the submission that runs in a browser,
a Content-Security-Policy, and a short page instead when rendering takes too long; what
the page says (title, student, date; each failure once; "not attempted" once per
function left as given) and what it weighs (MathJax only with math). One end-to-end test
grades one soft_lookup submission."""

import datetime
import html
import html.parser
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory as NbCourseDirectory
from traitlets.config.loader import PyFileConfigLoader

from autograder.judging import catalogue
from autograder.reporting import feedback, summary
from autograder import paths
from conftest import by_student, run_autograder
from autograder.judging.course_directory import CourseDirectory
from autograder.reporting.feedback import FeedbackExporter

HIDDEN_MARKER = "SECRET_HIDDEN_MARKER_7f3a"
VISIBLE_MARKER = "VISIBLE_MARKER_2b9c"
FAILURE_MESSAGE = "FAILED_MESSAGE: answer(2) should be 4"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))

TEST_SOURCE = f"""\
assert answer(1) == 2, "answer(1) should be 2 {VISIBLE_MARKER}"
### BEGIN HIDDEN TESTS
assert answer(2) == 4, "{FAILURE_MESSAGE}"  # {HIDDEN_MARKER}
### END HIDDEN TESTS
assert answer(0) == 0
    ### BEGIN HIDDEN TESTS
    expected = {{"{HIDDEN_MARKER}": 1}}
    ### END HIDDEN TESTS"""

HOSTILE_MARKDOWN = """\
# A student's notes

<script>alert("markdown-script")</script>
<img src="x" onerror="alert('markdown-img')">
<svg onload="alert('markdown-svg')"><circle r="5"/></svg>
<iframe src="https://example.org/" srcdoc="<script>alert(5)</script>"></iframe>
<object data="x.swf"></object><embed src="x.swf"><form action="https://example.org/"><input name="q"></form>
<meta http-equiv="refresh" content="0;url=https://example.org/"><base href="https://example.org/">
[markdown link](javascript:alert('markdown-link'))
<a href="javascript:alert('raw-link')">raw link</a>
<a href="JaVaScRiPt&#x3a;alert('entity-link')">entity link</a>
<a href="files/javascript:alert('files-link')">files link</a>
<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">data link</a>
<a href="&#100;ata:text/html,<script>alert(1)</script>">entity data link</a>
<img src="data:text/html,x" alt="not an image">
<details><summary>kept summary</summary>KEPT_DETAILS_TEXT</details>

A [markdown link](javascript:alert('markdown-link')) and [another](  JAVASCRIPT:alert(1) "t").

Math stays as TeX: $\\sqrt{x}$.
"""


def _output(kind, data, **extra):
    return nbformat.v4.new_output(kind, data=data, **extra)


def hostile_outputs():
    return [
        _output("display_data", {"text/html": (
            "<b>BOLD_HTML_KEPT</b><script>alert('html-script')</script>"
            "<img src='x' onerror=\"alert('html-img')\"><iframe src=\"javascript:alert('html-iframe')\"></iframe>"
            "<a href=\"javascript:alert('html-link')\">html link</a><div onclick=\"alert(1)\" style=\"color: red\">div</div>"
            "<style>body { background: url(https://example.org/x.png) }</style>"
            "<table><thead><tr><th>TABLE_HEADER_KEPT</th></tr></thead><tbody><tr><td>1</td></tr></tbody></table>")}),
        _output("display_data", {"application/javascript": "alert('js-output')", "text/plain": "JS_FALLBACK_TEXT"}),
        _output("display_data", {"application/javascript": "alert('js-only')"}),
        _output("display_data", {"application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2},
                                 "text/plain": "WIDGET_FALLBACK_TEXT"}),
        _output("display_data", {"image/svg+xml": (
            '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(\'svg-output\')">'
            "<script>alert('svg-script')</script><circle r=\"4\"/></svg>")}),
        _output("display_data", {"text/markdown": (
            "**MARKDOWN_OUTPUT_KEPT** <script>alert('md-output')</script> "
            "[md link](javascript:alert('md-output-link')) <img src=x onerror=alert('md-output-img')> "
            "<img src=\"x\" onerror=\"alert('md-output-img2')\">")}),
        _output("execute_result", {"text/html": "<p>ISOLATED_HTML</p><script>alert('isolated')</script>"},
                metadata={"text/html": {"isolated": True}}, execution_count=3),
        _output("display_data", {"image/png": "iVBORw0KGgo="},
                metadata={"filenames": {"image/png": "https://example.org/beacon.png"}}),
        nbformat.v4.new_output("stream", name="stdout", text="<script>alert('stream')</script> STREAM_TEXT\n"),
    ]


def make_notebook():
    def meta(grade_id, **fields):
        return {"nbgrader": {"grade_id": grade_id, "locked": not fields.get("solution", False), "schema_version": 3,
                             "grade": False, "solution": False, "task": False, **fields}}

    cells = [
        nbformat.v4.new_markdown_cell("# Assignment\n\nWrite `answer(x)`: twice `x`.", metadata=meta("intro")),
        nbformat.v4.new_code_cell("def answer(x):\n    return x + 2 if x == 2 else 2 * x",
                                  metadata=meta("answer", solution=True), outputs=hostile_outputs(), execution_count=1),
        nbformat.v4.new_markdown_cell(HOSTILE_MARKDOWN),
        nbformat.v4.new_code_cell(TEST_SOURCE, metadata=meta("test_answer", grade=True, points=2), execution_count=2,
                                  outputs=[nbformat.v4.new_output(
                                      "error", ename="AssertionError", evalue=FAILURE_MESSAGE, traceback=[
                                          "\x1b[0;31m----------------------------------\x1b[0m",
                                          "\x1b[0;31mAssertionError\x1b[0m  Traceback (most recent call last)",
                                          f'----> 3 assert answer(2) == 4, "{FAILURE_MESSAGE}"  # {HIDDEN_MARKER}',
                                          f"\x1b[0;31mAssertionError\x1b[0m: {FAILURE_MESSAGE}"])]),
        nbformat.v4.new_code_cell("assert answer(3) == 6", metadata=meta("test_visible_only", grade=True, points=1),
                                  execution_count=3),
    ]
    nb = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "widgets": {"application/vnd.jupyter.widget-state+json": {
            "state": {"</script><script>alert('widget-state')</script>": {}}, "version_major": 2}},
    })
    for cell in cells:  # what nbgrader's GetGrades adds from the gradebook
        grading = cell.metadata["nbgrader"] if "nbgrader" in cell.metadata else {}
        if grading.get("grade"):
            grading["score"] = 0 if cell.outputs else grading["points"]
    nbformat.validate(nb)
    return nb


def make_exporter(**traits):
    """The exporter as nbgrader's GenerateFeedback configures it (template `feedback`,
    nbgrader's template folders), with its preprocessors except GetGrades (which reads
    the gradebook: the scores are in the notebook already)."""
    config = GenerateFeedback(coursedir=NbCourseDirectory()).config
    exporter = FeedbackExporter(config=config, **traits)
    exporter.register_preprocessor(CSSHTMLHeaderPreprocessor)
    return exporter


def resources():
    return {"nbgrader": {"notebook": "answer", "score": 1, "max_score": 3, "late_penalty": 0}}


def render(**traits):
    page, _ = make_exporter(**traits).from_notebook_node(make_notebook(), resources())
    return page


class Elements(html.parser.HTMLParser):
    """Every start tag of a page, with its attributes."""

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


@pytest.fixture(scope="module")
def page():
    return render()


def test_hidden_tests_are_not_shown(page):
    assert HIDDEN_MARKER not in page
    assert "BEGIN HIDDEN TESTS" not in page and "END HIDDEN TESTS" not in page
    assert page.count("(hidden tests: not shown)") == 2
    text = re.sub(r"<[^>]+>", "", page)
    assert VISIBLE_MARKER in text
    assert "assert answer(0) == 0" in text.replace("&#39;", "'")  # after the hidden block
    assert "assert answer(3) == 6" in text  # a test cell without hidden tests, whole


def test_a_failed_test_shows_its_message_without_traceback(page):
    assert f"AssertionError: {FAILURE_MESSAGE}" in page
    assert "Traceback (most recent call last)" not in page
    assert "----&gt; 3" not in page


def without_mathjax(page):
    """The page without the book's MathJax (the exporter's own scripts, allowed by hash):
    the rest must hold no script at all."""
    scripts, hashes = feedback.mathjax_scripts()
    assert page.count(scripts) == 1, "the book's MathJax, once, at the end of the body"
    assert page.index(scripts) > page.index("<body")
    assert f"script-src {hashes};" in page
    return page.replace(scripts, "")


def assert_no_active_markup(page):
    page = without_mathjax(page)
    assert "<script" not in page.lower()
    # in a tag (as text, escaped, "onerror=" is harmless: an unquoted attribute makes
    # the markdown parser escape a whole tag)
    assert not re.search(r"<[^<>]*\b(onerror|onload)\s*=", page)
    assert not re.search(r"""(?i)(href|src)\s*=\s*["']?\s*javascript""", page)
    body = page[page.index("<body"):]
    assert "<style" not in body  # the template's styles are in the head, the submission's nowhere
    for tag, attrs in Elements(page).tags:
        assert tag not in ("script", "iframe", "frame", "object", "embed", "svg", "math", "form", "input",
                           "base", "link"), (tag, attrs)
        if tag == "meta":
            assert set(attrs) <= {"charset", "http-equiv", "content", "name"}, attrs
            assert attrs.get("http-equiv", "content-security-policy").lower() == "content-security-policy", attrs
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name, value)
            if name in ("href", "src", "action", "formaction", "srcdoc", "data"):
                plain = re.sub(r"\s", "", value or "").lower()
                assert not plain.startswith(("javascript:", "vbscript:")), (tag, name, value)
                assert not (name == "href" and plain.startswith("data:")), (tag, name, value)
                assert tag == "img" or name == "href" and (plain.startswith(("#", "http")) or ":" not in plain), \
                    (tag, name, value)


def test_nothing_from_the_submission_can_run(page):
    assert_no_active_markup(page)
    # the images: embedded ones only, and the SVG as an image, never inline
    sources = [attrs.get("src", "") for tag, attrs in Elements(page).tags if tag == "img"]
    assert any(s.startswith("data:image/svg+xml;base64,") for s in sources)
    assert "https://example.org/beacon.png" not in page
    assert "widget-state" not in page and "application/vnd.jupyter.widget" not in page


def test_harmless_content_is_kept(page):
    for kept in ("BOLD_HTML_KEPT", "TABLE_HEADER_KEPT", "MARKDOWN_OUTPUT_KEPT", "ISOLATED_HTML", "JS_FALLBACK_TEXT",
                 "WIDGET_FALLBACK_TEXT", "STREAM_TEXT", "KEPT_DETAILS_TEXT", "kept summary", "A student's notes"):
        assert kept in page, kept
    assert "&lt;script&gt;alert(&#39;stream&#39;)" in page  # a printed tag is text
    assert "[application/javascript output: not shown in feedback]" in page
    assert "<th>TABLE_HEADER_KEPT</th>" in page and "<details>" in page
    assert 'style="color: red;"' in page
    assert "Test <code>test_answer</code>" in page
    # what nbconvert's exporter adds, done here with patterns
    assert 'alt="No description has been provided for this image"' in page


def test_the_page_forbids_scripts(page):
    metas = [attrs for tag, attrs in Elements(page).tags if tag == "meta" and "http-equiv" in attrs]
    assert [m["http-equiv"] for m in metas] == ["Content-Security-Policy"]
    policy = metas[0]["content"]
    # scripts: the book's MathJax only, named by the hashes of its two inline scripts
    sources = re.search(r"script-src ([^;]*);", policy).group(1).split()
    assert len(sources) == 2 and all(re.fullmatch(r"'sha256-[A-Za-z0-9+/=]{44}'", s) for s in sources), sources
    assert "default-src 'none'" in policy and "unsafe-eval" not in policy
    head = page[:page.index("<body")]
    assert head.index("Content-Security-Policy") < head.index("<style")


def test_hidden_tests_shown_when_the_instructor_asks():
    page = render(show_hidden_tests=True)
    assert HIDDEN_MARKER in page
    assert "Traceback (most recent call last)" in page
    assert "(hidden tests: not shown)" not in page
    assert "<script" not in without_mathjax(page).lower()  # still sanitized


def test_configure_feedback_reaches_the_exporter(tmp_path):
    course = CourseDirectory(tmp_path / "course")
    course.configure_feedback(show_hidden_tests=True, render_timeout=7)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course.root)).load_config()
    converter = GenerateFeedback(coursedir=NbCourseDirectory(config=config), config=config)
    exporter = FeedbackExporter(parent=converter, config=converter.config)  # as nbgrader makes it
    assert exporter.show_hidden_tests is True and exporter.render_timeout == 7
    assert exporter.template_name == "student_feedback"
    assert FeedbackExporter().show_hidden_tests is False


def test_released_source():
    source = "a = 1\n### BEGIN HIDDEN TESTS\nsecret\n### END HIDDEN TESTS\nb = 2\n  # BEGIN HIDDEN TESTS\nrest"
    assert feedback.released_source(source) == (
        "a = 1\n# (hidden tests: not shown)\nb = 2\n  # (hidden tests: not shown)")


def test_a_slow_page_gives_the_short_page(monkeypatch):
    def slow(markup):
        time.sleep(30)

    monkeypatch.setattr(feedback, "sanitize_html", slow)  # markdown cells take 30 s each
    previous = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    page, out = make_exporter(render_timeout=1).from_notebook_node(make_notebook(), resources())
    assert time.monotonic() - started < 5
    assert signal.getsignal(signal.SIGALRM) is previous and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert "could not be rendered within the time limit (1 s)" in page
    assert "<tr><td><code>test_answer</code></td><td>failed</td></tr>" in page
    assert "<tr><td><code>test_visible_only</code></td><td>passed</td></tr>" in page
    assert "Content-Security-Policy" in page and HIDDEN_MARKER not in page and "<script" not in page
    assert out["output_extension"] == ".html" and out["nbgrader"]["notebook"] == "answer"


def test_a_page_too_deep_to_render_gives_the_short_page(monkeypatch):
    def deep(markup):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(feedback, "sanitize_html", deep)
    page, _ = make_exporter().from_notebook_node(make_notebook(), resources())
    assert "could not be rendered (too deeply nested)" in page
    assert "<tr><td><code>test_answer</code></td><td>failed</td></tr>" in page


def test_outside_the_main_thread_the_page_renders_without_limit():
    pages = []
    worker = threading.Thread(target=lambda: pages.append(render(render_timeout=1)))
    worker.start()
    worker.join(60)
    assert len(pages) == 1 and "Test <code>test_answer</code>" in pages[0] and HIDDEN_MARKER not in pages[0]


def hostile_sizes_notebook():
    """A notebook whose content is slow to render as it is: deeply nested tags (html5lib,
    in bleach, takes time quadratic in their depth: 43 s for the markdown cell below, 9 s
    for the HTML output), a long code cell (pygments: 6 s per million characters), a long
    text full of colour codes (nbconvert's ansi2html: 20 s), and many markdown cells each
    just within the size of one rendered item."""
    nb = make_notebook()
    script = "<script>alert('big')</script><img src=x onerror=alert('big-img')>"
    nb.cells.append(nbformat.v4.new_markdown_cell(script + "<b><p>" * 40_000))
    nb.cells.append(nbformat.v4.new_code_cell('"<script>alert(1)</script>"\n' * 100_000, execution_count=4, outputs=[
        _output("display_data", {"text/html": "<div>" * 20_000 + script}),
        _output("display_data", {"text/html": "<div>" * 20_000 + script, "text/plain": "PLAIN_VERSION_SHOWN"}),
        _output("display_data", {"text/markdown": "> " * 100_000 + script}),
        nbformat.v4.new_output("stream", name="stdout", text="\x1b[1;31m<script>x</script>\x1b[0m" * 60_000),
    ]))
    nb.cells += [nbformat.v4.new_markdown_cell("<div>" * 1_990 + f"NESTED_{k} <img src=x onerror=alert({k})>")
                 for k in range(30)]
    nbformat.validate(nb)
    return nb


def test_content_too_costly_to_render_is_shown_as_text_within_the_time_limit():
    started = time.monotonic()
    page, _ = make_exporter(render_timeout=120).from_notebook_node(hostile_sizes_notebook(), resources())
    seconds = time.monotonic() - started
    assert "could not be rendered" not in page, "rendered without needing the time limit"
    assert seconds < 30, seconds  # about 2.5 s on two shared cores; 150 s or more before the bounds
    assert_no_active_markup(page)
    assert "Test <code>test_answer</code>" in page and HIDDEN_MARKER not in page
    # too large or too many tags: the beginning, escaped, and a note
    assert re.search(r"\[markdown of 24\d{4} characters not rendered in feedback", page)
    assert re.search(r"\[HTML of 10\d{4} characters not rendered in feedback", page)
    assert "&lt;script&gt;alert(&#x27;big&#x27;)" in page
    # an output with a plain-text version shows that instead
    assert "PLAIN_VERSION_SHOWN" in page
    # code past the page's budget for colours: escaped, without colours
    assert "&quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in page
    # printed text too long to convert its colour codes: escaped, without them
    assert "&lt;script&gt;x&lt;/script&gt;&lt;script&gt;" in page and "\x1b" not in page
    # items within the sizes are rendered (sanitized) until the page's budget is spent
    rendered = [k for k in range(30) if f"NESTED_{k} <img" in page]
    assert rendered and rendered == list(range(len(rendered))) and len(rendered) < 30, rendered
    assert len(re.findall(r"\[markdown of 99\d\d characters not rendered in feedback", page)) == 30 - len(rendered)


def test_in_a_browser_nothing_fires(page):
    """Optional: Chromium opens the page (and the same page with a script slipped past
    the sanitizer, which the policy must stop); no dialog, no script runs."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"no Chromium at {CHROMIUM}")
    injected = page.replace("</body>", "<script>alert('slipped'); document.title = 'RAN';</script>"
                                       "<img src=x onerror=\"alert('slipped-img')\"></body>", 1)
    with tempfile.TemporaryDirectory() as folder, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--proxy-server=http://127.0.0.1:9"])
        try:
            for name, markup in (("page", page), ("injected", injected)):
                path = Path(folder) / f"{name}.html"
                path.write_text(markup)
                tab = browser.new_page()
                dialogs, errors = [], []
                tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
                tab.on("pageerror", lambda e: errors.append(str(e)))
                tab.goto(path.as_uri())
                tab.wait_for_timeout(300)
                assert dialogs == [] and errors == [], (name, dialogs, errors)
                assert tab.title() == "Assignment: feedback"
                assert "Test test_answer" in tab.inner_text("body")
                tab.close()
        finally:
            browser.close()


def test_the_page_opens_with_a_summary_of_each_graded_function(tmp_path):
    """A table before the notebook: each graded function with its points, each failed test
    named with its message, and the known mistake that the grader's report names."""
    (tmp_path / "answer.json").write_text(json.dumps({"diagnosed": {"answer": {
        "id": "answer-adds-two", "explanation": "Adds 2 instead of doubling; multiply by 2."}}}))
    page = render(report_dir=str(tmp_path))
    body = page[page.index("<body"):]
    table = body[body.index('<table class="summary">'):body.index("</table>")]
    assert body.index('<table class="summary">') < body.index("Student's answer")
    assert "<code>answer</code>" in table and "1 / 3" in table
    assert f"<code>test_answer</code></a>:" in table and html.escape(f"AssertionError: {FAILURE_MESSAGE}") in table
    assert "test_visible_only" not in table  # it passed
    assert ("Your `answer` behaves like a known mistake (answer-adds-two): Adds 2 instead of doubling; "
            "multiply by 2.") in table
    # each test cell is named, its outcome and message beside its name
    heading = body[body.index('<a id="test_answer">'):body.index('<div class="panel-body">',
                                                                 body.index('<a id="test_answer">'))]
    assert "Test <code>test_answer</code>" in heading and "failed" in heading
    assert '<a href="#why-test_answer">why: in the summary</a>' in heading and "0 / 2 points" in heading
    # no report, or a function with full marks: no label
    assert "behaves like" not in render()
    (tmp_path / "answer.json").write_text(json.dumps({"diagnosed": {"test_visible_only": {
        "id": "x", "explanation": "y"}}}))
    assert "behaves like" not in render(report_dir=str(tmp_path))


# -- what the page says --------------------------------------------------------------

def test_each_failure_message_is_printed_once(page):
    """In the summary, with a link to the test; the test cell links back to it instead of
    repeating it, in its heading or as its error output."""
    assert page.count(FAILURE_MESSAGE) == 1
    body = page[page.index("<body"):]
    table = body[body.index('<table class="summary">'):body.index("</table>")]
    assert FAILURE_MESSAGE in table
    assert "output_error" not in body


def test_the_page_is_headed_by_the_title_the_student_and_the_date():
    """The first heading of the instructor's notebook, not the notebook's id."""
    nb = make_notebook()
    nb.cells[0].source = "# Assignment: doubling, *twice*\n\nWrite `answer(x)`: twice `x`."
    given = resources()
    given["nbgrader"].update(student="alice", assignment="answer_assignment")
    page, _ = make_exporter(graded_on="2026-11-26").from_notebook_node(nb, given)
    header = page[page.index("<header>"):page.index("</header>")]
    assert "<h1>Assignment: doubling, twice</h1>" in header
    assert '<strong class="student">alice</strong>' in header
    assert '<time datetime="2026-11-26">2026-11-26</time>' in header
    assert "Notebook <code>answer</code> (Score: 1.0 / 3.0)" in header
    assert "<title>Assignment: doubling, twice: feedback for alice</title>" in page
    # by default, the day it is rendered (grading renders it)
    before = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    page = render()
    after = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    assert f"graded on <time datetime=\"{before}\">" in page or f"<time datetime=\"{after}\">" in page
    # a heading the student wrote in a cell of their own is not the title
    nb = make_notebook()
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("# My notes"))
    page, _ = make_exporter().from_notebook_node(nb, resources())
    assert "<h1>Assignment</h1>" in page and "<h1>My notes</h1>" not in page


NOT_IMPLEMENTED = "your code raised NotImplementedError"


def attempts_notebook():
    """Three graded functions: `stubbed`, as given (three of its tests raised its
    NotImplementedError, one reads its code and says it is not written yet); `tried`, written but calling a helper left as a stub (its two
    tests raised NotImplementedError too); `broken`, as given, whose test failed on
    something else (a NameError)."""
    def meta(grade_id, **fields):
        return {"nbgrader": {"grade_id": grade_id, "locked": not fields.get("solution", False), "schema_version": 3,
                             "grade": False, "solution": False, "task": False, **fields}}

    def test(grade_id, ename, evalue):
        return nbformat.v4.new_code_cell(
            f'"""{grade_id}."""\nassert {grade_id.split("_")[1]}(2) == 4', execution_count=1,
            metadata=meta(grade_id, grade=True, points=1),
            outputs=[nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])])

    stub = 'def {}(x):\n    """Twice x."""\n    # YOUR CODE HERE\n    raise NotImplementedError()'
    cells = [
        nbformat.v4.new_markdown_cell("# Assignment: doubling\n\nWrite three functions.", metadata=meta("intro")),
        nbformat.v4.new_code_cell(stub.format("stubbed"), metadata=meta("stubbed", solution=True)),
        test("test_stubbed_value", "NotImplementedError", NOT_IMPLEMENTED),
        test("test_stubbed_shape", "AssertionError", "stubbed raised NotImplementedError () for arguments int."),
        test("test_stubbed_inputs", "NotImplementedError", NOT_IMPLEMENTED),
        test("test_stubbed_code", "AssertionError", "stubbed is not written yet: this test reads its code once it is."),
        nbformat.v4.new_code_cell("def tried(x):\n    return helper(x) * 2", metadata=meta("tried", solution=True)),
        test("test_tried_value", "NotImplementedError", NOT_IMPLEMENTED),
        test("test_tried_inputs", "NotImplementedError", NOT_IMPLEMENTED),
        nbformat.v4.new_code_cell(stub.format("broken"), metadata=meta("broken", solution=True)),
        test("test_broken_value", "NameError", "name 'np' is not defined"),
    ]
    nb = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}})
    for cell in cells:
        grading = cell.metadata["nbgrader"]
        if grading.get("grade"):
            grading["score"] = 0
    nbformat.validate(nb)
    return nb


NOT_ATTEMPTED = ("Not attempted: `stubbed` still raises NotImplementedError, as it was given, so its 4 tests fail "
                 "until you write it.")


def test_a_function_left_as_given_is_not_attempted_once():
    """Said once in the summary and once in the test list, instead of each test's
    NotImplementedError; the errors of a function with code written, and of a stub that
    failed on something else, are all shown."""
    page, _ = make_exporter().from_notebook_node(attempts_notebook(), resources())
    page = html.unescape(page)
    body = page[page.index("<body"):]
    table = body[body.index('<table class="summary">'):body.index("</table>")]
    assert table.count(NOT_ATTEMPTED) == 1 and body.count(NOT_ATTEMPTED) == 2
    assert "test_stubbed_value" not in table and "stubbed raised NotImplementedError" not in page
    assert "not written yet" not in page
    # `tried` is written: each of its errors is shown (once), though it raised NotImplementedError
    assert table.count(f"NotImplementedError: {NOT_IMPLEMENTED}") == 2 == page.count(NOT_IMPLEMENTED)
    assert "<code>test_tried_value</code></a>:" in table and "<code>test_tried_inputs</code></a>:" in table
    assert "Not attempted: `tried`" not in page
    # `broken` is as given, but failed on something else: shown as it is
    assert "NameError: name 'np' is not defined" in table and "Not attempted: `broken`" not in page
    # the test list: "not attempted" at the function's first test, its tests' code folded
    heading = body[body.index('<a id="test_stubbed_value">'):body.index('<a id="test_stubbed_shape">')]
    assert "of <code>stubbed</code>: not attempted</span>" in heading and NOT_ATTEMPTED in heading
    assert 'test-not-attempted' in heading and '<details class="test-source">' in heading
    later = body[body.index('<a id="test_stubbed_shape">'):body.index('<a id="test_tried_value">')]
    assert "not attempted" not in later.replace("test-not-attempted", "") and "failed" not in later
    tried = body[body.index('<a id="test_tried_value">'):body.index('<a id="test_tried_inputs">')]
    assert "of <code>tried</code>: failed" in tried and "test-failed" in tried


def test_validate_says_not_attempted_once():
    """`validate` prints the same summary: one line for a function left as given."""
    functions = summary.functions(attempts_notebook(), summary.graded_outcome)
    lines = summary.as_text(functions)
    assert sum(NOT_ATTEMPTED in line for line in lines) == 1
    assert not any("test_stubbed" in line for line in lines)
    assert sum("test_tried" in line for line in lines) == 2 and any("test_broken_value" in line for line in lines)


@pytest.mark.parametrize("source, stub", [
    ('def f(x):\n    """Doc."""\n    # YOUR CODE HERE\n    raise NotImplementedError()', True),
    ("import numpy as np\n\ndef f(x):\n    raise NotImplementedError", True),
    ("class M(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n        # YOUR CODE HERE\n"
     "        raise NotImplementedError()\n\n    def forward(self, x):\n        raise NotImplementedError()", True),
    ("class M(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n        self.d = d\n"
     "        raise NotImplementedError()\n\n    def forward(self, x):\n        raise NotImplementedError()", False),
    ("class M(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n\n"
     "    def forward(self, x):\n        raise NotImplementedError()", False),
    ('def f(x):\n    return 2 * x\n    raise NotImplementedError()', False),
    ('def f(x):\n    raise NotImplementedError("not yet")', False),
    ("def f(x):\n    raise NotImplementedError() from None", False),
    ("def f(x):\n    raise ValueError()", False),
    ("raise NotImplementedError()", False),
    ("def f(x:\n    raise NotImplementedError()", False),
    ("", False),
])
def test_what_counts_as_a_stub(source, stub):
    assert summary.is_stub(source) is stub


# -- what the page weighs ------------------------------------------------------------

def test_mathjax_comes_only_with_math():
    """A page whose text holds no math carries no MathJax (2.1 MB), and its policy allows
    no script; TeX in code or printed output is not math that MathJax would typeset."""
    nb = make_notebook()
    nb.cells[2].source = nb.cells[2].source.replace("Math stays as TeX: $\\sqrt{x}$.", "No math: `$x$`.")
    nb.cells[1].outputs.append(nbformat.v4.new_output("stream", name="stdout", text="costs $5 and $10\n"))
    nb.cells[1].source += '\nlabel = "$\\\\alpha$"'
    page, _ = make_exporter().from_notebook_node(nb, resources())
    assert "<script" not in page.lower() and "MathJax" not in page
    assert "script-src 'none'" in page
    assert len(page.encode()) < 400_000, len(page.encode())
    assert len(render().encode()) > 2_000_000, "with math, the page carries MathJax"
    for text, math in [("<p>$x$</p>", True), ("<p>$$x^2$$</p>", True), ("<p>\\(a\\)</p>", True),
                       ("<p>\\[a\\]</p>", True), ("<p>\\begin{align}a\\end{align}</p>", True),
                       ("<p>costs $5, then $10</p>", True),  # carries MathJax for nothing, harmlessly
                       ("<p>costs $5</p>", False), ("<p><code>$x$</code></p>", False),
                       ("<pre>$x$</pre>", False), ("<p>\\$5 and \\$6</p>", False), ("<p>&#36;x&#36;</p>", True)]:
        assert feedback.has_math(f"<html><head><style>$a$</style></head><body>{text}</body></html>") is math, text


# -- end to end: one soft_lookup submission ----------------------------------------

def hidden_lines(source_notebook, shown_text):
    """The lines of the hidden tests of `source_notebook` that appear nowhere in what
    students are given (`shown_text`), of 20 characters or more."""
    lines = set()
    for cell in source_notebook.cells:
        if not feedback.is_test_cell(cell):
            continue
        hidden = False
        for line in cell.source.splitlines():
            if "END HIDDEN TESTS" in line:
                hidden = False
            elif "BEGIN HIDDEN TESTS" in line:
                hidden = True
            elif hidden and len(line.strip()) >= 20 and line.strip() not in shown_text:
                lines.add(line.strip())
    return lines


@pytest.fixture(scope="module")
def graded_page(tmp_path_factory):
    """The feedback page of one soft_lookup submission: `dot_score` written (wrongly), the
    other functions left as given."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed")
    (source,) = paths.assignment_notebooks("soft_lookup")
    student = nbformat.read(paths.student_version_folder("soft_lookup") / source.name, as_version=4)
    folder = tmp_path_factory.mktemp("feedback")
    (folder / "submissions").mkdir()
    nbformat.write(catalogue.fill(student, {"dot_score": "def dot_score(q, K):\n    return 2 * (K @ q)"}),
                   folder / "submissions" / "alice.ipynb")
    code, lines, log = run_autograder("grade", "soft_lookup", folder / "submissions", "--out", folder / "out",
                                      "--no-progress")
    assert code == 0, log[-3000:]
    result = by_student(lines)["alice"]
    page = (folder / "out" / "feedback" / "alice.html").read_text()
    return {"page": page, "result": result, "student": student, "source": nbformat.read(source, as_version=4)}


def test_a_graded_page_says_each_thing_once_and_shows_no_hidden_test(graded_page):
    page, result = graded_page["page"], graded_page["result"]
    text = html.unescape(page)
    header = text[text.index("<header>"):text.index("</header>")]
    assert "<h1>Assignment: attention as soft lookup</h1>" in header
    assert '<strong class="student">alice</strong>' in header
    assert re.search(r'graded on <time datetime="\d{4}-\d\d-\d\d">', header)
    # dot_score was written: each of its failures once; the others were not attempted
    failed = {t: m for t, m in result["messages"].items() if t.startswith("test_dot_score")}
    assert failed
    for test, message in failed.items():
        assert text.count(message) == 1, (test, message)
    for function in ("scaled_dot_score", "general_score", "additive_score", "local_window_mask", "attend"):
        assert text.count(f"Not attempted: `{function}` still raises NotImplementedError") == 2, function
    assert "raised NotImplementedError ()" not in text
    # no hidden test
    hidden = hidden_lines(graded_page["source"], "\n".join(c.source for c in graded_page["student"].cells))
    assert len(hidden) > 20
    plain = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert not [line for line in hidden if line in plain]
    assert "BEGIN HIDDEN TESTS" not in page and "(hidden tests: not shown)" in page
    # soft_lookup's instructions hold math: the page carries MathJax, once
    scripts, _ = feedback.mathjax_scripts()
    assert page.count(scripts) == 1
