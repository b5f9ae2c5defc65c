"""The grader's words in the notebook's language: a Spanish notebook (`"lang": "es"` in its
metadata, autograder/translation.py) gets its feedback page, summary, diagnoses and test
messages in Spanish; any other notebook gets them as they are written, in English.

Three kinds of gettext catalogs, merged by `make translations` (sphinx-intl, as the
book's) from templates written here (`python -m autograder.reporting.language templates
OUT`), so that a changed English string becomes a fuzzy entry:

* `locales/es/LC_MESSAGES/grader.po`: the grader's own words, marked `_("...")` (or
  `N_("...")` where a string is kept for later) in autograder/ and in the feedback
  page's template, with named `{fields}` filled by `str.format`;
* `locales/es/LC_MESSAGES/diagnoses/ASSIGNMENT.po`: the explanations of the catalogue's
  answers (autograder/catalogues/ASSIGNMENT.yml), the text a diagnosis shows;
* `locales/es/LC_MESSAGES/tests/ASSIGNMENT.po`: the templates of the test messages, cut
  from the source of the test cells and of the helpers they call (the prose of each
  string or f-string; an f-string's fields become named placeholders). A failed test's
  message is not rewritten in the test cells: it is matched, after the test ran, against
  these templates (`translate_message`), each compiled to a regular expression, and its
  fields are filled back into the Spanish template; a message made of several sentences
  (a hint after a statement) is matched piece by piece. A message that matches nothing
  stays as it was.
  `tests/_grader.po` holds, cut the same way from MESSAGE_MODULES, the grader's own
  words that a test's message may hold (a crash, a limit, a test that did not run, "your
  code raised NameError: ..." with the student's exception text inside, kept as it is).

An entry untranslated or fuzzy keeps its English, as Sphinx does. Translating never
raises: a fault is logged and the English shown (nothing after a test ran changes a
score or a status).
"""

import ast
import logging
import re
import sys
import time
from functools import lru_cache
from pathlib import Path

from autograder import paths

LANGUAGE = "es"
LOG = logging.getLogger("autograder.language")
MAX_MESSAGE = 2_000  # characters of a test message translated; a longer one stays as it was
MAX_DEPTH = 4  # fields within fields
MAX_SECONDS = 0.5  # to translate one message (the patterns' backtracking); past it, the English


def N_(message):
    """Marks a string for the catalog without translating it (translated where shown)."""
    return message


def folder(locales=paths.LOCALES, language=LANGUAGE):
    return Path(locales) / language / "LC_MESSAGES"


def grader_catalog(locales=paths.LOCALES):
    return folder(locales) / "grader.po"


def diagnoses_catalog(assignment, locales=paths.LOCALES):
    return folder(locales) / "diagnoses" / f"{assignment}.po"


def tests_catalog(assignment, locales=paths.LOCALES):
    return folder(locales) / "tests" / f"{assignment}.po"


GRADER_MESSAGES = "_grader"  # tests/_grader.po: the grader's own words in a test's message
# The modules whose strings reach a test's message (a crash, a time or memory limit, a
# test that did not run, the student's exception as the kernel's agent reports it).
MESSAGE_MODULES = ("judging/referee.py", "judging/testing.py", "judging/crashes.py", "judging/executor.py",
                   "judging/kernel_start.py", "judging/kernel.py", "isolation/agent.py",
                   "isolation/bounded.py")


def grader_messages_catalog(locales=paths.LOCALES):
    return tests_catalog(GRADER_MESSAGES, locales)


def _table(path):
    from autograder import translation

    try:
        return translation.translations(path)
    except Exception as error:  # noqa: BLE001 (a broken catalog: English, logged)
        LOG.warning("catalog %s not read (%s: %s): English kept", path, type(error).__name__, error)
        return {}


@lru_cache(maxsize=None)
def grader_table(locales=paths.LOCALES):
    return _table(grader_catalog(locales))


@lru_cache(maxsize=None)
def diagnoses_table(locales=paths.LOCALES):
    merged = {}
    for path in sorted((folder(locales) / "diagnoses").glob("*.po")):
        for english, spanish in _table(path).items():
            merged.setdefault(english, spanish)
    return merged


def is_translated(language):
    return language == LANGUAGE


class Words:
    """The grader's words in `language`: `words("Summary")`, `words("{n} tests", n=3)`."""

    def __init__(self, language=""):
        self.language = language if is_translated(language) else ""
        self.table = grader_table() if self.language else {}

    def __call__(self, message, **fields):
        text = self.table.get(message, message)
        try:
            return text.format(**fields) if fields else text
        except (KeyError, IndexError, ValueError) as error:  # a broken translation: the English
            LOG.warning("translation of %r not used (%s)", message, error)
            return message.format(**fields)


def words(language=""):
    return Words(language)


def explanation(text, language=""):
    """A catalogue answer's explanation in `language` (else as written)."""
    if not is_translated(language):
        return text
    try:
        return diagnoses_table().get(text, text)
    except Exception as error:  # noqa: BLE001
        LOG.warning("explanation not translated (%s: %s)", type(error).__name__, error)
        return text


# -- test messages -----------------------------------------------------------------------

FIELD = re.compile(r"\{(\w+)\}")
PROSE = re.compile(r"[A-Za-z]{2,}[,;:.]?\s+[A-Za-z]{2,}")  # two words at least: a sentence, not a name
# the grader's words: "during a test" too (a test cell's catalog keeps PROSE, as it was cut)
SHORT_PROSE = re.compile(r"[A-Za-z]{2,}[,;:.]?\s+(?:[A-Za-z]\s+)?[A-Za-z]{2,}")


def _field_name(node):
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, (ast.Subscript, ast.Starred)):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return "value"


def template_of(node):
    """The template of a string or f-string node: its text, each field `{name}`; None for
    one holding braces of its own."""
    if isinstance(node, ast.Constant):
        return None if "{" in node.value or "}" in node.value else node.value
    parts, seen = [], {}
    for value in node.values:
        if isinstance(value, ast.Constant):
            if "{" in str(value.value) or "}" in str(value.value):
                return None
            parts.append(str(value.value))
        else:
            name = _field_name(value.value)
            seen[name] = seen.get(name, 0) + 1
            parts.append("{" + (name if seen[name] == 1 else f"{name}_{seen[name]}") + "}")
    return "".join(parts)


def _is_docstring(node, parents):
    parent = parents.get(node)
    holder = parents.get(parent)
    return (isinstance(parent, ast.Expr) and isinstance(holder, (ast.Module, ast.FunctionDef, ast.ClassDef,
                                                                   ast.AsyncFunctionDef))
            and holder.body and holder.body[0] is parent)


def _in_comparison(node, parents):
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Compare):
            return True
        if isinstance(node, ast.stmt):
            return False
    return False


def templates_in(source, prose=PROSE):
    """The templates of the prose strings of one cell's code, in order, each once."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return []
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and not isinstance(node.value, str):
            continue
        if not isinstance(node, (ast.Constant, ast.JoinedStr)) or isinstance(parents.get(node), ast.JoinedStr):
            continue
        if isinstance(parents.get(node), ast.FormattedValue) or _is_docstring(node, parents) \
                or _in_comparison(node, parents):
            continue
        text = template_of(node)
        if text is None:
            continue
        text = text.strip()
        if prose.search(FIELD.sub(" ", text)) and text not in found:
            found.append(text)
    return found


def message_cells(notebook):
    """The code the test messages come from: the test cells, and the instructor's code
    cells given with the assignment (the helpers the tests call)."""
    for cell in notebook.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta and not meta.get("solution"):
            yield cell


def test_templates(assignment, solutions=paths.SOLUTIONS):
    """[(template, location)] of an assignment's test messages."""
    import nbformat

    found, seen = [], set()
    for path in paths.assignment_notebooks(assignment, solutions):
        notebook = nbformat.read(path, as_version=4)
        for cell in message_cells(notebook):
            grade_id = cell.metadata.nbgrader.get("grade_id", "")
            for text in templates_in(str(cell.source)):
                if text not in seen:
                    seen.add(text)
                    found.append((text, f"solutions/{assignment}/{path.name}#{grade_id}"))
    return found


def grader_message_templates(root=paths.REPO_ROOT / "autograder"):
    """[(template, location)] of the grader's own words that a test's message may hold,
    cut from MESSAGE_MODULES as `templates_in` cuts a test cell (code excepted)."""
    found, seen = [], set()
    for module in MESSAGE_MODULES:
        for text in templates_in((Path(root) / module).read_text(encoding="utf-8"), SHORT_PROSE):
            if text not in seen and "\n" not in text and not text.startswith("<"):
                seen.add(text)
                found.append((text, f"autograder/{module}"))
    return found


ADJACENT = re.compile(r"\{(\w+)\}\s+\{(\w+)\}")


class Template:
    """An English template compiled to a pattern, and its translation. Two fields side by
    side in both (`{why} {where}`) are matched as one, translated as a sequence."""

    def __init__(self, english, spanish):
        self.english, self.spanish = english, spanish
        for first, second in ADJACENT.findall(english):
            joint = f"{{{first}}} {{{second}}}"
            if joint in english and joint in spanish:
                english = english.replace(joint, f"{{{first}__{second}}}")
                spanish = spanish.replace(joint, f"{{{first}__{second}}}")
        self.spanish = spanish
        pieces = FIELD.split(english)  # literal, name, literal, name, ..., literal
        self.fields = pieces[1::2]
        pattern, named = "", set()
        for index, piece in enumerate(pieces):
            if index % 2:
                group = f"(?P<{piece}>.*?)" if piece not in named else ".*?"
                named.add(piece)
                if index == len(pieces) - 2 and not pieces[-1] and pattern.endswith(r"\s+"):
                    # "... {hint}" at the end: the message was stripped when the hint was empty
                    pattern, group = pattern[:-len(r"\s+")], rf"(?:\s+{group})?"
                pattern += group
            else:
                pattern += r"\s+".join(re.escape(word) for word in re.split(r"\s+", piece))
        self.whole = re.compile(pattern + r"\s*\Z", re.DOTALL)
        self.ends_in_text = not english.endswith("}")
        self.start = re.compile(pattern, re.DOTALL) if self.ends_in_text else None
        self.weight = len(FIELD.sub("", english))

    def fill(self, match, depth, deadline):
        values = {}
        for name in self.fields:
            value = (match.group(name) if name in match.groupdict() else "") or ""
            values[name] = _translate_text(value, depth + 1, deadline)
        return FIELD.sub(lambda m: values.get(m.group(1), m.group(0)), self.spanish)


@lru_cache(maxsize=None)
def message_templates(locales=paths.LOCALES):
    """The translated templates of every assignment's tests, the longest first."""
    templates, seen = [], set()
    for path in sorted((folder(locales) / "tests").glob("*.po")):
        for english, spanish in _table(path).items():
            if english not in seen and set(FIELD.findall(english)) == set(FIELD.findall(spanish)):
                seen.add(english)
                templates.append(Template(english, spanish))
    templates.sort(key=lambda t: -t.weight)
    return templates


class _OutOfTime(Exception):
    """A message took longer than MAX_SECONDS to translate."""


def _translate_text(text, depth, deadline):
    """`text` translated, or itself where it is not (a name, a number, or no template)."""
    translated = _translated(text, depth, deadline)
    exception = re.match(r"\s*([A-Za-z_][\w.]*Error|[A-Za-z_][\w.]*Exception): ", text)
    if translated is None and exception:  # "NameError: name 'x' is not defined: did its cell..."
        rest = _translated(text[exception.end():], depth, deadline)
        if rest is not None:
            return text[:exception.end()] + rest
    if translated is None:
        return text
    core = text.strip()
    start = text.find(core) if core else 0
    return text[:start] + translated + text[start + len(core):]  # its spaces kept: " Do not cast..."


def _translated(text, depth, deadline):
    """`text` matched whole by a template, or as a sequence of templates; else None."""
    stripped = text.strip()
    if not stripped or depth > MAX_DEPTH or not SHORT_PROSE.search(stripped):
        return None
    for template in message_templates():
        if time.monotonic() > deadline:
            raise _OutOfTime()
        match = template.whole.match(stripped)
        if match:
            return template.fill(match, depth, deadline).rstrip()
    for template in message_templates():  # a sentence, then the rest (a hint after it)
        if not template.ends_in_text:
            continue
        if time.monotonic() > deadline:
            raise _OutOfTime()
        match = template.start.match(stripped)
        if match and match.end() < len(stripped) and stripped[match.end()].isspace():
            rest = _translated(stripped[match.end():], depth, deadline)
            if rest is not None:
                return template.fill(match, depth, deadline) + " " + rest
    if stripped.endswith(".") and not stripped.endswith(".."):  # "{why} {where}.": the sentence, its period
        translated = _translated(stripped[:-1], depth, deadline)
        if translated is not None:
            return translated if translated.endswith((".", "?", "!")) else translated + "."
    return None


def translate_message(message, language=""):
    """A failed test's message (`Name: text`) in `language`: its text translated by the
    tests' templates where one matches, else unchanged. Never raises."""
    if not is_translated(language) or not message or len(message) > MAX_MESSAGE:
        return message
    try:
        name, colon, text = message.partition(": ")
        if not colon or not re.fullmatch(r"[A-Za-z_][\w.]*", name):
            name, text = "", message
        message_templates()  # read once, before the clock starts
        translated = _translated(text, 0, time.monotonic() + MAX_SECONDS)
        if translated is None:
            return message
        return f"{name}: {translated}" if name else translated
    except _OutOfTime:
        LOG.warning("test message not translated within %g s: English kept", MAX_SECONDS)
        return message
    except Exception as error:  # noqa: BLE001 (a help: the English stands)
        LOG.warning("test message not translated (%s: %s)", type(error).__name__, error)
        return message


# -- templates for the catalogs ------------------------------------------------------------

def _new_catalog():
    from babel.messages.catalog import Catalog

    catalog = Catalog(project="Self-Attention and Transformers", version="", copyright_holder=None,
                      msgid_bugs_address=None)
    catalog.fuzzy = False
    return catalog


def grader_template(root=paths.REPO_ROOT / "autograder"):
    """The grader's own words: `_()`/`N_()` in its Python modules and the feedback page's template."""
    from babel.messages.extract import extract
    from jinja2.ext import babel_extract

    catalog = _new_catalog()
    keywords = {"_": None, "N_": None}
    files = sorted(p for p in Path(root).rglob("*.py") if "__pycache__" not in p.parts)
    files += sorted(Path(root).rglob("*.j2"))
    for path in files:
        method = babel_extract if path.suffix == ".j2" else "python"
        with open(path, "rb") as handle:
            for line, message, _comments, _context in extract(method, handle, keywords=keywords):
                if isinstance(message, str) and message:
                    catalog.add(message, locations=[(str(path.relative_to(Path(root).parent)), line)])
    return catalog


def diagnoses_template(assignment, catalogues=paths.CATALOGUES):
    from autograder.judging import catalogue

    catalog = _new_catalog()
    for answer in catalogue.load(assignment, catalogues):
        if answer.explanation:
            catalog.add(answer.explanation, locations=[(f"autograder/catalogues/{assignment}.yml#{answer.id}", 0)])
    return catalog


def tests_template(assignment, solutions=paths.SOLUTIONS):
    catalog = _new_catalog()
    for text, location in test_templates(assignment, solutions):
        catalog.add(text, locations=[(location, 0)])
    return catalog


def grader_messages_template(root=paths.REPO_ROOT / "autograder"):
    catalog = _new_catalog()
    for text, location in grader_message_templates(root):
        catalog.add(text, locations=[(location, 0)])
    return catalog


def write_templates(out, solutions=paths.SOLUTIONS):
    """OUT/grader.pot, OUT/diagnoses/ASSIGNMENT.pot, OUT/tests/ASSIGNMENT.pot and
    OUT/tests/_grader.pot."""
    from babel.messages.pofile import write_po

    out = Path(out)
    made = {out / "grader.pot": grader_template(),
            out / "tests" / f"{GRADER_MESSAGES}.pot": grader_messages_template()}
    for assignment in paths.assignments(solutions):
        made[out / "diagnoses" / f"{assignment}.pot"] = diagnoses_template(assignment)
        made[out / "tests" / f"{assignment}.pot"] = tests_template(assignment, solutions)
    for path, catalog in made.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            write_po(handle, catalog, width=76, omit_header=False, include_lineno=False)
    return list(made)


def main(argv):
    if len(argv) == 2 and argv[0] == "templates":
        for path in write_templates(argv[1]):
            print(f"wrote {path}")
        return 0
    print("python -m autograder.reporting.language templates OUT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
