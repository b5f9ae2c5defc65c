"""The Spanish student notebooks: the Markdown of solutions/ through gettext catalogs.

The book's pages are translated by Sphinx's gettext machinery (book/translating.md); the
assignments' notebooks are not pages Sphinx reads, so their Markdown cells are cut into
messages here, in the same way: one message per paragraph, heading and list item, with
the lines of a paragraph joined by spaces. Fenced code and display equations standing
alone ($$...$$ as a block of their own) are copied, but for an equation whose
`\\text{...}` holds words ("for any constant"): that one is a message, its lines kept,
whose translation changes only those words (tests/test_translations.py checks the
math). The messages of an assignment make `_build/gettext/solutions/ASSIGNMENT.pot`,
which `sphinx-intl update` (`make translations`) merges into
`locales/es/LC_MESSAGES/solutions/ASSIGNMENT.po` as it does the book's catalogs: a
changed English message becomes a fuzzy entry.

`translate_notebook` writes a Spanish notebook from an English one: each Markdown cell's
messages are replaced by their translations (an untranslated or fuzzy entry keeps the
English, as Sphinx does), every other cell, id and metadata stays as it is, the
translated Markdown cells get the checksum of their new text (nbgrader's validate checks
it), and the notebook's metadata says `"lang": "es"`.

    python -m autograder.translation templates OUT   # write OUT/solutions/ASSIGNMENT.pot
"""

import copy
import re
import sys
from functools import lru_cache
from pathlib import Path

from autograder import paths

LANGUAGE = "es"
METADATA_KEY = "lang"  # the notebook's natural language, as HTML's lang attribute

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
LIST_ITEM = re.compile(r"^(\s{0,3}(?:[*+-]|\d+[.)])\s+)(.*)$")


def _blocks(markdown):
    """The blocks of a Markdown cell, split at blank lines (a fenced block whole)."""
    blocks, current, fenced = [], [], False
    for line in markdown.splitlines():
        if fenced:
            current.append(line)
            if FENCE.match(line):
                fenced = False
            continue
        if FENCE.match(line):
            fenced = True
            current.append(line)
            continue
        if not line.strip():
            if current:
                blocks.append(current)
                current = []
            continue
        current.append(line)
    if current:
        blocks.append(current)
    return blocks


PROSE_IN_MATH = re.compile(r"\\(?:text|textrm|textit|mbox)\s*\{[^{}]*\s[^{}]*\}")  # words, not a name


def _is_equation(block):
    text = "\n".join(block).strip()
    return text.startswith("$$") and text.endswith("$$") and text.count("$$") == 2


def _is_verbatim(block):
    """Fenced code, and a display equation with no words to translate (`\\text{for }` has
    words, as in the book's catalogs; `\\text{model}` is a name)."""
    if FENCE.match(block[0]):
        return True
    return _is_equation(block) and not PROSE_IN_MATH.search("\n".join(block))


def _join(lines):
    return " ".join(line.strip() for line in lines)


def parse(markdown):
    """A Markdown cell as a list of parts: ("verbatim", text) for what is copied, and
    (prefix, message) for a heading, a paragraph or a list item, whose text is `message`
    and which reads `prefix + message` (a heading's `## `, a list item's `* `), one
    part per line; parts of one block are joined by a newline, blocks by a blank line."""
    parsed = []
    for block in _blocks(markdown):
        if _is_verbatim(block):
            parsed.append([("verbatim", "\n".join(block))])
            continue
        if _is_equation(block):  # one message, its lines kept
            parsed.append([("", "\n".join(block))])
            continue
        parts, lines, prefix = [], [], ""

        def flush():
            if lines:
                parts.append((prefix, _join(lines)))

        for line in block:
            heading = HEADING.match(line)
            item = LIST_ITEM.match(line)
            if heading:
                flush()
                parts.append((heading.group(1) + " ", heading.group(2)))
                lines, prefix = [], ""
            elif item:
                flush()
                lines, prefix = [item.group(2)], item.group(1)
            else:
                lines.append(line)
        flush()
        parsed.append(parts)
    return parsed


def messages(markdown):
    """The messages of a Markdown cell, in order."""
    return [message for block in parse(markdown) for kind, message in block if kind != "verbatim"]


def render(markdown, translate):
    """The cell with each message replaced by `translate(message)`."""
    blocks = []
    for block in parse(markdown):
        lines = [text if kind == "verbatim" else kind + translate(text) for kind, text in block]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def translated_cells(notebook):
    """The Markdown cells a translation replaces: the instructor's (not a student's answer)."""
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "markdown" and not meta.get("solution"):
            yield cell


def _source(cell):
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


# -- catalogs ---------------------------------------------------------------------------

def catalog_path(assignment, locales=paths.LOCALES, language=LANGUAGE):
    return Path(locales) / language / "LC_MESSAGES" / "solutions" / f"{assignment}.po"


def template(assignment, solutions=paths.SOLUTIONS):
    """A Babel catalog of the messages of an assignment's notebooks (a .pot's content)."""
    import nbformat
    from babel.messages.catalog import Catalog

    catalog = Catalog(project="Self-Attention and Transformers", version="",
                      copyright_holder=None, msgid_bugs_address=None)
    catalog.fuzzy = False
    for path in paths.assignment_notebooks(assignment, solutions):
        notebook = nbformat.read(path, as_version=4)
        for cell in translated_cells(notebook):
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or cell.get("id", "")
            for message in messages(_source(cell)):
                catalog.add(message, locations=[(f"solutions/{assignment}/{path.name}#{grade_id}", 0)])
    return catalog


def write_templates(out, solutions=paths.SOLUTIONS):
    """Write out/solutions/ASSIGNMENT.pot for every assignment; return their paths."""
    from babel.messages.pofile import write_po

    written = []
    folder = Path(out) / "solutions"
    folder.mkdir(parents=True, exist_ok=True)
    for assignment in paths.assignments(solutions):
        path = folder / f"{assignment}.pot"
        with open(path, "wb") as handle:
            write_po(handle, template(assignment, solutions), width=76, omit_header=False, include_lineno=False)
        written.append(path)
    return written


def read_catalog(path):
    from babel.messages.pofile import read_po

    with open(path, "rb") as handle:
        return read_po(handle)


def translations(path):
    """{English message: translation} of a catalog, without its untranslated and fuzzy entries."""
    if not Path(path).is_file():
        return {}
    return {m.id: m.string for m in read_catalog(path) if m.id and m.string and not m.fuzzy}


@lru_cache(maxsize=None)
def all_translations(locales=paths.LOCALES, language=LANGUAGE):
    """The translations of every assignment's catalog together (the grader's assembly reads
    a source notebook without knowing its assignment)."""
    merged = {}
    for path in sorted((Path(locales) / language / "LC_MESSAGES" / "solutions").glob("*.po")):
        for english, spanish in translations(path).items():
            merged.setdefault(english, spanish)
    return merged


# -- notebooks ---------------------------------------------------------------------------

def translate_source(markdown, table):
    return render(markdown, lambda message: table.get(message, message))


def translate_notebook(notebook, table, language=LANGUAGE):
    """A copy of `notebook` (an nbformat node) in `language`: only the instructor's Markdown
    cells (their text and checksum) and the notebook's language differ."""
    from nbgrader.utils import compute_checksum

    result = copy.deepcopy(notebook)
    for cell in translated_cells(result):
        english = _source(cell)
        cell["source"] = translate_source(english, table)
        meta = cell.get("metadata", {}).get("nbgrader")
        if cell["source"] != english and isinstance(meta, dict) and "checksum" in meta:
            meta["checksum"] = compute_checksum(cell)
    result["metadata"][METADATA_KEY] = language
    return result


def language_of(notebook):
    language = notebook.get("metadata", {}).get(METADATA_KEY)
    return language if isinstance(language, str) else ""


def main(argv):
    if len(argv) == 2 and argv[0] == "templates":
        for path in write_templates(argv[1]):
            print(f"wrote {path}")
        return 0
    print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
