"""Every known wrong answer loses points, and only its own function's; every known right
answer keeps full marks; a message that names a mistake names the right one.

The catalogues in autograder/catalogues/ are graded through `python -m autograder
grade` in one batch per assignment (in parallel), exactly as students' work is.
"""

import pytest

from autograder.judging import catalogue, diagnosis
from autograder import paths
from conftest import GradedBatches

CATALOGUED = [a for a in paths.assignments() if catalogue.catalogue_path(a).exists()]
ANSWERS = [(a, answer) for a in CATALOGUED for answer in catalogue.load(a)]


def test_every_assignment_has_a_catalogue():
    assert CATALOGUED == paths.assignments()


@pytest.mark.parametrize("assignment", CATALOGUED)
def test_every_graded_function_has_wrong_and_right_answers(assignment):
    import nbformat

    (source,) = paths.assignment_notebooks(assignment)
    functions = set(catalogue.reference_code(nbformat.read(source, as_version=4)))
    answers = catalogue.load(assignment)
    for verdict in catalogue.VERDICTS:
        covered = {a.function for a in answers if a.verdict == verdict}
        assert functions <= covered or verdict == "right", f"no {verdict} answer for {functions - covered}"
    assert any(a.verdict == "right" for a in answers)


def own_tests(assignment):
    import nbformat

    (source,) = paths.assignment_notebooks(assignment)
    return catalogue.tests_of(nbformat.read(source, as_version=4))


@pytest.fixture(scope="module")
def graded_answers(tmp_path_factory):
    def write(assignment, folder):
        return catalogue.write_submissions(assignment, catalogue.load(assignment), folder)

    return GradedBatches(tmp_path_factory, "catalogue", write)


@pytest.mark.parametrize("assignment, answer", ANSWERS, ids=[f"{a}:{answer.id}" for a, answer in ANSWERS])
def test_known_answer_gets_its_verdict(graded_answers, assignment, answer):
    result = graded_answers[assignment][answer.id]
    assert result["status"] == "graded", result["message"]
    if answer.verdict == "wrong":
        assert result["score"] < result["max_score"], (
            f"wrong answer {answer.id!r} ({answer.explanation}) kept full marks")
    else:
        assert result["score"] == result["max_score"], (
            f"right answer {answer.id!r} ({answer.explanation}) lost points: {result['message']}")


@pytest.mark.parametrize("assignment, answer", ANSWERS, ids=[f"{a}:{answer.id}" for a, answer in ANSWERS])
def test_known_answer_is_diagnosed_as_itself(graded_answers, assignment, answer):
    """A catalogued wrong answer is named, by its own id, for its own function and no other;
    a right answer is named for nothing (autograder/judging/diagnosis.py)."""
    result = graded_answers[assignment][answer.id]
    if answer.verdict == "right" or answer.function not in diagnosis.load_probes(assignment):
        assert result["diagnoses"] == {}, f"right answer {answer.id!r} was labelled {result['diagnoses']}"
        return
    same = {b for a, b in diagnosis.load_probes(assignment)[answer.function].same if a == answer.id}
    same |= {a for a, b in diagnosis.load_probes(assignment)[answer.function].same if b == answer.id}
    assert set(result["diagnoses"]) == {answer.function} and result["diagnoses"][answer.function] in \
        {answer.id} | same, f"{answer.id} ({answer.explanation}) was diagnosed as {result['diagnoses']}"


@pytest.mark.parametrize("assignment", CATALOGUED)
def test_a_mistake_costs_only_its_own_functions_points(graded_answers, assignment):
    """The cascade: no catalogued wrong answer loses points in another function's tests."""
    tests = own_tests(assignment)
    worst, offenders = 0.0, []
    for answer in catalogue.load(assignment):
        result = graded_answers[assignment][answer.id]
        elsewhere = {name: top - got for name, (got, top) in result["tests"].items()
                     if got < top and name not in tests[answer.function]}
        lost = sum(elsewhere.values())
        worst = max(worst, lost)
        if elsewhere:
            offenders.append(f"{answer.id} ({answer.function}) lost {lost:g} points in {sorted(elsewhere)}")
    print(f"{assignment}: largest loss beyond the answer's own function: {worst:g} points")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("assignment", CATALOGUED)
def test_a_mistake_that_names_its_tests_loses_exactly_those(graded_answers, assignment):
    """One mistake, one lost test: an answer whose entry lists `loses` loses points in those
    tests and in no other test of its own function either."""
    offenders = []
    for answer in (a for a in catalogue.load(assignment) if a.loses):
        result = graded_answers[assignment][answer.id]
        lost = {name for name, (got, top) in result["tests"].items() if got < top}
        if lost != set(answer.loses):
            offenders.append(f"{answer.id} lost points in {sorted(lost)}, not in {sorted(answer.loses)}")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("assignment", CATALOGUED)
def test_hints_name_the_answers_own_mistake(graded_answers, assignment):
    """A catalogued hint is shown to the answer it describes, and to no answer it does not."""
    answers = catalogue.load(assignment)
    hints = {a.hint: a.id for a in answers if a.hint}
    problems = []
    for answer in answers:
        text = " ".join(graded_answers[assignment][answer.id].get("messages", {}).values())
        if answer.hint and answer.hint not in text:
            problems.append(f"{answer.id}: its messages do not say {answer.hint!r}: {text[:300]}")
        for hint, owner in hints.items():
            if hint in text and hint != answer.hint and answer.verdict == "wrong" \
                    and not answer.also_matches(owner):
                problems.append(f"{answer.id}: its messages name another mistake ({owner}: {hint!r})")
    assert not problems, "\n".join(problems)
