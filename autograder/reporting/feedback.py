"""The HTML exporter of feedback pages (configured as `GenerateFeedback.exporter_class`
in course_directory.py): nbconvert's HTMLExporter with nbgrader's feedback template, and

* **a page for its reader**: headed by the assignment's title (the first heading of the
  instructor's notebook), the student's id and the date of grading; the summary
  (autograder/reporting/summary.py) names each failed test's message, once (a test cell
  shows its outcome, not its error again), and says "not attempted" once for a function
  still as it was given, rather than one NotImplementedError per test;
* **no hidden tests**: each test cell (nbgrader `grade: true`, not `solution`) shows its
  released source, every hidden block replaced by one line `# (hidden tests: not shown)`,
  and its errors only in the summary, as `Name: message` without traceback lines (which
  may quote hidden source). `FeedbackExporter.show_hidden_tests = True` in the nbgrader
  config shows them in full (see `CourseDirectory.configure_feedback`);
* **nothing runs when the page is opened**: whatever came from the submission is
  sanitized (markdown cells, text/html, text/markdown and raw output through `bleach`
  with an allowlist: no scripts, event handlers, frames, forms, SVG or MathML elements,
  `javascript:` or `data:` links; SVG output only as an `<img>`), JavaScript and widget
  outputs are dropped, the template's own scripts (MathJax) are removed, and the page
  carries a Content-Security-Policy that forbids scripts, frames and remote loads; the
  book's MathJax (2.1 MB) is inlined, and allowed by its hash, only in a page that holds
  math (`has_math`): a page is handed back as one file, to be read offline;
* **a bounded cost**: html5lib, which bleach sanitizes with, takes time quadratic in how
  deeply tags nest (20 000 nested `<div>`, 100 000 characters, take 9 s), pygments about
  6 microseconds per character of code, and nbconvert's ansi2html time quadratic in a
  text's escape codes. So each markdown cell, raw cell or HTML or Markdown output is
  sanitized only within fixed sizes (`MAX_MARKUP_*`), and a page only within a budget
  (`PAGE_*`); past them the content is shown as escaped text, its beginning only, with
  a note (an output with a plain-text version shows that instead), code is shown
  without colours, and printed text without its colour codes;
* **a time limit**: a page that takes longer than `render_timeout` seconds to render
  anyway is replaced by a short plain page listing each test as passed or failed; the
  grade is recorded elsewhere, unaffected.

nbconvert's own HTMLExporter parses every page with BeautifulSoup to add alt text to
images and make cells focusable: half the time of a feedback page. This exporter makes
the same changes to the same generated markup with patterns.
"""

import base64
import contextlib
import copy
import datetime
import functools
import hashlib
import html
import json
import re
import signal
import threading

import bleach
from bleach.css_sanitizer import CSSSanitizer
import jinja2
from jinja2 import pass_context
import markupsafe
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.ansi import ansi2html
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.strings import strip_files_prefix
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from pathlib import Path

from traitlets import Bool, Float, Unicode

from autograder import translation
from autograder.judging import assemble
from autograder.reporting import language, summary
from autograder.reporting.language import N_

_IMG_WITHOUT_ALT = re.compile(r"<img(?![^>]*\salt=)")
_ICON_FONT = re.compile(r"@font-face\s*\{font-family:\s*['\"]Glyphicons Halflings['\"][^}]*\}")
_FOCUSABLE = re.compile(r'(<div class="[^"]*\bjp-(?:Cell-inputWrapper|OutputArea-output)\b[^"]*")(?![^>]*tabindex)')

HIDDEN_TESTS_NOTE = N_("# (hidden tests: not shown)")
STATUSES = (N_("passed"), N_("failed"))  # a test's outcome, in its heading (the template translates it)
# The words of nbgrader's own feedback template, which this page extends (its macros, not
# blocks, write them): replaced where they stand in a page in another language.
NBGRADER_WORDS = (
    ('<span class="nbgrader-label">{}</span>', N_("Student's answer")),
    ('<span class="nbgrader-label">{}</span>', N_("Student's task")),
    ('<a href="#top">{}</a>', N_("(Top)")),
    ('<b>{}</b>', N_("Comments:")),
    ('<span class="pull-right">\n      {} ', N_("Score:")),
)


# The lateness sentence (autograder/records/lateness.py's lateness_note), read back into its parts.
_LATENESS = re.compile(r"Submitted (?P<late>.+?) after the due date \((?P<due>[^()]*) UTC\); (?P<rule>.+)\.\Z",
                       re.DOTALL)
_RULES = {"no penalty is set for late submissions": N_("no penalty is set for late submissions"),
          "a late submission scores zero": N_("a late submission scores zero")}
_PER_DAY = re.compile(r"(?P<percent>[\d.e+-]+)% of the points earned per day, or part of a day, late\Z")


def lateness_sentence(note, words):
    """The lateness sentence in the language of `words`; as it is where it is not one
    lateness_note writes."""
    _ = words
    match = _LATENESS.match(note) if words.language else None
    if not match:
        return note
    late = re.sub(r"\b(\d+) days?\b", lambda m: _("{count} day", count=m.group(1)) if m.group(1) == "1"
                  else _("{count} days", count=m.group(1)), match.group("late"))
    rule = match.group("rule")
    per_day = _PER_DAY.match(rule)
    if rule in _RULES:
        rule = _(_RULES[rule])
    elif per_day:
        rule = _("{percent}% of the points earned per day, or part of a day, late",
                 percent=per_day.group("percent"))
    else:
        return note
    return _("Submitted {late} after the due date ({due} UTC); {rule}.", late=late, due=match.group("due"), rule=rule)


def nbgrader_words(page, words):
    """`page` with the words of nbgrader's template in the language of `words`."""
    if not words.language:
        return page
    for markup, english in NBGRADER_WORDS:
        page = page.replace(markup.format(english), markup.format(words(english)))
    return page


# The page may use its own inline styles and embedded (data:) images and fonts; nothing else.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'none'; object-src 'none'; frame-src 'none'; "
                           "style-src 'unsafe-inline'; img-src data:; font-src data:; "
                           "form-action 'none'; base-uri 'none'")
_CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'

# -- sanitizing ---------------------------------------------------------------------

_ALLOWED_TAGS = frozenset({
    "a", "abbr", "acronym", "b", "blockquote", "br", "caption", "center", "cite", "code", "col",
    "colgroup", "dd", "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p",
    "pre", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "summary", "sup", "table",
    "tbody", "td", "tfoot", "th", "thead", "tr", "tt", "u", "ul", "var", "wbr",
})
_ALLOWED_ATTRIBUTES = {
    "*": {"class", "id", "title", "lang", "dir", "style", "align"},
    "a": {"href", "name"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan", "valign"},
    "th": {"colspan", "rowspan", "valign", "scope"},
    "col": {"span", "width"},
    "colgroup": {"span", "width"},
    "ol": {"start", "type", "reversed"},
    "details": {"open"},
}


def _plain_url(value):
    """The URL as a browser reads it (entities decoded; control characters, spaces and
    non-ASCII dropped; lower case), as bleach normalizes it to check its scheme."""
    value = bleach.html5lib_shim.convert_entities(value)
    return re.sub(r"[^\x21-\x7e]|`", "", value).lower()


def _allowed_attribute(tag, name, value):
    if name not in _ALLOWED_ATTRIBUTES["*"] and name not in _ALLOWED_ATTRIBUTES.get(tag, ()):
        return False
    if name in ("href", "src") and _plain_url(value).startswith("data:"):
        return tag == "img" and _plain_url(value).startswith("data:image/")  # an image, never a page
    return True


# bleach also drops any href/src whose scheme is not listed (javascript:, vbscript:...),
# after undoing entities and whitespace tricks. Not thread-safe: one per thread.
_cleaners = threading.local()


def sanitize_html(markup):
    """`markup` (HTML from the submission) with only allowlisted tags, attributes, URL
    schemes and CSS properties; disallowed tags are removed, their text kept as text."""
    cleaner = getattr(_cleaners, "cleaner", None)
    if cleaner is None:
        cleaner = _cleaners.cleaner = bleach.Cleaner(
            tags=_ALLOWED_TAGS, attributes=_allowed_attribute, protocols={"http", "https", "mailto", "data"},
            strip=True, strip_comments=True, css_sanitizer=CSSSanitizer())
    markup = markup.decode("utf-8", "replace") if isinstance(markup, bytes) else str(markup)
    return cleaner.clean(markup)


# -- what a page may cost ------------------------------------------------------------

MAX_MARKUP_CHARACTERS = 100_000  # one markdown cell, raw cell or HTML/Markdown output, to render
MAX_MARKUP_TAGS = 2_000  # its '<' characters (after Markdown became HTML)
PAGE_MARKUP_CHARACTERS = 1_000_000  # all the markup of one page, to render
PAGE_MARKUP_TAGS = 40_000
PAGE_HIGHLIGHTED_CHARACTERS = 300_000  # code shown with colours; the rest without
MAX_ANSI_CHARACTERS = 100_000  # printed text converted with its colours; longer, without
SHOWN_CHARACTERS = 5_000  # of content not rendered, the beginning shown as text

_ANSI_CODE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]?")


class PageBudget:
    """What is left to spend on one page: characters and tags to render as HTML,
    characters of code to highlight."""

    def __init__(self):
        self.characters, self.tags, self.highlighted = PAGE_MARKUP_CHARACTERS, PAGE_MARKUP_TAGS, 0

    def renders(self, text, tags=0):
        """Whether `text` (with `tags` tags) may be rendered; if so, it is spent."""
        if len(text) > MAX_MARKUP_CHARACTERS or tags > MAX_MARKUP_TAGS:
            return False
        if len(text) > self.characters or tags > self.tags:
            return False
        self.characters -= len(text)
        self.tags -= tags
        return True

    def highlights(self, code):
        """Whether `code` may be highlighted; if so, it is spent."""
        if self.highlighted + len(code) > PAGE_HIGHLIGHTED_CHARACTERS:
            return False
        self.highlighted += len(code)
        return True


def too_large(text):
    """Whether `text` is past the sizes of one rendered item, whatever the page's budget."""
    return len(text) > MAX_MARKUP_CHARACTERS or text.count("<") > MAX_MARKUP_TAGS


class _Note(str):
    """Markup made here from escaped text: passed on as it is by the filters that follow."""


def not_rendered(text, what):
    """`text` as escaped text, its beginning only, with a note that says why."""
    shown = text[:SHOWN_CHARACTERS]
    part = "its beginning is shown as text" if len(shown) < len(text) else "it is shown as text"
    return _Note(f'<pre class="not-rendered">{html.escape(shown)}</pre>\n'
                 f'<p class="not-rendered"><em>[{html.escape(what)} of {len(text)} characters not rendered in '
                 f'feedback (too large, or too many tags); {part}]</em></p>\n')


def plain_ansi2html(text):
    """nbconvert's ansi2html, whose time grows with the square of a text's escape codes,
    for short texts only; a longer one is escaped without its colour codes."""
    text = _text(text)
    if len(text) <= MAX_ANSI_CHARACTERS:
        return ansi2html(text)
    return str(markupsafe.escape(_ANSI_CODE.sub("", text)))


# -- test cells -----------------------------------------------------------------------

def is_test_cell(cell):
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


# The released source of a test cell, each hidden block replaced by a note.
released_source = functools.partial(assemble.released_source, note=HIDDEN_TESTS_NOTE)


def _text(value):
    return "".join(map(str, value)) if isinstance(value, list) else str(value if value is not None else "")


# -- outputs --------------------------------------------------------------------------

# Rendered by the template after sanitizing (text/html, text/markdown), escaping (text),
# or as an <img> (images, SVG included: an image runs no script). Others are dropped.
_SHOWN_MIMETYPES = ("text/html", "text/markdown", "image/svg+xml", "image/png", "image/jpeg",
                    "text/latex", "text/plain")


def _safe_output(output, test_cell, keep_traceback):
    kind = output.get("output_type")
    if kind == "error":
        if test_cell and not keep_traceback:
            output["traceback"] = [f"{_text(output.get('ename'))}: {_text(output.get('evalue'))}"]
        return output
    if kind not in ("display_data", "execute_result"):
        return output  # streams: escaped by the template
    data = output.get("data", {})
    dropped = sorted(key for key in data if key not in _SHOWN_MIMETYPES)
    for key in dropped:
        del data[key]
    for key in ("text/html", "text/markdown"):
        if key in data and "text/plain" in data and too_large(_text(data[key])):
            del data[key]  # shown by its plain text rather than as a note
    if not data and dropped:
        data["text/plain"] = f"[{', '.join(dropped)} output: not shown in feedback]"
    metadata = output.get("metadata", {})
    metadata.pop("filenames", None)  # would become <img src="..."> of the submission's choosing
    for value in metadata.values():
        if isinstance(value, dict):
            value.pop("isolated", None)  # text/html in an <iframe>
    for key in [k for k in output if k not in ("output_type", "data", "metadata", "execution_count")]:
        del output[key]  # svg_filename and the like: not nbformat, used by the template as URLs
    return output


class _RenderTimeout(BaseException):
    """Raised by SIGALRM in the thread that renders; BaseException, so that no
    `except Exception` in a library on the way swallows it."""


class CompiledTemplates(jinja2.BytecodeCache):
    """Compiled Jinja templates kept in memory, for every exporter of this process."""

    def __init__(self):
        self.compiled = {}

    def load_bytecode(self, bucket):
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])

    def dump_bytecode(self, bucket):
        self.compiled[bucket.key] = bucket.bytecode_to_string()


COMPILED_TEMPLATES = CompiledTemplates()


class FeedbackExporter(HTMLExporter):
    show_hidden_tests = Bool(
        False, help="Show the hidden tests' source and full tracebacks in feedback pages").tag(config=True)
    render_timeout = Float(
        60.0, help="Seconds allowed to render one feedback page (0: no limit). Longer, and a short "
                   "page listing the tests' outcomes is written instead. Applies in the main thread "
                   "only (SIGALRM).").tag(config=True)
    lateness = Unicode("", help="A sentence on a late submission (how late, the rule), shown with "
                                "the score").tag(config=True)
    report_dir = Unicode("", help="Where the grader's reports (NOTEBOOK.json) are: the diagnoses the "
                                  "summary shows (autograder/judging/diagnosis.py)").tag(config=True)
    typeset_math = Bool(True, help="Typeset the page's math with the book's MathJax, the one script the "
                                   "page runs (in pages that hold math only)").tag(config=True)
    graded_on = Unicode("", help="The date of grading the page shows (default: the day it is rendered, "
                                 "UTC, as grading renders it)").tag(config=True)

    def __init__(self, **kwargs):
        # The student's page (autograder/reporting/templates/student_feedback), on nbgrader's `feedback`.
        import nbgrader

        nbgrader_templates = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"
        kwargs.setdefault("template_name", "student_feedback")
        kwargs.setdefault("extra_template_basedirs", [str(TEMPLATES), str(nbgrader_templates)])
        # where `feedback/index.html.j2` (which the page extends) and bootstrap.min.css are found
        config = kwargs.get("config") or getattr(kwargs.get("parent"), "config", None)
        given = list(config.HTMLExporter.get("extra_template_paths", [])) if config is not None else []
        bootstrap = nbgrader_templates.parent / "static" / "node_modules" / "bootstrap" / "dist" / "css"
        kwargs.setdefault("extra_template_paths", given + [str(bootstrap), str(nbgrader_templates)])
        super().__init__(**kwargs)

    def _create_environment(self):
        # A grading worker renders one page per submission with a new exporter: its
        # templates compile once per worker, not once per page (the same templates, the
        # same pages; Jinja checks each template's source against what it compiled).
        environment = super()._create_environment()
        environment.bytecode_cache = COMPILED_TEMPLATES
        return environment

    def _diagnosed(self, resources):
        """function -> {"id", "explanation"}: what the grader's report says each function behaves like."""
        name = str(resources.get("nbgrader", {}).get("notebook", ""))
        if not (self.report_dir and name):
            return {}
        try:
            report = json.loads((Path(self.report_dir) / f"{name}.json").read_text())
            diagnosed = report.get("diagnosed", {})
            return diagnosed if isinstance(diagnosed, dict) else {}
        except (OSError, ValueError):
            return {}

    _test_errors = {}  # grade_id -> the error of a test cell whose error output the page leaves out

    def _outcome(self, cell):
        grade_id = str(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "?"))
        return summary.graded_outcome(cell, self._test_errors.get(grade_id))

    def _summarize(self, nb, resources):
        """The template's filter `summarize`: the summary table's rows, and each test cell's
        outcome for its heading (in resources["test_outcomes"]). Called by the template, after
        nbgrader's GetGrades has put each test's score in the notebook."""
        functions = summary.functions(nb, self._outcome, self._diagnosed(resources), translation.language_of(nb))
        outcomes = {}
        for function in functions:
            for index, test in enumerate(function.tests):
                outcome = {"status": test.status, "message": test.message, "function": function.name}
                if function.not_attempted:
                    outcome.update(status="not attempted", message="",
                                   note=function.not_attempted_sentence if index == 0 else "")
                outcomes[test.name] = outcome
        resources["test_outcomes"] = outcomes
        resources["lateness"] = lateness_sentence(self.lateness, language.words(translation.language_of(nb)))
        return functions

    def _page(self, nb, resources):
        """What heads the page: the assignment's title, the student's id, the date of grading."""
        grading = resources.get("nbgrader", {})
        code = translation.language_of(nb)
        return {"lang": code if language.is_translated(code) else "en",
                "title": assignment_title(nb) or str(grading.get("assignment") or grading.get("notebook") or ""),
                "student": str(grading.get("student") or ""),
                "graded_on": self.graded_on or datetime.datetime.now(datetime.timezone.utc).date().isoformat()}

    def _init_resources(self, resources):
        resources = super()._init_resources(resources)
        resources["should_sanitize_html"] = True  # the template drops scripts and cleans html
        resources["should_not_encode_svg"] = False  # SVG only as <img src="data:...">
        return resources

    budget = None  # the PageBudget of the page being rendered

    def _spend(self, text, tags=None):
        if self.budget is None:
            self.budget = PageBudget()
        return self.budget.renders(text, text.count("<") if tags is None else tags)

    @pass_context
    def _safe_markdown2html(self, context, source):
        source = _text(source)
        if not self._spend(source, 0):
            return not_rendered(source, "markdown")
        markup = HTMLExporter.markdown2html(self, context, source)
        if not self._spend("", markup.count("<")):
            return not_rendered(source, "markdown")
        return sanitize_html(markup)

    def _clean_html(self, markup):
        if isinstance(markup, _Note):
            return markup
        markup = markup.decode("utf-8", "replace") if isinstance(markup, bytes) else _text(markup)
        if not self._spend(markup):
            return not_rendered(markup, "HTML")
        return sanitize_html(markup)

    def _safe_strip_files_prefix(self, text):
        # nbconvert's filter turns href="files/x" into href="x": "files/javascript:..." would
        # become a javascript: link, so whatever it changed is sanitized again.
        stripped = strip_files_prefix(text)
        return text if stripped == text else self._clean_html(stripped)

    def default_filters(self):
        yield from super().default_filters()
        yield ("markdown2html", self._safe_markdown2html)
        yield ("clean_html", self._clean_html)
        yield ("strip_files_prefix", self._safe_strip_files_prefix)
        yield ("ansi2html", plain_ansi2html)

    def _feedback_notebook(self, nb):
        """A copy of `nb` with what the page may show: released tests, safe outputs. A test
        cell's error is said once, in the summary: its error output is taken out (kept in
        self._test_errors), unless the hidden tests are shown (then its whole traceback)."""
        nb = copy.deepcopy(nb)
        nb.metadata.pop("widgets", None)
        hidden = self.config.get("ClearHiddenTests", {})
        begin = hidden.get("begin_test_delimeter", "BEGIN HIDDEN TESTS")
        end = hidden.get("end_test_delimeter", "END HIDDEN TESTS")
        self._test_errors = {}
        note = language.words(translation.language_of(nb))(HIDDEN_TESTS_NOTE)
        for cell in nb.cells:
            test_cell = is_test_cell(cell)
            if test_cell and not self.show_hidden_tests:
                cell.source = released_source(_text(cell.get("source", "")), begin, end, note=note)
                grade_id = str(cell.metadata.nbgrader.get("grade_id", "?"))
                self._test_errors[grade_id] = summary.error_message(cell)
                cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "error"]
            if cell.get("cell_type") == "code":
                cell.outputs = [_safe_output(o, test_cell, self.show_hidden_tests) for o in cell.get("outputs", [])]
        return nb

    def _render(self, nb, resources, **kw):
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        highlight = self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
        self.budget = PageBudget()

        def bounded_highlight(source, *args, **kwargs):
            if self.budget.highlights(_text(source)):
                return highlight(source, *args, **kwargs)
            return f'<div class="highlight"><pre>{html.escape(_text(source))}</pre></div>\n'

        self.register_filter("highlight_code", bounded_highlight)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        self.register_filter("summarize", self._summarize)
        self.environment.globals["_"] = language.words(translation.language_of(nb))  # the page's own words
        resources["page"] = self._page(nb, resources)
        page, resources = TemplateExporter.from_notebook_node(self, self._feedback_notebook(nb), resources, **kw)
        page = _IMG_WITHOUT_ALT.sub('<img alt="No description has been provided for this image"', page)
        page = _FOCUSABLE.sub(r'\1 tabindex="0"', page)
        page = _ICON_FONT.sub("", page)  # bootstrap's icon font: a file the page may not load (and no icon is used)
        page = nbgrader_words(page, language.words(translation.language_of(nb)))
        return _secure_page(page, self.typeset_math), resources

    def from_notebook_node(self, nb, resources=None, **kw):
        resources = self._init_resources(resources)
        try:
            with _time_limit(self.render_timeout):
                return self._render(nb, resources, **kw)
        except (_RenderTimeout, RecursionError) as problem:
            _ = language.words(translation.language_of(nb))
            if isinstance(problem, _RenderTimeout):
                why = _("within the time limit ({seconds:g} s)", seconds=self.render_timeout)
            else:
                why = _("(too deeply nested)")
            self.log.warning("Feedback page %s could not be rendered %s; writing a short page instead",
                             resources.get("nbgrader", {}).get("notebook", ""), why)
            return fallback_page(nb, resources, why, translation.language_of(nb)), resources


@contextlib.contextmanager
def _time_limit(seconds):
    """Raise _RenderTimeout in the block after `seconds` (SIGALRM): only in the main
    thread, and only when no other interval timer runs; otherwise no limit."""
    if not (seconds > 0 and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
            and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)):
        yield
        return
    armed = True

    def on_alarm(signum, frame):
        if armed:
            raise _RenderTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    # Again each second after the first, in case something on the way catches the first.
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


TEMPLATES = Path(__file__).with_name("templates")

# The book's MathJax 3 (the pinned sphinx-mathjax-offline package), inlined: its SVG output
# needs no font files. No menu, no extension loaded later: nothing is fetched.
MATHJAX_CONFIG = """window.MathJax = {
  tex: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
        processEscapes: true, packages: {"[-]": ["autoload", "require", "html"]}},
  svg: {fontCache: "global"},
  options: {enableMenu: false, skipHtmlTags: ["script", "noscript", "style", "textarea", "pre", "code"]},
  loader: {load: []}
};"""


@functools.lru_cache(maxsize=1)
def mathjax_scripts():
    """(the two inline scripts that typeset a page's math, their CSP sources), or None
    where the book's MathJax is not installed (the math then stays TeX source)."""
    from importlib import metadata

    try:
        path = Path(metadata.distribution("sphinx-mathjax-offline").locate_file(
            "sphinx-mathjax-offline/static/mathjax/tex-svg.js"))
        code = path.read_text(encoding="utf-8")
    except (metadata.PackageNotFoundError, OSError):
        return None
    scripts = [MATHJAX_CONFIG, code.replace("</script", "<\\/script")]
    hashes = " ".join("'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
                      for s in scripts)
    return "".join(f"<script>{s}</script>\n" for s in scripts), hashes


# What MathJax (MATHJAX_CONFIG) typesets, in the text of a page outside code.
_MATH = re.compile(r"\$\$.+?\$\$|\\\(.+?\\\)|\\\[.+?\\\]|\\begin\{[A-Za-z*]+\}|(?<!\\)\$[^$]+?(?<!\\)\$", re.DOTALL)
_NOT_TYPESET = re.compile(r"<(script|noscript|style|textarea|pre|code)\b.*?</\1\s*>", re.DOTALL | re.IGNORECASE)


def has_math(page):
    """Whether the body of `page` holds math that MathJax would typeset: TeX between its
    delimiters in text outside <pre>, <code> and the like (a stray pair of dollars counts:
    the page then carries MathJax for nothing, never math left as TeX)."""
    body = re.search(r"<body\b", page, re.IGNORECASE)
    text = _NOT_TYPESET.sub(" ", page[body.start():] if body else page)
    text = html.unescape(re.sub(r"<[^>]*>", " ", text))
    return _MATH.search(text) is not None


def assignment_title(nb):
    """The first heading of the instructor's cells of `nb` (markdown cells with nbgrader
    metadata, which grading takes from the source notebook whatever the student's copy
    says), as text; or ""."""
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "markdown" or not meta or meta.get("solution"):
            continue
        heading = re.search(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", _text(cell.get("source", "")), re.MULTILINE)
        if heading:
            return re.sub(r"[`*]", "", heading.group(1)).strip()
    return ""


def _secure_page(page, typeset_math=False):
    """The page without the template's scripts (MathJax from a CDN), with a CSP; with
    `typeset_math`, and where the page holds math, the book's MathJax added at the end of
    the body, the only script that the CSP lets run (by its hash)."""
    body = re.search(r"<body\b", page, re.IGNORECASE)
    head, rest = (page[:body.start()], page[body.start():]) if body else (page, "")
    head = re.sub(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", "", head, flags=re.DOTALL)
    head = re.sub(r"<script\b.*?</script\s*>", "", head, flags=re.DOTALL | re.IGNORECASE)
    policy = _CSP_META
    mathjax = mathjax_scripts() if typeset_math and has_math(rest) else None
    if mathjax is not None:
        scripts, hashes = mathjax
        policy = _CSP_META.replace("script-src 'none'", f"script-src {hashes}")
        closing = rest.lower().rfind("</body>")
        rest = rest[:closing] + scripts + rest[closing:] if closing >= 0 else rest + scripts
    opening = re.search(r"<head\b[^>]*>", head, re.IGNORECASE)
    if opening:
        head = head[:opening.end()] + "\n" + policy + head[opening.end():]
    else:
        head = policy + head
    return head + rest


def cell_outcomes(nb):
    """[(grade_id, passed)] of the notebook's test cells: failed when an output is an error."""
    outcomes = []
    for cell in nb.get("cells", []):
        if is_test_cell(cell):
            failed = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
            outcomes.append((str(cell.metadata.nbgrader.get("grade_id", "?")), not failed))
    return outcomes


def fallback_page(nb, resources, why, language_code=""):
    """A short plain page: the tests' outcomes, without the notebook."""
    _ = language.words(language_code)
    name = html.escape(str(resources.get("nbgrader", {}).get("notebook", "")
                           or resources.get("metadata", {}).get("name", "notebook")))
    outcome = {True: _("passed"), False: _("failed")}
    rows = "\n".join(f"<tr><td><code>{html.escape(grade_id)}</code></td><td>{outcome[ok]}</td></tr>"
                     for grade_id, ok in cell_outcomes(nb))
    test, result = _("test"), _("result")
    sentence = _("This feedback page could not be rendered {why}. Your grade is not affected:\n"
                 "it was recorded before this page was made. The tests of this notebook:", why=html.escape(why))
    return f"""<!DOCTYPE html>
<html lang="{'es' if language.is_translated(language_code) else 'en'}">
<head>
<meta charset="utf-8">
{_CSP_META}
<title>{name}</title>
</head>
<body>
<h1>{name}</h1>
<p>{sentence}</p>
<table>
<tr><th>{test}</th><th>{result}</th></tr>
{rows}
</table>
</body>
</html>
"""
