"""The words of the lessons' figures in the reader's language.

The lessons draw their figures in English, with matplotlib's own calls (`set_title`,
`set_xlabel`, `label=`, `legend`, `text`, `annotate`, often with f-strings), and their
code reads the same in both editions of the book. When the environment names another
language (``COURSE_LANGUAGE=es``, as `make book-es` sets it), importing :mod:`course`
(which every lesson does) calls :func:`install`: from then on, just before matplotlib
draws a figure (``Figure.draw``, and ``Figure.tight_layout``, so that the layout is
made for the translated words), the text of every title, suptitle, axis label, legend
entry, annotation and colorbar label, and of every tick label that the catalog names,
is replaced by its translation from the gettext catalog
``locales/LANG/LC_MESSAGES/figures.po``. In English (no ``COURSE_LANGUAGE``, or
``en``) nothing is installed: matplotlib is left as it is.

The catalog holds exact strings ("attention weight") and patterns for the labels that
f-strings make: an entry with the flag ``#, figure-pattern`` whose msgid has
placeholders, ``head {h}`` -> ``cabeza {h}``; a placeholder stands for a number or a
symbol (text without a word in it), kept as it is in the translation. Exact entries
come first.

While it translates, the hook records: each figure that the inline backend shows
carries, in its output's metadata, the English words it was drawn with
(``course_figure_words``; its tick labels and monospace texts that are words, mostly
tokens of a sentence, apart in ``course_figure_ticks``). `make translations` gathers
them from the lessons that the Spanish build executed (`python -m course.figure_words
template _build/gettext/figures.pot`) into the catalog's template: nothing runs the
lessons only to extract their words, and tests/test_figure_words.py checks the catalog
against them.

The chapters' drawn figures (SVG files that a script beside them writes) go through
:class:`StaticFigures`: each is written as drawn, in English, then translated with
:func:`translate_figure` and written as ``NAME.es.svg``, the file that Sphinx's
``figure_language_filename`` shows in the Spanish edition; their English words are
recorded in ``figure_words.json`` beside them, which the template reads too.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

LANGUAGE_VARIABLE = "COURSE_LANGUAGE"
LOCALES = Path(__file__).resolve().parent.parent / "locales"
DOMAIN = "figures"
METADATA_KEY = "course_figure_words"
TICKS_KEY = "course_figure_ticks"
PATTERN_FLAG = "figure-pattern"

# A placeholder of a pattern entry: `{name}`, as an f-string writes it.
PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)\}")
# What a placeholder stands for: a number or a symbol, text without a word in it
# ("0", "2.0", "$d_k$"), so that "head {h}" takes "head 3" and never "head removed".
_VALUE = r"(?:(?![^\W\d_]{2}).)+?"
# A string is words when, once its math ($...$) is set aside, it has a run of two
# letters: "head 3" and "$\|q\|$ norm" are, "0.25", "$10^{3}$" and "(a)" are not.
_MATH = re.compile(r"(?<!\\)\$.*?(?<!\\)\$")
_WORD = re.compile(r"[^\W\d_]{2,}")


def is_words(text):
    """Whether `text` holds words to translate (not a number, a formula or a letter)."""
    return bool(_WORD.search(_MATH.sub(" ", text)))


@dataclass
class Catalog:
    """Translations of figure strings: exact ones, and patterns with placeholders."""

    exact: dict = field(default_factory=dict)
    patterns: list = field(default_factory=list)  # (msgid, regex, msgstr), longest first

    @classmethod
    def read(cls, path):
        """The translated, non-fuzzy entries of a .po file (Babel)."""
        from babel.messages.pofile import read_po

        with open(path, "rb") as f:
            po = read_po(f)
        catalog = cls()
        for message in po:
            if not message.id or not message.string or message.fuzzy:
                continue
            catalog.add(message.id, message.string, PATTERN_FLAG in message.flags)
        return catalog

    def add(self, msgid, msgstr, pattern=False):
        if pattern and PLACEHOLDER.search(msgid):
            self.patterns.append((msgid, pattern_regex(msgid), msgstr))
            # the most specific pattern first: the one with the most literal text
            self.patterns.sort(key=lambda p: -len(PLACEHOLDER.sub("", p[0])))
        else:
            self.exact[msgid] = msgstr

    def match(self, text):
        """(msgid, translation) for `text`, or None when the catalog has no entry."""
        if text in self.exact:
            return text, self.exact[text]
        for msgid, regex, msgstr in self.patterns:
            found = regex.fullmatch(text)
            if found:
                values = found.groupdict()
                return msgid, PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), msgstr)
        return None

    def translate(self, text):
        found = self.match(text)
        return text if found is None else found[1]


@functools.lru_cache(maxsize=None)
def pattern_regex(msgid):
    """`head {h}` -> a regex whose group `h` takes any text where the placeholder is."""
    parts, position, seen = [], 0, set()
    for match in PLACEHOLDER.finditer(msgid):
        parts.append(re.escape(msgid[position:match.start()]))
        name = match.group(1)
        parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>{_VALUE})")
        seen.add(name)
        position = match.end()
    parts.append(re.escape(msgid[position:]))
    return re.compile("".join(parts), re.S)


# -- the texts of a figure --------------------------------------------------------------

def figure_texts(figure):
    """Every visible Text of `figure` that is not a tick label: titles, suptitles, axis
    and colorbar labels, legend entries and titles, annotations, texts on the axes.
    (Tick labels are remade by their formatter at each draw: see `translate_figure`.)"""
    from matplotlib.text import Text

    ticks = set()
    for axis in _axes_axes(figure):
        for tick in (*axis.majorTicks, *axis.minorTicks):
            ticks.update((id(tick.label1), id(tick.label2)))
        ticks.add(id(axis.offsetText))  # "1e-3", "+1": a number
    seen = set()
    for artist in figure.findobj(Text):
        if id(artist) in seen or id(artist) in ticks:
            continue
        seen.add(id(artist))
        text = artist.get_text()
        if artist.get_visible() and isinstance(text, str) and text.strip():
            yield artist


def _axes_axes(figure):
    from matplotlib.axes import Axes

    for axes in figure.findobj(Axes):  # those of subfigures too
        yield from (axes.xaxis, axes.yaxis)


def _translated(holder, english, catalog):
    """(English, shown) of a text held by `holder` (a Text, a formatter), translating
    it unless it shows the translation of an earlier draw."""
    shown = getattr(holder, "_course_figure_words", None)
    if shown is not None and shown[1] == english:
        return shown  # translated at an earlier draw: `english` is its translation
    translation = english if catalog is None else catalog.translate(english)
    holder._course_figure_words = (english, translation)
    return english, translation


def _fixed_labels(formatter):
    """{position: label} of the tick labels a lesson gave (`set_xticks(..., labels=)`,
    `set_xticklabels`), or None for labels that a formatter computes (numbers)."""
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    if isinstance(formatter, FixedFormatter):
        return {i: str(label) for i, label in enumerate(formatter.seq)}
    func = getattr(formatter, "func", None) if isinstance(formatter, FuncFormatter) else None
    if (isinstance(func, functools.partial) and len(func.args) == 1
            and isinstance(func.args[0], dict)
            and getattr(func.func, "__name__", "") == "_format_with_dict"):
        return {key: str(label) for key, label in func.args[0].items()}
    return None


def _set_fixed_labels(formatter, labels):
    from matplotlib.ticker import FixedFormatter

    if isinstance(formatter, FixedFormatter):
        formatter.seq = [labels[i] for i in range(len(labels))]
    else:
        formatter.func = functools.partial(formatter.func.func, labels)


def translate_figure(figure, catalog):
    """Put the catalog's translation in place of each text of `figure` it names; return
    what the figure says in English: a list of (kind, English text), each once, kind
    "text" or "tick".

    Tick labels, and texts in a monospace font, are recorded as kind "tick": most are
    numbers, or the tokens of a sentence, data that the catalog does not name, so they
    stay as they are. A tick label is written by its axis' formatter at each draw, so a
    fixed list of labels (`set_xticks(..., labels=...)`) is translated in the formatter
    itself."""
    english_words = []

    def note(kind, english):
        if is_words(english) and (kind, english) not in english_words:
            english_words.append((kind, english))

    for artist in figure_texts(figure):
        english, shown = _translated(artist, artist.get_text(), catalog)
        if shown != artist.get_text():
            artist.set_text(shown)
        # text set in a monospace font is data (the words of a passage, code), as
        # tokens on the ticks are: translated only where the catalog names it
        data = "monospace" in [family.lower() for family in artist.get_fontfamily()]
        note("tick" if data else "text", english)
    for axis in _axes_axes(figure):
        for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
            labels = _fixed_labels(formatter)
            if labels is None:
                continue
            english, shown = _translated(formatter, tuple(labels.values()), None)
            if catalog is not None and english == shown:
                shown = tuple(catalog.translate(label) for label in english)
                formatter._course_figure_words = (english, shown)
            _set_fixed_labels(formatter, dict(zip(labels, shown)))
            for label in english:
                note("tick", label)
    figure._course_figure_words = english_words
    return english_words


def words_to_record(english_words):
    """What a figure's output records: {METADATA_KEY: the English texts that the
    catalog must hold, TICKS_KEY: its tick labels (and monospace texts) that are
    words}. These are recorded apart: most are tokens of a sentence, data that stays as
    it is; the catalog holds those it names by hand (`layer {l}`)."""
    record = {}
    for kind, english in english_words:
        key = TICKS_KEY if kind == "tick" else METADATA_KEY
        if english not in record.setdefault(key, []):
            record[key].append(english)
    return record


# -- installing the hook ---------------------------------------------------------------

_installed = {}


def language():
    """The language the environment asks the figures to speak, or None for English."""
    value = os.environ.get(LANGUAGE_VARIABLE, "").strip()
    return None if value in ("", "en") or value.startswith("en_") else value


def catalog_path(lang):
    return LOCALES / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def install(lang=None, catalog=None):
    """Translate every figure drawn from now on into `lang` (or the environment's
    language); do nothing in English. Returns the catalog in use, or None."""
    lang = lang or language()
    if lang is None:
        return None
    if catalog is None:
        path = catalog_path(lang)
        catalog = Catalog.read(path) if path.is_file() else Catalog()
    _installed["catalog"] = catalog
    if "draw" in _installed:
        return catalog

    from matplotlib.figure import Figure

    draw, tight_layout = Figure.draw, Figure.tight_layout

    @functools.wraps(draw)
    def draw_translated(self, renderer):
        translate_figure(self, _installed["catalog"])
        return draw(self, renderer)

    @functools.wraps(tight_layout)
    def tight_layout_translated(self, *args, **kwargs):
        translate_figure(self, _installed["catalog"])
        return tight_layout(self, *args, **kwargs)

    Figure.draw, Figure.tight_layout = draw_translated, tight_layout_translated
    _installed.update(draw=draw, tight_layout=tight_layout)
    _record_in_outputs()
    return catalog


def uninstall():
    """Leave matplotlib as it was before :func:`install` (for tests)."""
    from matplotlib.figure import Figure

    if "draw" in _installed:
        Figure.draw, Figure.tight_layout = _installed.pop("draw"), _installed.pop("tight_layout")
    backend = sys.modules.get("matplotlib_inline.backend_inline")
    if backend is not None and "fetch" in _installed:
        backend._fetch_figure_metadata = _installed.pop("fetch")
    _installed.clear()


def _record_in_outputs():
    """Make the inline backend put each figure's English words in its output's metadata
    (read by `template`); without the inline backend (a script), nothing to record."""
    try:
        import matplotlib_inline.backend_inline as backend
    except ImportError:  # pragma: no cover - not in a Jupyter kernel
        return
    fetch = getattr(backend, "_fetch_figure_metadata", None)
    if fetch is None or "fetch" in _installed:  # pragma: no cover - another version
        return

    def fetch_with_words(figure):
        metadata = dict(fetch(figure) or {})
        metadata.update(words_to_record(translate_figure(figure, _installed.get("catalog"))))
        return metadata or None

    backend._fetch_figure_metadata = fetch_with_words
    _installed["fetch"] = fetch


def install_from_environment():
    """What importing :mod:`course` does: install the hook when a language is asked."""
    if language() is not None:
        install()


# -- the chapters' drawn figures (SVG files written by a script) -------------------------

# Beside a chapter's drawn figures, what they say in English: {figure: words_to_record}.
STATIC_WORDS = "figure_words.json"


def translated_name(name, lang):
    """`tiles.svg` -> `tiles.es.svg`: Sphinx's default `figure_language_filename`,
    the file a build in `lang` shows in place of `name`."""
    path = Path(name)
    return f"{path.stem}.{lang}{path.suffix}"


class StaticFigures:
    """A script's figures written twice: as drawn (English), then translated into `lang`
    through the catalog (`NAME.LANG.svg`); their English words recorded in
    STATIC_WORDS in `out`, which the catalog's template reads (`static_figures`).

    `save(figure, name, fit=None, **savefig)`: `fit(figure)`, if given, is called after
    the translation, before the translated figure is written (to widen a box)."""

    def __init__(self, out, lang="es"):
        self.out, self.lang = Path(out), lang
        path = catalog_path(lang)
        self.catalog = Catalog.read(path) if path.is_file() else Catalog()
        self.words = {}

    def save(self, figure, name, fit=None, **savefig):
        self.out.mkdir(parents=True, exist_ok=True)
        figure.savefig(self.out / name, **savefig)
        self.words[name] = words_to_record(translate_figure(figure, self.catalog))
        if fit is not None:
            fit(figure)
        figure.savefig(self.out / translated_name(name, self.lang), **savefig)

    def write_words(self):
        """Write STATIC_WORDS: the words of every figure saved (one script per folder)."""
        path = self.out / STATIC_WORDS
        path.write_text(json.dumps(dict(sorted(self.words.items())), indent=1,
                                   ensure_ascii=False) + "\n", encoding="utf-8")
        return path


def static_figures(repo):
    """[(words file, a notebook-like record)] of the chapters' drawn figures, for
    `template_messages`: their recorded words join the lessons'."""
    found = []
    for path in sorted(Path(repo).glob(f"book/*/{STATIC_WORDS}")):
        words = json.loads(path.read_text(encoding="utf-8"))
        outputs = [{"metadata": words[name]} for name in sorted(words)]
        found.append((path.relative_to(repo).as_posix(), {"cells": [{"outputs": outputs}]}))
    return found


# -- the catalog's template from executed notebooks ------------------------------------

def notebook_words(notebook, key=METADATA_KEY):
    """The English words recorded in the figure outputs of an executed notebook (a
    dict; with key=TICKS_KEY, its tick labels that are words)."""
    words = []
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            for text in (output.get("metadata") or {}).get(key, []):
                if text not in words:
                    words.append(text)
    return words


def template_messages(lessons, catalog=None):
    """msgid -> the lessons it comes from, for `lessons` [(path, executed notebook)]:
    each recorded string, or the pattern entry of `catalog` that covers it (so `head
    1` ... `head 8` make one entry `head {h}`), and each tick label `catalog` names."""
    messages = {}
    for where, notebook in lessons:
        words = [(text, True) for text in notebook_words(notebook)]
        words += [(text, False) for text in notebook_words(notebook, TICKS_KEY)]
        for text, required in words:
            found = catalog.match(text) if catalog is not None else None
            if found is None and not required:
                continue  # a token, or a tick label nobody asked to translate
            msgid = text if found is None else found[0]
            messages.setdefault(msgid, [])
            if str(where) not in messages[msgid]:
                messages[msgid].append(str(where))
    return messages


def held_entries(po):
    """The entries of a Babel catalog, translated or not, as a Catalog whose exact and
    pattern entries name what the figures' template keeps."""
    held = Catalog()
    for message in po:
        if message.id:
            held.add(message.id, message.string or message.id,
                     PATTERN_FLAG in message.flags)
    return held


def write_template(lessons, out, catalog_file=None):
    """Write the template (.pot) of the figures' catalog from executed lessons."""
    from babel.messages.catalog import Catalog as PoCatalog
    from babel.messages.pofile import read_po, write_po

    held, flags = Catalog(), {}
    if catalog_file is not None and Path(catalog_file).is_file():
        with open(catalog_file, "rb") as f:
            po = read_po(f)
        held = held_entries(po)
        flags = {m.id: (PATTERN_FLAG,) for m in po if m.id and PATTERN_FLAG in m.flags}
    messages = template_messages(lessons, held)
    pot = PoCatalog(project="Self-Attention and Transformers", fuzzy=False)
    for msgid in sorted(messages):
        pot.add(msgid, locations=[(where, None) for where in messages[msgid]],
                flags=flags.get(msgid, ()))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        write_po(f, pot, width=88, omit_header=False, include_lineno=False)
    return messages


def catalog_digest(path):
    """A fingerprint of what the figures would show: the translations a catalog gives
    (its wrapping, comments and untranslated entries aside) and this module's code
    (jupyter-cache knows only the lessons' code)."""
    import hashlib

    entries = []
    if Path(path).is_file():
        catalog = Catalog.read(path)
        entries = sorted(catalog.exact.items()) + [(m, s) for m, _, s in catalog.patterns]
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(json.dumps(entries).encode())
    return digest.hexdigest()


def executed_lessons(repo, cache):
    """[(lesson path, executed notebook)] for each lesson `repo/book/*/lesson*.ipynb`,
    from the jupyter-cache `cache` of a build (the Spanish one's: ES_CACHE); None
    when a lesson, as it is today, has not been executed there. (The copies a build
    writes to its jupyter_execute folder lack the outputs of cached notebooks.)"""
    import nbformat
    from jupyter_cache import get_cache

    if not Path(cache).is_dir():
        return None
    store = get_cache(Path(cache))
    found = []
    for lesson in sorted(Path(repo).glob("book/*/lesson*.ipynb")):
        try:
            record = store.match_cache_notebook(nbformat.read(lesson, as_version=4))
        except KeyError:
            return None
        found.append((lesson.relative_to(repo).as_posix(), store.get_cache_bundle(record.pk).nb))
    return found


# The Spanish build (`make book-es`) executes the lessons into this cache.
ES_CACHE = Path("_build") / ".jupyter_cache_es"


def main(argv=None):
    """`python -m course.figure_words template OUT.pot`: the catalog's template from the
    lessons that the Spanish build executed (`make book-es` first); `... digest PO`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m course.figure_words")
    sub = parser.add_subparsers(dest="command", required=True)
    template = sub.add_parser("template", help="write figures.pot from executed lessons")
    template.add_argument("out")
    template.add_argument("--repo", default=".")
    template.add_argument("--cache", default=None,
                          help=f"the executed lessons (default: REPO/{ES_CACHE})")
    digest = sub.add_parser("digest", help="a fingerprint of a catalog's translations "
                            "(what the figures would show): `make book-es` runs the "
                            "lessons again when it changes")
    digest.add_argument("catalog")
    template.add_argument("--catalog", default=None,
                          help="the catalog whose entries name tick labels and patterns "
                               "(default: REPO/locales/es/LC_MESSAGES/figures.po)")
    args = parser.parse_args(argv)
    if args.command == "digest":
        print(catalog_digest(args.catalog))
        return 0
    repo = Path(args.repo)
    cache = Path(args.cache) if args.cache else repo / ES_CACHE
    catalog = args.catalog or repo / "locales" / "es" / "LC_MESSAGES" / f"{DOMAIN}.po"
    lessons = executed_lessons(repo, cache)
    if lessons is None:
        Path(args.out).unlink(missing_ok=True)  # no stale template left to merge
        print(f"{args.out} not written: the lessons as they are today are not all in "
              f"the Spanish build's cache {cache}; run `make book-es`, then this again",
              file=sys.stderr)
        return 0
    drawn = static_figures(repo)
    messages = write_template(lessons + drawn, args.out, catalog)
    print(f"{args.out}: {len(messages)} figure strings from {len(lessons)} lessons "
          f"and {len(drawn)} chapters' drawn figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
