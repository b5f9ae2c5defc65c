"""The lessons' figures speak the reader's language (course/figure_words.py).

* The hook: with a catalog installed, a figure's title, axis label, legend entries and
  f-string labels (a pattern entry) are drawn translated, tokens of a sentence on the
  ticks are not; in English (no ``COURSE_LANGUAGE``) importing `course` changes nothing.
* The chapters' drawn figures (SVG files that a script writes): each has its Spanish
  twin `NAME.es.svg`, the committed files are what the script draws today, and the
  catalog translates their recorded words.
* The catalog `locales/es/LC_MESSAGES/figures.po`: every entry translated and not
  fuzzy, a pattern's placeholders kept, math kept, the glossary's terms followed; and,
  in a built book (`make book`), it holds exactly the English words that the Spanish
  edition's executed lessons recorded: a new or changed English label fails here until
  `make translations` has merged it and a translator has translated it.

Run alone: `python -m pytest -p no:cacheprovider -n 0 tests/test_figure_words.py`.
"""

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("babel")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from babel.messages.pofile import read_po  # noqa: E402

from course import figure_words  # noqa: E402
from course.figure_words import Catalog  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CATALOG = REPO / "locales" / "es" / "LC_MESSAGES" / "figures.po"
GLOSSARY = REPO / "locales" / "es" / "glossary.yml"
# where the Spanish build (`make book-es`) keeps its executed lessons
ES_CACHE = REPO / figure_words.ES_CACHE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_translations import catalog_problems as book_catalog_problems  # noqa: E402
from test_translations import entry_problems, english_pattern, has_spanish  # noqa: E402


def small_catalog():
    catalog = Catalog()
    catalog.add("attention weight", "peso de atención")
    catalog.add("Self-attention weights", "Pesos de autoatención")
    catalog.add("head {h}", "cabeza {h}", pattern=True)
    catalog.add("key", "clave")
    return catalog


def draw_example(layout=False):
    figure, axes = plt.subplots()
    axes.plot([0, 1], [0, 1], label="head 0")
    axes.plot([0, 1], [1, 0], label="head 12")
    axes.plot([0, 1], [0.5, 0.5], label="head removed")
    axes.set_xticks([0, 1], labels=["the", "key"])  # tokens: data
    axes.set_title("Self-attention weights")
    axes.set_ylabel("attention weight")
    axes.legend()
    if layout:
        figure.tight_layout()
    figure.savefig(io.BytesIO(), format="png")
    return figure, axes


@pytest.fixture
def spanish():
    catalog = figure_words.install("es", catalog=small_catalog())
    yield catalog
    figure_words.uninstall()
    plt.close("all")


# -- the hook ---------------------------------------------------------------------------

def test_hook_translates_title_label_and_legend(spanish):
    figure, axes = draw_example(layout=True)
    assert axes.get_title() == "Pesos de autoatención"
    assert axes.get_ylabel() == "peso de atención"
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    # an f-string label through its pattern entry; a placeholder takes no words
    assert legend == ["cabeza 0", "cabeza 12", "head removed"]
    # the catalog names "key": tick labels it names are translated, the rest stay
    assert [t.get_text() for t in axes.get_xticklabels()] == ["the", "clave"]
    # drawn again (tight bbox, a second savefig): translated once, English remembered
    figure.savefig(io.BytesIO(), format="png", bbox_inches="tight")
    assert axes.get_title() == "Pesos de autoatención"
    words = figure_words.words_to_record(figure._course_figure_words)
    assert sorted(words[figure_words.METADATA_KEY]) == [
        "Self-attention weights", "attention weight", "head 0", "head 12", "head removed"]
    assert words[figure_words.TICKS_KEY] == ["the", "key"]


def test_inline_output_records_the_english_words(spanish):
    backend = pytest.importorskip("matplotlib_inline.backend_inline")
    figure_words._record_in_outputs()
    figure, axes = plt.subplots()
    axes.set_xlabel("attention weight")
    metadata = backend._fetch_figure_metadata(figure)
    assert metadata[figure_words.METADATA_KEY] == ["attention weight"]
    assert axes.get_xlabel() == "peso de atención"  # before the backend draws it


def test_english_is_left_untouched():
    """Importing `course` without COURSE_LANGUAGE (or with `en`) installs nothing."""
    code = (
        "import matplotlib; matplotlib.use('Agg')\n"
        "from matplotlib.figure import Figure\n"
        "draw, layout = Figure.draw, Figure.tight_layout\n"
        "import course, matplotlib.pyplot as plt\n"
        "assert Figure.draw is draw and Figure.tight_layout is layout\n"
        "figure, axes = plt.subplots(); axes.set_title('key'); figure.savefig('/dev/null')\n"
        "assert axes.get_title() == 'key'\n"
    )
    for value in (None, "en"):
        env = {k: v for k, v in os.environ.items() if k != figure_words.LANGUAGE_VARIABLE}
        if value:
            env[figure_words.LANGUAGE_VARIABLE] = value
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_patterns():
    catalog = small_catalog()
    catalog.add("width $h$ = {h}", "ancho $h$ = {h}", pattern=True)
    catalog.add("layer {l}, head {h}", "capa {l}, cabeza {h}", pattern=True)
    assert catalog.translate("width $h$ = 0.5") == "ancho $h$ = 0.5"
    assert catalog.translate("layer 4, head 5") == "capa 4, cabeza 5"
    assert catalog.translate("head $d_k$") == "cabeza $d_k$"
    assert catalog.translate("head of the table") == "head of the table"
    assert figure_words.is_words("head 3") and figure_words.is_words("$\\|q\\|$ norm")
    assert not any(map(figure_words.is_words, ["0.25", "$10^{3}$", "(a)", "$d_k$"]))


# -- the catalog ------------------------------------------------------------------------

def read_catalog(path=CATALOG):
    with open(path, "rb") as f:
        return read_po(f)


def figure_entry_problems(message):
    """A pattern entry keeps its placeholders; any other entry, what a page's entry keeps."""
    placeholders = sorted(figure_words.PLACEHOLDER.findall(message.id))
    if figure_words.PATTERN_FLAG not in message.flags:
        return entry_problems(message.id, message.string)
    if not placeholders:
        return ["a pattern entry without a placeholder"]
    if sorted(figure_words.PLACEHOLDER.findall(message.string)) != placeholders:
        return ["placeholder differs"]
    return []


def catalog_problems(po):
    """Untranslated, fuzzy, unfaithful entries of a figures' catalog."""
    return book_catalog_problems("figures", po, figure_entry_problems)


def terminology_problems(po):
    """The glossary's checked terms, in the catalog's translations."""
    terms = yaml.safe_load(GLOSSARY.read_text(encoding="utf-8"))["terms"]
    problems = []
    for message in po:
        if not message.id or not message.string:
            continue
        for term in terms:
            if (term.get("check") and english_pattern(term["en"]).search(message.id)
                    and not has_spanish(term["es"], message.string)):
                problems.append(f"figures.po: '{term['en']}' should be '{term['es']}' "
                                f"in: {message.string}")
    return problems


def test_catalog_translated_and_faithful():
    assert CATALOG.is_file(), "no figures' catalog: run `make book-es`, `make translations`"
    problems = catalog_problems(read_catalog())
    assert not problems, "\n".join(problems)


def test_catalog_follows_the_glossary():
    problems = terminology_problems(read_catalog())
    assert not problems, "\n".join(problems)


def behind(po, lessons):
    """What keeps the catalog from holding the figures' English of `lessons`."""
    today = set(figure_words.template_messages(lessons, figure_words.held_entries(po)))
    catalog = {message.id for message in po if message.id}
    new, gone = sorted(today - catalog), sorted(catalog - today)
    if not new and not gone:
        return None
    return (f"{len(new)} English figure string(s) not in the catalog (first: {new[:3]}), "
            f"{len(gone)} no longer in a figure (first: {gone[:3]})")


def test_catalog_holds_todays_figures():
    lessons = figure_words.executed_lessons(REPO, ES_CACHE)
    if lessons is None:
        pytest.skip("the Spanish edition is not built from today's lessons: `make book`")
    problem = behind(read_catalog(), lessons + figure_words.static_figures(REPO))
    assert problem is None, ("figures.po is behind the English figures; run `make "
                             f"translations`, then translate the new and fuzzy entries: {problem}")


# -- the chapters' drawn figures (SVG files written by a script) -----------------------

# The scripts that draw the chapters' static figures, each into its own folder.
DRAWING_SCRIPTS = [REPO / "book" / "06_transformer_block" / "draw_figures.py",
                   REPO / "book" / "08_efficient_attention" / "tiles_figure.py"]


def drawn_files(folder):
    """What a drawing script writes: its SVGs in both languages and their words."""
    return sorted([*folder.glob("*.svg"), folder / figure_words.STATIC_WORDS])


@pytest.mark.parametrize("script", DRAWING_SCRIPTS, ids=lambda p: p.parent.name)
def test_drawn_figures_have_spanish_twins(script):
    english = [p for p in script.parent.glob("*.svg") if not p.name.endswith(".es.svg")]
    assert english
    missing = [p.name for p in english
               if not (p.parent / figure_words.translated_name(p.name, "es")).is_file()]
    assert not missing, (f"no Spanish twin of {missing}: run `python "
                         f"{script.relative_to(REPO)}`")


@pytest.mark.parametrize("script", DRAWING_SCRIPTS, ids=lambda p: p.parent.name)
def test_drawn_figures_are_what_the_script_draws(script, tmp_path):
    """The committed SVGs (both languages) and words are the script's output today:
    an English change, or a catalog change, without a rerun fails here."""
    done = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    drawn = {p.name: p.read_bytes() for p in drawn_files(tmp_path)}
    committed = {p.name: p.read_bytes() for p in drawn_files(script.parent) if p.is_file()}
    stale = sorted(name for name in drawn.keys() | committed.keys()
                   if drawn.get(name) != committed.get(name))
    assert not stale, (f"{stale} differ from what {script.relative_to(REPO)} draws today: "
                       f"run it again (from the repository root)")


def test_catalog_translates_the_drawn_figures():
    catalog = Catalog.read(CATALOG)
    drawn = figure_words.static_figures(REPO)
    assert len(drawn) == len(DRAWING_SCRIPTS)
    untranslated = [text for _, record in drawn
                    for text in figure_words.notebook_words(record)
                    if catalog.match(text) is None]
    assert not untranslated, (f"figures.po lacks these words of the drawn figures: "
                              f"{untranslated[:5]}; run `make translations` and translate")


def test_checks_catch_what_they_claim(tmp_path):
    """The checks above fail on the faults they name."""
    po_text = (
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgid "attention weight"\nmsgstr ""\n\n'
        '#, fuzzy\nmsgid "query"\nmsgstr "consulta"\n\n'
        '#, figure-pattern\nmsgid "head {h}"\nmsgstr "cabeza {n}"\n\n'
        'msgid "scores $q \\\\cdot k$"\nmsgstr "puntuaciones $q k$"\n\n'
        'msgid "Self-attention weights"\nmsgstr "Pesos de atención propia"\n'
    )
    path = tmp_path / "figures.po"
    path.write_text(po_text, encoding="utf-8")
    problems = "\n".join(catalog_problems(read_catalog(path)))
    for fault in ("untranslated", "fuzzy", "placeholder differs", "math differs"):
        assert fault in problems, fault
    assert terminology_problems(read_catalog(path))  # autoatención
    # a figure recorded "key" and "head 3": the catalog lacks "key", "query" is gone
    notebook = {"cells": [{"cell_type": "code", "source": "", "outputs": [
        {"output_type": "display_data", "data": {},
         "metadata": {figure_words.METADATA_KEY: ["key", "head 3"],
                      figure_words.TICKS_KEY: ["the"]}}]}]}
    problem = behind(read_catalog(path), [("lesson.ipynb", notebook)])
    assert "1 English figure string(s) not in the catalog (first: ['key'])" in problem
    assert "no longer in a figure" in problem and "query" in problem
