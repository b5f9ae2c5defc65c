"""The grader speaks the notebook's language (autograder/reporting/language.py): a Spanish
notebook gets its feedback page, summary, diagnoses and test messages in Spanish, an
English one as before.

* The catalogs (grader.po, diagnoses/ASSIGNMENT.po, tests/ASSIGNMENT.po and
  tests/_grader.po, the grader's own words in a test's message, under
  locales/es/LC_MESSAGES/) hold today's English and, for the assignments translated so
  far, every entry translated and faithful (tests/test_translations.py's checks).
* A test message is translated by its templates: fields filled back, a hint after a
  statement matched piece by piece, a message that matches nothing left as it was, and a
  fault logged with the English kept.
* One grading batch per assignment, both languages in it: the Spanish notebook answered
  with a catalogued mistake gets a page whose summary, diagnosis and test message are
  Spanish and name the mistake; the English page is in English; both lose the same points.
"""

import html
import logging
import re
import shutil
import time
from types import SimpleNamespace

import nbformat
import pytest

import test_translations as book_catalogs
from autograder import paths, translation
from autograder.judging import catalogue, diagnosis
from autograder.release import spanish_version_folder
from autograder.reporting import language, summary
from autograder.reporting.validate import Validation, print_report
from conftest import by_student, run_autograder, student_and_reference

# The assignments whose explanations and test messages must be translated: every one (a new
# assignment's catalogs, made untranslated by `make translations`, fail here until done).
TRANSLATED = tuple(paths.assignments())
# One catalogued mistake per assignment, graded in both languages.
GRADED = {"soft_lookup": "dot-K-transposed", "self_attention": "sdpa-no-scale",
          "attention_gradients": "softmax-backward-diagonal-only",
          "multi_head_attention": "split-reshape-without-transpose",
          "positional_encoding": "sinusoidal-sin-cos-swapped",
          "transformer_block": "ff-no-relu", "applications": "patchify-plain-reshape",
          "efficient_attention": "online-softmax-sum-not-rescaled"}


def _ids(catalog):
    return {m.id for m in catalog if m.id}


def _read(path):
    assert path.is_file(), f"{path.relative_to(paths.REPO_ROOT)} is missing: run `make translations`"
    return translation.read_catalog(path)


def _behind(name, today, held):
    new, gone = sorted(today - held), sorted(held - today)
    return (f"{name} is behind the English: {len(new)} message(s) not in it (first: {new[:1]}), "
            f"{len(gone)} no longer used (first: {gone[:1]}); run `make translations`, then translate "
            "the new and fuzzy entries")


# -- the catalogs ------------------------------------------------------------------------------

def test_grader_catalog_current_complete_faithful():
    catalog = _read(language.grader_catalog())
    assert _ids(catalog) == _ids(language.grader_template()), \
        _behind("grader.po", _ids(language.grader_template()), _ids(catalog))
    problems = book_catalogs.catalog_problems("grader", catalog)
    assert not problems, "\n".join(problems)


def test_grader_messages_catalog_current_complete_faithful():
    """tests/_grader.po: what the grader itself writes into a test's message (a crash, a
    limit, a test that did not run, the student's exception), cut from its modules."""
    catalog = _read(language.grader_messages_catalog())
    today = _ids(language.grader_messages_template())
    assert _ids(catalog) == today, _behind("tests/_grader.po", today, _ids(catalog))
    problems = book_catalogs.catalog_problems("tests/_grader", catalog)
    problems += [f"tests/_grader.po, {m.id!r}: its fields differ" for m in catalog
                 if m.id and sorted(language.FIELD.findall(m.id)) != sorted(language.FIELD.findall(m.string))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("assignment", paths.assignments())
def test_catalogs_hold_todays_english(assignment):
    for name, path, template in (
            ("diagnoses", language.diagnoses_catalog(assignment), language.diagnoses_template(assignment)),
            ("tests", language.tests_catalog(assignment), language.tests_template(assignment))):
        today, held = _ids(template), _ids(_read(path))
        assert today == held, _behind(f"{name}/{assignment}.po", today, held)


@pytest.mark.parametrize("assignment", TRANSLATED)
def test_translated_catalogs_complete_and_faithful(assignment):
    problems = []
    for name, path in (("diagnoses", language.diagnoses_catalog(assignment)),
                       ("tests", language.tests_catalog(assignment))):
        problems += book_catalogs.catalog_problems(f"{name}/{assignment}", _read(path))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("assignment", TRANSLATED)
def test_every_test_template_keeps_its_fields(assignment):
    """A field of a test message (`{dtype}`) is filled back into the Spanish: each one there."""
    for message in _read(language.tests_catalog(assignment)):
        if message.id and message.string:
            assert sorted(language.FIELD.findall(message.id)) == sorted(language.FIELD.findall(message.string)), \
                message.id


# -- test messages ------------------------------------------------------------------------------

def test_templates_are_cut_from_the_test_source():
    source = '''"""A docstring is not a message."""
hint = "It matches a softmax over the whole array: sum only along `axis`."
assert x.dtype == np.float64, f"softmax returned {np.asarray(x).dtype}; expected {want[0]:.3g} here."
if "expected device" in text:
    pass
expect_close(p, q, "softmax(x)", "Each row must sum to 1. " + hint)
'''
    assert language.templates_in(source) == [
        "It matches a softmax over the whole array: sum only along `axis`.",
        "softmax returned {dtype}; expected {want} here.",
        "Each row must sum to 1.",
    ]


def test_a_template_with_fields_is_filled_back():
    template = language.Template("`{name}` is wrong at index {where}: got {actual}. {hint}",
                                 "`{name}` es incorrecto en el índice {where}: se obtuvo {actual}. {hint}")
    match = template.whole.match("`weights` is wrong at index (0, 2): got 0.125.")
    assert match, "an empty hint at the end (the message was stripped) still matches"
    filled = template.fill(match, 0, time.monotonic() + 10)
    assert filled.rstrip() == "`weights` es incorrecto en el índice (0, 2): se obtuvo 0.125."


def test_a_message_with_fields_and_a_hint_is_translated():
    english = ("AssertionError: `weights` is wrong at index (0, 1): got 0.166667, expected 0.25 (largest "
               "difference 0.0833). Scores are Q K^T / sqrt(d_k). It matches attention without the "
               "1/sqrt(d_k) scale: divide the scores by sqrt(d_k).")
    assert language.translate_message(english, "es") == (
        "AssertionError: `weights` es incorrecto en el índice (0, 1): se obtuvo 0.166667, se esperaba 0.25 "
        "(mayor diferencia 0.0833). Las puntuaciones son Q K^T / sqrt(d_k). Coincide con una atención sin la "
        "escala 1/sqrt(d_k): divide las puntuaciones entre sqrt(d_k).")
    assert language.translate_message(english, "") == english
    assert language.translate_message(english, "en") == english


def test_a_field_keeps_its_spaces():
    english = ("AssertionError: softmax of a float64 array returned float32; it must return float64. "
               "Do not cast to float32.")
    assert language.translate_message(english, "es") == (
        "AssertionError: softmax de un arreglo float64 devolvió float32; debe devolver float64. "
        "No conviertas a float32.")


def test_the_graders_own_words_in_a_message_are_translated():
    """A message the grader writes (referee.py, executor.py, crashes.py...) in Spanish, the
    student's own exception text (Python's words) kept as it is inside it."""
    name_error = ("NameError: your code raised NameError: name 'causal_mask' is not defined: did its cell run "
                  "without an error?")
    not_run = "NotRun: This test did not run: the notebook ran past its time limit (600 s)"
    crashed = ("This test did not run: the kernel was stopped because it used more than its memory limit "
               "(4 GiB) while attend was tested (in test_attend), so the remaining tests of attend were not run.")
    spanish = {name_error: "NameError: tu código lanzó NameError: name 'causal_mask' is not defined: ¿se ejecutó "
                           "su celda sin errores?",
               not_run: "NotRun: Esta prueba no se ejecutó: el cuaderno superó su tiempo límite (600 s)",
               crashed: "Esta prueba no se ejecutó: el kernel se detuvo porque usó más memoria que su límite "
                        "(4 GiB) mientras se probaba attend (en test_attend), así que las pruebas restantes de "
                        "attend no se ejecutaron."}
    for english, translated in spanish.items():
        assert language.translate_message(english, "es") == translated
        assert language.translate_message(english, "") == english
        assert language.translate_message(english, "en") == english


@pytest.mark.parametrize("message", [
    "AssertionError: a sentence that no test of the course says.",
    "ZeroDivisionError: division by zero",
    "NotImplementedError: ",
    "",
])
def test_a_message_matching_no_template_stays_as_it_was(message):
    assert language.translate_message(message, "es") == message


def test_a_message_too_long_or_too_slow_to_match_stays_english(monkeypatch, caplog):
    """A message of the student's making (an exception's text) never holds the grader up:
    past MAX_MESSAGE characters, or MAX_SECONDS of matching, it is shown as it is."""
    repeated = "`a` is wrong at index (1): got 1, expected 2 (largest difference 1). "
    long = "AssertionError: " + repeated * 40
    assert len(long) > language.MAX_MESSAGE and language.translate_message(long, "es") == long
    monkeypatch.setattr(language, "MAX_SECONDS", 0.0)
    short = "AssertionError: " + repeated * 2
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="autograder.language"):
        assert language.translate_message(short, "es") == short
    assert time.monotonic() - began < 1 and "English kept" in caplog.text


def test_a_fault_in_translating_is_logged_and_the_english_kept(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("a broken catalog")

    monkeypatch.setattr(language, "message_templates", broken)
    message = "AssertionError: Each row must sum to 1."
    with caplog.at_level(logging.WARNING, logger="autograder.language"):
        assert language.translate_message(message, "es") == message
    assert "a broken catalog" in caplog.text


# -- the summary and validate -----------------------------------------------------------------

def _functions(language_code):
    function = summary.Function("softmax", language=language_code)
    message = ("AssertionError: Each row must sum to 1. It matches a softmax over the whole array: sum only "
               "along `axis`.")
    function.tests = [summary.Test("test_softmax", 2.0, 0.0, "failed", message,
                                   language.translate_message(message, language_code)),
                      summary.Test("test_softmax_stability", 1.0, 0.0, "hidden")]
    function.diagnosis = diagnosis.sentence("`softmax`", "softmax-whole-array",
                                            "Normalises over the whole array instead of along `axis`, so no row "
                                            "sums to one.", language_code)
    return [function]


def test_validate_summary_speaks_the_notebooks_language():
    lines = {}
    for code in ("", "es"):
        report = Validation([("test_softmax", "fail", 2.0, "AssertionError: Each row must sum to 1."),
                             ("test_softmax_stability", "hidden", 1.0, "softmax: large inputs")])
        report.functions, report.language = _functions(code), code
        lines[code] = []
        assert print_report(report, lines[code].append) == 1
    english, spanish = "\n".join(lines[""]), "\n".join(lines["es"])
    assert "Summary (visible tests" in english and "Fix them before you submit." in english
    assert "behaves like a known mistake (softmax-whole-array): Normalises over the whole array" in english
    assert "Resumen (pruebas visibles" in spanish and "Corrígelas antes de entregar." in spanish
    assert "(+1 en pruebas ocultas)" in spanish and "FAIL   test_softmax (2 puntos)" in spanish
    assert ("se comporta como un error conocido (softmax-whole-array): Normaliza sobre todo el arreglo"
            in spanish)
    assert "Coincide con una softmax sobre todo el arreglo" in spanish
    for english_words in ("Summary", "points", "behaves like", "It matches", "Each row"):
        assert english_words not in spanish


# -- grading: a catalogued mistake in both languages ---------------------------------------------

def _spanish_student(assignment):
    (source,) = paths.assignment_notebooks(assignment)
    return nbformat.read(spanish_version_folder(assignment) / source.name, as_version=4)


@pytest.fixture(scope="module", params=sorted(GRADED))
def graded(request, tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed: the grader refuses to run "
                    "student code without a sandbox")
    assignment = request.param
    english, _, reference = student_and_reference(assignment)
    mistake = next(a for a in catalogue.load(assignment) if a.id == GRADED[assignment])
    wrong = {**reference, mistake.function: mistake.code}
    submitted = tmp_path_factory.mktemp(f"feedback-{assignment}") / "submitted"
    submitted.mkdir()
    nbformat.write(catalogue.fill(english, wrong), submitted / "en_mistake.ipynb")
    nbformat.write(catalogue.fill(_spanish_student(assignment), wrong), submitted / "es_mistake.ipynb")
    out = submitted.parent / "grading"
    code, lines, log = run_autograder("grade", assignment, *sorted(submitted.glob("*.ipynb")), "--out", out,
                                      "--no-progress")
    assert code == 0, log[-3000:]
    pages = {name: (out / "feedback" / f"{name}.html").read_text(encoding="utf-8")
             for name in ("en_mistake", "es_mistake")}
    return {"assignment": assignment, "mistake": mistake, "results": by_student(lines), "pages": pages}


def _row(page, function):
    """The text of the summary's row of `function`: its messages and its diagnosis."""
    summary_table = page[page.index('<table class="summary">'):page.index("</table>")]
    row = re.search(r"<tr class=\"(?:full|lost)\">\s*<td><code>" + re.escape(function) + r"</code>.*?</tr>",
                    summary_table, re.DOTALL)
    assert row, f"no summary row for {function}"
    return row.group(0)


def _texts(markup, kind):
    return [html.unescape(m) for m in re.findall(rf'<(?:span|div) class="{kind}">(.*?)</(?:span|div)>',
                                                 markup, re.DOTALL)]


def test_a_mistake_costs_the_same_in_both_languages(graded):
    english, spanish = graded["results"]["en_mistake"], graded["results"]["es_mistake"]
    assert english["score"] < english["max_score"]
    assert (spanish["score"], spanish["tests"]) == (english["score"], english["tests"])


def test_the_spanish_page_names_the_mistake_in_spanish(graded):
    mistake, page = graded["mistake"], graded["pages"]["es_mistake"]
    assert '<html lang="es">' in page
    for words in ("<h2>Resumen</h2>", "Función calificada", "Qué revisar", "Tu cuaderno, tal como se calificó",
                  "Puntuación:"):
        assert words in page
    row = _row(page, mistake.function)
    (said,) = _texts(row, "diagnosis")
    spanish_explanation = language.explanation(mistake.explanation, "es")
    assert spanish_explanation != mistake.explanation, "the mistake's explanation is not translated"
    assert said == f"Tu `{mistake.function}` se comporta como un error conocido ({mistake.id}): {spanish_explanation}"
    messages = _texts(row, "message")
    assert messages, "no failed test's message in the summary"
    english_messages = _texts(_row(graded["pages"]["en_mistake"], mistake.function), "message")
    assert messages == [language.translate_message(m, "es") for m in english_messages]
    # the test's sentence that names this mistake (the catalogue's `hint`), in Spanish
    hints = [m.string for m in _read(language.tests_catalog(graded["assignment"]))
             if m.id and mistake.hint in m.id and not language.FIELD.search(m.id)]
    assert hints and any(hint in message for hint in hints for message in messages), (messages, hints)
    assert not any(mistake.hint in message for message in messages)


def test_the_english_page_is_as_before(graded):
    mistake, page = graded["mistake"], graded["pages"]["en_mistake"]
    assert '<html lang="en">' in page
    for words in ("<h2>Summary</h2>", "Graded function", "What to look at", "Your notebook, as graded"):
        assert words in page
    row = _row(page, mistake.function)
    (said,) = _texts(row, "diagnosis")
    assert said == f"Your `{mistake.function}` behaves like a known mistake ({mistake.id}): {mistake.explanation}"
    assert any(mistake.hint in message for message in _texts(row, "message"))
    for spanish in ("Resumen", "Coincide con", "se comporta como", "Puntuación"):
        assert spanish not in page


@pytest.mark.parametrize("percent", [0, 12.5, 100])
def test_the_lateness_sentence_in_both_languages(percent):
    from autograder.records.lateness import lateness_note
    from autograder.reporting.feedback import lateness_sentence

    note = lateness_note({"timestamp": "2026-01-03T05:10:00+00:00", "due": "2026-01-01T00:00:00+00:00",
                          "percent_per_day": percent})
    assert lateness_sentence(note, language.words("")) == note
    spanish = lateness_sentence(note, language.words("es"))
    assert spanish.startswith("Entregado 2 días 5 h 10 min después de la fecha límite (2026-01-01 00:00 UTC); ")
    assert "submitted" not in spanish.lower() and "late" not in spanish
    assert lateness_sentence("A sentence of another kind.", language.words("es")) == "A sentence of another kind."


def test_terminology_follows_the_glossary():
    """The glossary's checked terms (a message stands alone: no "first use" rule here)."""
    import yaml

    terms = [{key: value for key, value in term.items() if key != "first_use"} for term in
             yaml.safe_load((paths.LOCALES / "es" / "glossary.yml").read_text(encoding="utf-8"))["terms"]]
    def prose(catalog):
        """The entries with their English as prose: placeholders ({mask}) and calls
        (log(mask), attend(q, K, V, mask)[1]) are names, not terms."""
        names = re.compile(r"\{\w+\}|\w+\([^()]*\)(?:\[[^\]]*\])?")
        return [SimpleNamespace(id=names.sub(" ", m.id), string=m.string) for m in catalog if m.id]

    problems = book_catalogs.terminology_problems("grader", prose(_read(language.grader_catalog())), terms)
    problems += book_catalogs.terminology_problems("tests/_grader", prose(_read(language.grader_messages_catalog())),
                                                   terms)
    for assignment in TRANSLATED:
        for name, path in (("diagnoses", language.diagnoses_catalog(assignment)),
                           ("tests", language.tests_catalog(assignment))):
            problems += book_catalogs.terminology_problems(f"{name}/{assignment}", prose(_read(path)), terms)
    assert not problems, "\n".join(problems)
