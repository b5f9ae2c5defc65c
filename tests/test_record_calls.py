"""`record_calls`: what the student's code fed a test's own function is written down in
the grader, where the kernel cannot change it.

A test wraps one of its functions with `record_calls(function) -> (recorded, calls)` and
passes `recorded` to student code (chapter 6 hands `generate` its model this way). The
calls run in the grader's bounded child, but the Channel appends each call's arguments to
`calls` in the grading worker before it forwards the call, from the values the kernel sent.
"""

import shutil

import pytest

from autograder.judging.referee import RECORDED_CALLS, Channel, Referee
from conftest import Submissions, by_student, run_autograder, student_and_reference

ASSIGNMENT = "transformer_block"
EVIDENCE = "test_generate_cache"


def test_the_tests_own_calls_are_recorded_in_the_grader():
    recorded, calls = Referee.record_calls(lambda x, scale=1: x * scale)
    assert recorded(2, scale=3) == 6
    assert calls == [((2,), {"scale": 3})]
    assert getattr(recorded, RECORDED_CALLS) is calls


def test_calls_in_the_bounded_child_are_not_recorded_twice():
    recorded, calls = Referee.record_calls(lambda x: x + 1)
    Channel.forked = True  # as in the bounded child, where the Channel has already written the call down
    try:
        assert recorded(1) == 2
    finally:
        Channel.forked = False
    assert calls == []


# A generate that reaches for the record (the stand-in the kernel holds has no such
# attribute, and nothing in the kernel refers to the grader's list), then decodes
# without the cache; and one that feeds the model a call too many.
FORGER = """
def generate(model, prompt, n_new):
    for attempt in (lambda: model._grader_recorded_calls.clear(),
                    lambda: setattr(model, "_grader_recorded_calls", [])):
        try:
            attempt()
        except Exception:
            pass
    tokens = prompt
    for _ in range(n_new):
        logits, _ = model(tokens)
        tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return tokens
"""

EXTRA_CALL = """
def generate(model, prompt, n_new):
    tokens = prompt.clone()
    logits, caches = model(prompt, caches=None, start=0)
    for step in range(n_new):
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
        logits, caches = model(next_token, caches=caches, start=tokens.shape[1] - 1)
    model(prompt)  # a call the result does not need: the record shows it
    return tokens
"""


@pytest.mark.skipif(shutil.which("bwrap") is None,
                    reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox")
def test_the_record_is_the_graders(tmp_path):
    student, reference, code = student_and_reference(ASSIGNMENT)
    from autograder.judging import catalogue

    batch = Submissions(tmp_path / "submitted")
    batch.save("reference", reference)
    batch.save("forger", catalogue.fill(student, {**code, "generate": FORGER.strip()}))
    batch.save("extra_call", catalogue.fill(student, {**code, "generate": EXTRA_CALL.strip()}))
    status, lines, log = run_autograder("grade", ASSIGNMENT, *batch.values(), "--out", tmp_path / "grading",
                                        "--no-progress")
    assert status == 0, log[-3000:]
    results = by_student(lines)
    assert results["reference"]["score"] == results["reference"]["max_score"], results["reference"]["message"]
    for name in ("forger", "extra_call"):
        got, top = results[name]["tests"][EVIDENCE]
        assert got == 0 < top, (name, results[name]["messages"])
        # The tokens are right: only the record of the calls tells these answers apart.
        assert results[name]["tests"]["test_generate_hidden"][0] > 0, results[name]["messages"]
