"""The Spanish student notebooks: catalogs complete and current, notebooks that cannot
drift, and a grade that does not depend on the language.

* `locales/es/LC_MESSAGES/solutions/ASSIGNMENT.po` holds exactly the messages of the
  Markdown cells of solutions/ASSIGNMENT/ today (autograder/translation.py cuts them as
  Sphinx does: paragraphs, headings, list items), every one translated, none fuzzy, each
  keeping math, inline code, links and placeholders (the checks of
  tests/test_translations.py) and the glossary's terms;
* `make release` writes book/NN_ASSIGNMENT/assignment/es/NOTEBOOK.ipynb beside the
  English student version: the same cells, ids, metadata, code and tests, byte for
  byte, only the instructor's Markdown (and its checksum) and the notebook's `lang`
  differ, and the Markdown is the catalog's;
* a Spanish notebook answered with the reference solution scores full marks, and with a
  catalogued mistake loses exactly the points the English one loses (one grading batch
  per assignment holds both languages), and its feedback page shows the Spanish text.
"""

import copy
import json
import shutil

import nbformat
import pytest

import test_translations as book_catalogs
from autograder import paths, translation
from autograder.judging import catalogue
from autograder.judging.assemble import assemble
from autograder.release import release, spanish_version_folder
from conftest import by_student, run_autograder, student_and_reference

ASSIGNMENTS = paths.assignments()
GLOSSARY = paths.LOCALES / "es" / "glossary.yml"


def catalog(assignment):
    return translation.read_catalog(translation.catalog_path(assignment))


# -- the catalogs -------------------------------------------------------------------------

@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_catalog_holds_todays_english(assignment):
    path = translation.catalog_path(assignment)
    assert path.is_file(), f"{path.relative_to(paths.REPO_ROOT)} is missing: run `make translations`"
    today = {m.id for m in translation.template(assignment) if m.id}
    held = {m.id for m in catalog(assignment) if m.id}
    new, gone = sorted(today - held), sorted(held - today)
    assert not new and not gone, (
        f"{assignment}.po is behind the English notebook: {len(new)} message(s) not in the catalog "
        f"(first: {new[:1]}), {len(gone)} no longer in it; run `make translations`, then translate "
        "the new and fuzzy entries")


def _notebook_problems(msgid, msgstr):
    # A heading "## 1. Title" is Markdown in Jupyter, not a MyST page: "1. " is no list there.
    return [p for p in book_catalogs.entry_problems(msgid, msgstr) if "reads as a list" not in p]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_entry_translated_and_faithful(assignment):
    problems = book_catalogs.catalog_problems(f"solutions/{assignment}", catalog(assignment),
                                           lambda message: _notebook_problems(message.id, message.string))
    assert not problems, "\n".join(problems)


def test_terminology_follows_the_glossary():
    import yaml

    terms = yaml.safe_load(GLOSSARY.read_text(encoding="utf-8"))["terms"]
    problems = []
    for assignment in ASSIGNMENTS:
        problems.extend(book_catalogs.terminology_problems(f"solutions/{assignment}", catalog(assignment), terms))
    assert not problems, "\n".join(problems)


def test_messages_are_cut_as_sphinx_cuts_them():
    """Headings, paragraphs and list items are messages; code and display math are copied
    (an equation with words in its \\text{...} is a message); an untranslated message stays
    English; the cell's layout survives."""
    cell = ("## 1. The title\n\nA paragraph\nin two lines, with $x$.\n\n* an item\n  that goes on;\n"
            "* another.\n\n$$y = x$$\n\n```python\nprint(1)\n```")
    assert translation.messages(cell) == ["1. The title", "A paragraph in two lines, with $x$.",
                                          "an item that goes on;", "another."]
    assert translation.messages("$$a \\quad \\text{for } b$$") == ["$$a \\quad \\text{for } b$$"]
    assert translation.messages("$$a_\\text{model}$$") == []
    table = {"1. The title": "1. El título", "another.": "otro."}
    assert translation.translate_source(cell, table) == (
        "## 1. El título\n\nA paragraph in two lines, with $x$.\n\n* an item that goes on;\n* otro.\n\n"
        "$$y = x$$\n\n```python\nprint(1)\n```")


# -- the notebooks ------------------------------------------------------------------------

def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_spanish_version_differs_only_in_its_markdown(assignment):
    """Same cells in the same order, same ids and metadata; code and test cells byte for
    byte; each instructor Markdown cell is the catalog's translation of the English one."""
    table = translation.translations(translation.catalog_path(assignment))
    for source in paths.assignment_notebooks(assignment):
        english_path = paths.student_version_folder(assignment) / source.name
        spanish_path = spanish_version_folder(assignment) / source.name
        assert spanish_path.is_file(), f"{spanish_path} is missing: run `make release`"
        english, spanish = _cells(english_path), _cells(spanish_path)
        assert spanish["metadata"].pop(translation.METADATA_KEY) == "es"
        assert spanish["metadata"] == english["metadata"]
        assert len(spanish["cells"]) == len(english["cells"])
        translated = 0
        for en, es in zip(english["cells"], spanish["cells"]):
            if en["cell_type"] != "markdown" or en["metadata"].get("nbgrader", {}).get("solution"):
                assert es == en, f"{spanish_path.name}: cell {en.get('id')} differs from the English one"
                continue
            en_meta, es_meta = copy.deepcopy(en["metadata"]), copy.deepcopy(es["metadata"])
            en_meta.get("nbgrader", {}).pop("checksum", None)
            es_meta.get("nbgrader", {}).pop("checksum", None)
            assert (es["id"], es["cell_type"], es_meta) == (en["id"], en["cell_type"], en_meta)
            english_text = "".join(en["source"])
            spanish_text = "".join(es["source"])
            assert spanish_text == translation.translate_source(english_text, table)
            translated += spanish_text != english_text
        assert translated, f"{spanish_path.name}: no Markdown cell is in Spanish"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_spanish_checksums_match_their_text(assignment):
    """nbgrader's Validate recomputes a locked cell's checksum: the Spanish cells carry theirs."""
    from nbgrader.utils import compute_checksum

    for source in paths.assignment_notebooks(assignment):
        notebook = nbformat.read(spanish_version_folder(assignment) / source.name, as_version=4)
        for cell in notebook.cells:
            meta = cell.metadata.get("nbgrader", {})
            if "checksum" in meta:
                assert compute_checksum(cell) == meta["checksum"], f"{source.name}: cell {meta['grade_id']}"


def test_release_writes_the_spanish_version_from_the_catalog(tmp_path):
    """A scratch release: the Spanish notebook lands in assignment/es/, follows the catalog
    (a changed translation changes it), and an untranslated message stays English."""
    assignment = "self_attention"
    chapter = paths.chapter_folder(assignment)
    locales = tmp_path / "locales"
    shutil.copytree(paths.LOCALES / "es" / "LC_MESSAGES" / "solutions", locales / "es" / "LC_MESSAGES" / "solutions")
    po = translation.catalog_path(assignment, locales)
    text = po.read_text(encoding="utf-8")
    assert 'msgstr "Antes de entregar"' in text
    po.write_text(text.replace('msgstr "Antes de entregar"', 'msgstr ""'), encoding="utf-8")
    scratch_book = tmp_path / "book"
    (scratch_book / chapter.name).mkdir(parents=True)
    written = release(assignment, book=scratch_book, refresh_stored=False, locales=locales)
    (source,) = paths.assignment_notebooks(assignment)
    spanish = scratch_book / chapter.name / "assignment" / "es" / source.name
    assert spanish in written
    closing = [c for c in nbformat.read(spanish, as_version=4).cells
               if c.metadata.get("nbgrader", {}).get("grade_id") == "closing"][0]
    assert closing.source.startswith("## Before you submit\n\nEjecuta")


# -- grading ------------------------------------------------------------------------------

# Two assignments, each graded in one batch holding both languages: the reference
# solution and one catalogued mistake in each.
GRADED = {"soft_lookup": "dot-K-transposed", "self_attention": None}


def _spanish_student(assignment):
    (source,) = paths.assignment_notebooks(assignment)
    return nbformat.read(spanish_version_folder(assignment) / source.name, as_version=4)


def _a_wrong_answer(assignment, wanted):
    answers = [a for a in catalogue.load(assignment) if a.verdict == "wrong"]
    return next(a for a in answers if wanted is None or a.id == wanted)


@pytest.fixture(scope="module", params=sorted(GRADED))
def graded_both(request, tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed: the grader refuses to run "
                    "student code without a sandbox")
    assignment = request.param
    folder = tmp_path_factory.mktemp(f"spanish-{assignment}")
    english, english_reference, reference = student_and_reference(assignment)
    spanish = _spanish_student(assignment)
    mistake = _a_wrong_answer(assignment, GRADED[assignment])
    wrong = {**reference, mistake.function: mistake.code}
    notebooks = {
        "en_reference": english_reference, "es_reference": catalogue.fill(spanish, reference),
        "en_mistake": catalogue.fill(english, wrong), "es_mistake": catalogue.fill(spanish, wrong),
        "es_untouched": spanish,
    }
    submitted = folder / "submitted"
    submitted.mkdir()
    for name, notebook in notebooks.items():
        nbformat.write(notebook, submitted / f"{name}.ipynb")
    out = folder / "grading"
    code, lines, log = run_autograder("grade", assignment, *sorted(submitted.glob("*.ipynb")), "--out", out,
                                      "--no-progress")
    assert code == 0, log[-3000:]
    return {"assignment": assignment, "results": by_student(lines), "out": out, "mistake": mistake}


def test_spanish_reference_scores_full_marks(graded_both):
    results = graded_both["results"]
    for name in ("en_reference", "es_reference"):
        result = results[name]
        assert result["status"] == "graded", result["message"]
        assert result["score"] == result["max_score"] > 0, result["message"]
    assert results["es_untouched"]["score"] == 0


def test_a_mistake_costs_the_same_points_in_both_languages(graded_both):
    english, spanish = graded_both["results"]["en_mistake"], graded_both["results"]["es_mistake"]
    assert english["score"] < english["max_score"], f"{graded_both['mistake'].id} kept full marks"
    assert spanish["tests"] == english["tests"]
    assert spanish["score"] == english["score"]


def test_spanish_feedback_shows_the_spanish_markdown(graded_both):
    pages = graded_both["out"] / "feedback"
    spanish = (pages / "es_reference.html").read_text(encoding="utf-8")
    english = (pages / "en_reference.html").read_text(encoding="utf-8")
    assert "Antes de entregar" in spanish and "Before you submit" not in spanish
    assert "Before you submit" in english and "Antes de entregar" not in english


def test_assembly_takes_the_students_language_not_a_changed_cell():
    """A Spanish notebook's Markdown is the translation, not an edit: no note says it was
    changed, and the graded notebook holds the Spanish text without a grade_id that
    nbgrader would overwrite with the English."""
    assignment = "self_attention"
    (source_path,) = paths.assignment_notebooks(assignment)
    source = nbformat.read(source_path, as_version=4)
    spanish = _spanish_student(assignment)
    graded, notes = assemble(source, spanish)
    assert notes == []
    markdown = [c for c in graded.cells if c.cell_type == "markdown"]
    assert markdown[0].source.startswith("# Tarea:")
    assert all("grade_id" not in c.metadata.get("nbgrader", {}) for c in markdown)
    english_graded, notes = assemble(source, nbformat.read(
        paths.student_version_folder(assignment) / source_path.name, as_version=4))
    assert notes == []
    assert [c.source for c in english_graded.cells if c.cell_type == "code"] == \
        [c.source for c in graded.cells if c.cell_type == "code"]


# -- the book's download (_ext/language_switch.py) ----------------------------------------

@pytest.mark.parametrize("language, expected", [("en", b"english"), ("es", b"spanish")])
def test_the_spanish_edition_downloads_the_spanish_notebook(tmp_path, language, expected):
    """A one-page Sphinx project with the book's extension: its download of
    assignment/x.ipynb gives assignment/es/x.ipynb in the Spanish edition, under its own name."""
    from sphinx.application import Sphinx

    source = tmp_path / "src"
    (source / "assignment" / "es").mkdir(parents=True)
    (source / "assignment" / "x.ipynb").write_bytes(b"english")
    (source / "assignment" / "es" / "x.ipynb").write_bytes(b"spanish")
    (source / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(paths.REPO_ROOT / '_ext')!r})\n"
                                    "extensions = ['language_switch']\n")
    (source / "index.rst").write_text("Page\n====\n\n:download:`x.ipynb <assignment/x.ipynb>`\n")
    out = tmp_path / "html"
    app = Sphinx(str(source), str(source), str(out), str(tmp_path / "doctrees"), "html",
                 confoverrides={"language": language}, status=None, warning=None, freshenv=True)
    app.build()
    (download,) = (out / "_downloads").rglob("*.ipynb")
    assert download.name == "x.ipynb" and download.read_bytes() == expected
