"""The Spanish edition's catalogs: complete, current, and faithful to what must not change.

The pages listed in `locales/es/translated.txt` are the translated ones (the list grows
chapter by chapter; book/translating.md). For each of them, `locales/es/LC_MESSAGES/PAGE.po`
must

* exist and hold exactly the messages that Sphinx's gettext builder extracts from the
  English page today: a changed English sentence is a new message, which
  `sphinx-intl update` adds to the catalog as fuzzy (or untranslated), so a catalog that
  was not updated fails here, and one that was updated fails the next check until the
  translator has done the work;
* have no untranslated and no fuzzy entry;
* keep in each entry what a translation must not change: math (`$...$`, `$$...$$`, a
  display equation) but for the words inside its `\\text{...}` (`\\textrm`, `\\textit`,
  `\\mbox`), which are prose and translated; inline code; roles and their targets
  (`{doc}`, `{ref}`, `{cite:p}`, ...: the text of a `{ref}` with an explicit target may
  change, the target may not); link targets; and format placeholders (`{name}`, `%s`);
* not start a heading with "1. " (MyST would read the translated heading as a list and
  Sphinx would silently keep the English one: write `1\\. `);
* use the terms of `locales/es/glossary.yml`: where the English entry names a checked
  term, the Spanish names its Spanish term; and the first entry of a page that names a
  term the field also uses in English (softmax, embedding, KV cache) keeps the English
  word (in parentheses).

Run alone: `python -m pytest tests/test_translations.py`, or
`python tests/test_translations.py` for the report without pytest.
"""

import collections
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
LOCALES = REPO / "locales" / "es"
CATALOGS = LOCALES / "LC_MESSAGES"
MANIFEST = LOCALES / "translated.txt"
GLOSSARY = LOCALES / "glossary.yml"

try:
    from babel.messages.pofile import read_po
except ImportError:  # pragma: no cover - Babel comes with Sphinx
    read_po = None


def translated_pages():
    lines = MANIFEST.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def read_catalog(page):
    with open(CATALOGS / f"{page}.po", "rb") as f:
        return read_po(f)


# -- what must not change -------------------------------------------------------------

# A role ({doc}`page`) or a code span (`x`, whose text may look like a role: `head {h}`)
ROLE_OR_CODE = re.compile(r"(?<!\w)\{([A-Za-z][\w:.-]*)\}(`+)|(`+)")
DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$")
CODE = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<((?:https?|mailto):[^>\s]+)>")
PLACEHOLDER = re.compile(r"(?<![{\\])\{[A-Za-z_]\w*\}(?!`)|%(?:\([A-Za-z_]\w*\))?[sdrfi]")
LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
TEXT_IN_MATH = re.compile(r"\\(text|textrm|textit|mbox)\s*\{")  # not \texttt, \textbf


def math_key(math):
    """What a translation must keep of an equation: everything but the words of its
    `\\text{...}` (prose, translated: "if", "for every"), whose command stays; spaces
    do not count."""
    kept, start = [], 0
    for match in TEXT_IN_MATH.finditer(math):
        if match.start() < start:
            continue  # inside the braces of the previous one
        kept.append(math[start:match.start()] + f"\\{match.group(1)}{{}}")
        depth, position = 1, match.end()
        while position < len(math) and depth:
            if math[position] == "\\":
                position += 1  # an escaped character: \{ or \}
            elif math[position] == "{":
                depth += 1
            elif math[position] == "}":
                depth -= 1
            position += 1
        start = position
    kept.append(math[start:])
    return " ".join("".join(kept).split())


def role_spans(text):
    """(start, end, name, content) of each role of `text`, read left to right as MyST
    does, so that what is inside a code span is never taken for a role."""
    spans, position = [], 0
    while (match := ROLE_OR_CODE.search(text, position)) is not None:
        ticks = match.group(2) or match.group(3)
        end = text.find(ticks, match.end())
        if end < 0:
            break
        if match.group(1) is not None:
            spans.append((match.start(), end + len(ticks), match.group(1), text[match.end():end]))
        position = end + len(ticks)
    return spans


def without_roles(text):
    for start, end, _, _ in reversed(role_spans(text)):
        text = text[:start] + " " + text[end:]
    return text


def _role_key(name, content):
    # `{ref}`text <target>``: the text is translated, the target is not
    match = re.fullmatch(r"(.*?)\s*<([^<>]+)>", content, re.S)
    if match and match.group(1):
        return f"{{{name}}}<{match.group(2)}>"
    return f"{{{name}}}`{content}`"


def invariants(text):
    """What a translation must keep from `text`: a dict kind -> Counter of items."""
    found = collections.defaultdict(collections.Counter)
    rest = text
    for _, _, name, content in role_spans(rest):
        found["role"][_role_key(name, content)] += 1
    rest = without_roles(rest)
    for match in CODE.finditer(rest):
        found["code"][match.group(2).strip()] += 1
    rest = CODE.sub(" ", rest)
    for match in DISPLAY_MATH.finditer(rest):
        found["math"][math_key(match.group(1))] += 1
    rest = DISPLAY_MATH.sub(" ", rest)
    for match in INLINE_MATH.finditer(rest):
        found["math"][math_key(match.group(1))] += 1
    rest = INLINE_MATH.sub(" ", rest)
    for match in LINK.finditer(rest):
        found["link"][match.group(1) or match.group(2)] += 1
    for match in PLACEHOLDER.finditer(rest):
        found["placeholder"][match.group(0)] += 1
    return found


def is_equation(msgid):
    """A message that is a display equation (an amsmath environment or a math block):
    LaTeX commands and no `$`. Its translation is the equation itself, the words of its
    `\\text{...}` translated."""
    return "$" not in msgid and LATEX_COMMAND.search(msgid) is not None and not role_spans(msgid)


def entry_problems(msgid, msgstr):
    problems = []
    if is_equation(msgid):
        if math_key(msgstr) != math_key(msgid):
            problems.append("an equation must be copied unchanged (but for the words of "
                            "its \\text{...})")
        return problems
    want, got = invariants(msgid), invariants(msgstr)
    for kind in ("math", "code", "role", "link", "placeholder"):
        if want[kind] != got[kind]:
            lost = sorted((want[kind] - got[kind]).elements())
            added = sorted((got[kind] - want[kind]).elements())
            problems.append(f"{kind} differs: English has {lost or 'nothing more'}, "
                            f"Spanish has {added or 'nothing more'}")
    if re.match(r"\d+\.\s", msgid) and re.match(r"\d+\.\s", msgstr):
        problems.append('starts with "N. ", which MyST reads as a list: write "N\\\\. "')
    for marker in ("- ", "* ", "+ ", "# ", "> "):
        if msgstr.startswith(marker) and not msgid.startswith(marker):
            problems.append(f'starts with "{marker.strip()}", which MyST reads as markup')
    return problems


# -- terminology ----------------------------------------------------------------------

def fold(text):
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in text if not unicodedata.combining(c)).replace("*", "")


def english_pattern(term):
    words = [re.escape(w) for w in term.lower().split()]
    words[-1] += "(?:s|es)?"
    return re.compile(r"(?<![\w-])" + r"[\s-]+".join(words) + r"(?![\w-])", re.I)


def spanish_stems(term):
    """A Spanish term as stems that plural and accent do not change: 'codificaciones
    posicionales' holds the stems of 'codificación posicional'."""
    return [w if len(w) <= 4 else w[:max(4, len(w) - 2)] for w in fold(term).split()]


def has_spanish(term, text):
    folded = fold(text)
    position = 0
    for stem in spanish_stems(term):
        position = folded.find(stem, position)
        if position < 0:
            return False
        position += len(stem)
    return True


def english_text(msgid):
    # British and American spellings are the same term
    return re.sub(r"(normali|organi)s(ation|e)", r"\1z\2", msgid, flags=re.I)


def terminology_problems(page, catalog, terms):
    problems = []
    seen = set()
    for message in catalog:
        if not message.id or not message.string or is_equation(message.id):
            continue
        # a term inside code (`mask=None`) is a name, kept as it is in the Spanish too
        english = CODE.sub(" ", without_roles(english_text(message.id)))
        for term in terms:
            if not english_pattern(term["en"]).search(english):
                continue
            if term.get("check") and not has_spanish(term["es"], message.string):
                problems.append(f"{page}: '{term['en']}' should be '{term['es']}' in: "
                                f"{message.string[:90]}")
            if term.get("first_use") and term["en"] not in seen:
                # the English word(s) of the glossary's parentheses: "(*feed-forward*)"
                inside = re.search(r"\(([^)]*)\)", term["first_use"])
                word = (inside.group(1) if inside else term["en"]).strip("*_ ")
                if word.lower() not in message.string.lower():
                    problems.append(f"{page}: the first use of '{term['en']}' should read "
                                    f"'{term['first_use']}': {message.string[:90]}")
            seen.add(term["en"])
    return problems


# -- the English pages today ----------------------------------------------------------

def extract_templates(out):
    """Run Sphinx's gettext builder on the configuration Jupyter Book generates (no
    notebook executed): one .pot per page under `out`."""
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / "jupyter-book"), "config", "sphinx", str(REPO)], check=True,
                   capture_output=True, text=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO / "_ext"), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([str(bin_dir / "sphinx-build"), "-b", "gettext", "-q", "-c", str(REPO),
                           "-D", "nb_execution_mode=off", str(REPO), str(out)],
                          env=env, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


# -- the tests ------------------------------------------------------------------------

pytestmark = pytest.mark.skipif(read_po is None, reason="Babel is not installed")


def test_manifest_names_pages_of_the_book():
    toc = (REPO / "_toc.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"(?:root|file):\s*(\S+)", toc))
    for page in translated_pages():
        assert page in listed, f"{page} (locales/es/translated.txt) is not a page of _toc.yml"
        assert (CATALOGS / f"{page}.po").is_file(), (
            f"{page} is listed as translated but has no catalog: run `make translations`")


def catalog_problems(name, catalog, check=None):
    """What is wrong with the entries of `name`'s catalog: fuzzy, untranslated, or (by
    `check(message)`, entry_problems of its msgid and msgstr by default) changed where a
    translation must not change."""
    check = check or (lambda message: entry_problems(message.id, message.string))
    problems = []
    for message in catalog:
        if not message.id:
            continue  # the catalog's header
        where = f"{name}.po, \"{message.id[:60]}\""
        if message.fuzzy:
            problems.append(f"{where}: fuzzy (the English changed): check and clear the flag")
        elif not message.string:
            problems.append(f"{where}: untranslated")
        else:
            problems.extend(f"{where}: {p}" for p in check(message))
    return problems


@pytest.mark.parametrize("page", translated_pages())
def test_every_entry_translated_and_faithful(page):
    problems = catalog_problems(page, read_catalog(page))
    assert not problems, "\n".join(problems)


def test_terminology_follows_the_glossary():
    terms = yaml.safe_load(GLOSSARY.read_text(encoding="utf-8"))["terms"]
    problems = []
    for page in translated_pages():
        problems.extend(terminology_problems(page, read_catalog(page), terms))
    assert not problems, "\n".join(problems)


def test_catalogs_hold_todays_english(tmp_path):
    if shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("jupyter-book is not installed beside this Python")
    extract_templates(tmp_path)
    stale = []
    for page in translated_pages():
        with open(tmp_path / f"{page}.pot", "rb") as f:
            today = {m.id for m in read_po(f) if m.id}
        held = {m.id for m in read_catalog(page) if m.id}
        if today != held:
            new = sorted(today - held)
            stale.append(f"{page}: {len(new)} English message(s) not in the catalog "
                         f"(first: {new[:1]}), {len(held - today)} no longer in the page")
    assert not stale, ("catalogs behind the English pages; run `make translations`, then "
                       "translate the new and fuzzy entries:\n" + "\n".join(stale))


def test_language_switch_leads_to_the_same_page():
    """In a built book (`make book`), every page of each edition links to the same page in
    the other one, and that page exists."""
    english, spanish = REPO / "_build" / "html", REPO / "_build" / "html" / "es"
    if not (spanish / "book").is_dir() or not (english / "book").is_dir():
        pytest.skip("both editions are not built: run `make book`")
    switch = re.compile(r'<nav class="language-switch"[^>]*>.*?href="([^"]+)"', re.S)
    problems, pages = [], 0
    for root, other in ((english, spanish), (spanish, english)):
        for page in sorted((root / "book").rglob("*.html")):
            pages += 1
            match = switch.search(page.read_text(encoding="utf-8"))
            if match is None:
                problems.append(f"{page}: no language switch")
                continue
            target = (page.parent / match.group(1)).resolve()
            if target != (other / page.relative_to(root)).resolve() or not target.is_file():
                problems.append(f"{page}: the switch leads to {target}")
    assert pages and not problems, "\n".join(problems)


def test_checks_catch_what_they_claim():
    """The checks above fail on the faults they name."""
    assert entry_problems("Scale by $\\sqrt{d_k}$.", "Escala por $\\sqrt{d}$.")
    assert entry_problems("Call `softmax(x)`.", "Llama a `softmax(y)`.")
    assert entry_problems("See {doc}`quick_start`.", "Ver {doc}`for_instructors`.")
    assert not entry_problems("{ref}`the list <intro-chapters>`", "{ref}`la lista <intro-chapters>`")
    assert entry_problems("{ref}`the list <intro-chapters>`", "{ref}`la lista <chapters>`")
    assert entry_problems("[the page](https://a.org/x)", "[la página](https://a.org/y)")
    # `{h}` inside a code span is code, not a role: the prose after it is translated
    assert not entry_problems("`head {h}` gives `head 3`, see {doc}`glossary`.",
                              "`head {h}` da `head 3`, véase {doc}`glossary`.")
    assert entry_problems("`head {h}` gives `head 3`.", "`cabeza {h}` da `head 3`.")
    assert entry_problems("Row {row} sums to %s", "La fila {fila} suma %s")
    assert entry_problems("1. The bottleneck, measured", "1. El cuello de botella, medido")
    assert not entry_problems("1. The bottleneck, measured", "1\\. El cuello de botella, medido")
    assert entry_problems("\\hat f(x) = \\sum_i a_i", "\\hat f(x) = \\sum_j a_j")
    # the words of \text{...} are translated; the command and the math around them are not
    equation = "a_{ij} = 0 \\quad \\text{if the row has no {allowed} key,} \\ d_\\text{model}"
    assert not entry_problems(equation, equation.replace(
        "if the row has no {allowed} key,", "si la fila no tiene ninguna clave permitida,"))
    assert entry_problems(equation, equation.replace("a_{ij} = 0", "a_{ji} = 0"))
    assert entry_problems(equation, equation.replace("\\text{if", "\\textbf{if"))
    assert not entry_problems("For $x_i \\mbox{ and } \\textit{all}$ of them.",
                              "Para $x_i \\mbox{ y } \\textit{todos}$ ellos.")
    assert entry_problems("For $x_i \\text{ and } y$ of them.", "Para $x_j \\text{ y } y$ ellos.")
    assert entry_problems("For $x \\text{ and } y$.", "Para $x \\text{ y }$.")
    assert entry_problems("$\\texttt{<bos>}$ first.", "$\\texttt{<inicio>}$ primero.")
    terms = [{"en": "positional encoding", "es": "codificación posicional", "check": True},
             {"en": "softmax", "es": "softmax", "first_use": "función exponencial normalizada (softmax)"}]
    good = [type("M", (), {"id": "Positional encodings and the softmax.",
                           "string": "Codificaciones posicionales y la función exponencial "
                                     "normalizada (*softmax*)."})()]
    bad = [type("M", (), {"id": "Positional encodings and the softmax.",
                          "string": "Posiciones codificadas y la exponencial normalizada."})()]
    assert not terminology_problems("p", good, terms)
    assert len(terminology_problems("p", bad, terms)) == 2


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
