"""Diagnosis by behaviour (autograder/judging/diagnosis.py): every graded function of the course's
catalogues has probes, and they tell its catalogued wrong answers apart, from each other
and from the reference solution, on the trusted side alone (no grading run). That each
wrong answer, graded, is then named as itself is tests/test_catalogues.py's."""

import math
import re

import nbformat
import numpy as np
import pytest
import torch

from autograder.judging import catalogue, diagnosis, executor
from autograder import paths

# Probes are required here; later chapters' catalogues add theirs as they land.
PROBED = ["soft_lookup", "self_attention", "attention_gradients", "multi_head_attention", "positional_encoding",
          "transformer_block", "efficient_attention", "applications"]
ALL_PROBED = [a for a in paths.assignments() if catalogue.catalogue_path(a).exists() and diagnosis.load_probes(a)]


def reference_cells(assignment):
    (source,) = paths.assignment_notebooks(assignment)
    return executor.reference_cells(nbformat.read(source, as_version=4))


@pytest.mark.parametrize("assignment", PROBED)
def test_every_graded_function_has_probes(assignment):
    (source,) = paths.assignment_notebooks(assignment)
    functions = set(catalogue.reference_code(nbformat.read(source, as_version=4)))
    assert functions <= set(diagnosis.load_probes(assignment)), "functions without probes"


@pytest.mark.parametrize("assignment", sorted(set(PROBED) | set(ALL_PROBED)))
def test_probes_ask_what_a_stand_in_answers_as_the_object_would(assignment):
    """In the grader a student's object is a stand-in: `type(x)` is the stand-in's type there
    (and the object's own on the trusted side), where `x.__class__` is the object's on both."""
    for function, probes in diagnosis.load_probes(assignment).items():
        text = probes.setup + "\n".join(probes.calls)
        assert not re.search(r"\btype\(", text), f"probes of {function}: use x.__class__, not type(x)"


@pytest.mark.parametrize("assignment", sorted(set(PROBED) | set(ALL_PROBED)))
def test_probes_tell_the_wrong_answers_apart(assignment):
    """No two wrong answers of one function give the same values on its probes, unless the
    catalogue says they are the same mistake (`same`); none gives the reference's values;
    every right answer gives the reference's values and no wrong answer's."""
    known = diagnosis.Catalogue(assignment, reference_cells(assignment))
    problems = []
    for function, probes in known.probes.items():
        reference, wrong = known.behaviours(function)
        assert all(how == "value" or how == "raised" for how, _ in reference)
        declared = set(probes.same) | {(b, a) for a, b in probes.same}
        for i, (answer, values) in enumerate(wrong):
            if diagnosis.same(values, reference, probes.rtol, probes.atol):
                problems.append(f"{answer.id} behaves like the reference on the probes of {function}")
            for other, others in wrong[i + 1:]:
                if diagnosis.same(values, others, probes.rtol, probes.atol) and (answer.id, other.id) not in declared:
                    problems.append(f"{answer.id} and {other.id} give the same values on the probes of {function}")
        right = [a for a in known.answers if a.function == function and a.verdict == "right"]
        for answer, values in zip(right, diagnosis.behaviours_of(known.reference_cells, probes,
                                                                 [a.code for a in right])):
            if not diagnosis.same(values, reference, probes.rtol, probes.atol):
                problems.append(f"right answer {answer.id} differs from the reference on the probes of {function}")
            if known.diagnose(function, values) is not None:
                problems.append(f"right answer {answer.id} is diagnosed as {known.diagnose(function, values).id}")
    assert not problems, "\n".join(problems)


def test_a_catalogue_without_probes_loads_and_diagnoses_nothing(tmp_path):
    source = catalogue.catalogue_path("self_attention").read_text()
    kept = [block for block in source.split("\n\n") if "- probes:" not in block]
    (tmp_path / "self_attention.yml").write_text("\n\n".join(kept))
    assert diagnosis.load_probes("self_attention", tmp_path) == {}
    assert catalogue.load("self_attention", tmp_path) == catalogue.load("self_attention")
    known = diagnosis.Catalogue("self_attention", reference_cells("self_attention"), tmp_path)
    assert known.diagnose("softmax", [["value", {"float": 1.0}]]) is None


def test_values_compare_by_type_dtype_shape_and_tolerance():
    x = np.array([[1.0, np.nan], [np.inf, -2.0]])
    same = diagnosis.same
    assert same(diagnosis.encode(x), diagnosis.encode(x + 1e-12))
    assert not same(diagnosis.encode(x), diagnosis.encode(x + 1e-3))
    assert not same(diagnosis.encode(x), diagnosis.encode(x.astype(np.float32)))
    assert not same(diagnosis.encode(x), diagnosis.encode(torch.from_numpy(x)))
    assert not same(diagnosis.encode(x), diagnosis.encode(x.T))
    assert not same(diagnosis.encode(np.array([1, 2])), diagnosis.encode(np.array([1.0, 2.0])))
    assert same(diagnosis.encode((x, [1, "a"])), diagnosis.encode((x.copy(), [1, "a"])))
    assert not same(diagnosis.encode((x, [1])), diagnosis.encode([x, [1]]))
    assert diagnosis.encode(torch.zeros(2, 3, device="meta")) == {"tensor": "float32", "shape": [2, 3],
                                                                   "device": "meta"}
    assert diagnosis.encode(float("nan")) == {"float": "nan"} and math.isnan(float("nan"))


def test_anonymized_code_drops_comments_and_docstrings():
    code = 'def f(x):\n    """By Alice Example."""\n    # Alice: my note\n    return x + 1  # done\n'
    assert diagnosis.anonymized(code) == "def f(x):\n    return x + 1"


def test_anonymized_code_drops_every_bare_string():
    """Strings used as comments anywhere (in loops, branches, handlers, after code), f-strings
    among them, are left out; strings the code uses stay."""
    code = (
        "def f(x):\n"
        "    y = 'kept'\n"
        "    '''Alice wrote this loop.'''\n"
        "    for i in range(2):\n"
        "        f'Alice {i}'\n"
        "    if x:\n"
        "        'Alice again'\n"
        "    else:\n"
        "        b'Alice bytes'\n"
        "    try:\n"
        "        pass\n"
        "    except ValueError:\n"
        "        'Alice handles it'\n"
        "    return y\n"
        "'Alice at the end'\n"
    )
    written = diagnosis.anonymized(code)
    assert "Alice" not in written
    assert "'kept'" in written and "return y" in written
    compile(written, "<anonymized>", "exec")  # still code


def test_anonymized_code_strips_magics_and_never_shows_what_it_cannot_parse():
    """A cell magic is dropped before parsing; a syntax error, or an expression too deep for the
    parser or for ast.unparse, is replaced by a fixed sentence, never the raw text."""
    magic = "%%time\ndef f(x):\n    'Alice'\n    return x  # Alice\n"
    assert diagnosis.anonymized(magic) == "def f(x):\n    return x"
    broken = "def f(x):\n    # Alice\n    return (x +\n"
    assert diagnosis.anonymized(broken) == diagnosis.UNREADABLE
    deep = "def f(x):\n    # Alice\n    return " + "+".join(["x"] * 20000) + "\n"
    assert diagnosis.anonymized(deep) == diagnosis.UNREADABLE
    nested = "def f(x):\n    # Alice\n    return " + "(" * 300 + "x" + ")" * 300 + "\n"
    assert "Alice" not in diagnosis.anonymized(nested)
