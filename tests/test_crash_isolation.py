"""One function's crash is one function's loss; the grader's own work is bounded.

Each submission is the reference solution of the self-attention assignment with one
function replaced by one that crashes the kernel in a way a student's code can: it
exits the process, exhausts the sandbox's memory, swallows the interrupt and loops, or
simply loops. The other four functions are right, and must keep every one of their
points (21 of 24); the broken function's tests fail with a message that says what
happened. A cell that kills the kernel at the top level costs only what it defines, and
an answer too deep for the parser costs at most its own tests.

The work a student's call asks of the grader (a reference answer of another graded
function, a function a test handed over) runs in a forked child with a memory and a
time limit (autograder/isolation/bounded.py): a call over a limit fails that call, visibly, and
the worker's own memory does not grow.
"""

import shutil
import time

import numpy as np
import pytest

from attacks._too_deep import TOO_DEEP_TO_PARSE
from autograder.isolation import bounded
from autograder.judging import catalogue
from conftest import Submissions, by_student, run_autograder, student_and_reference

ASSIGNMENT = "self_attention"
SOFTMAX_TESTS = {"test_softmax", "test_softmax_stability", "test_softmax_inputs"}

CRASHING_SOFTMAX = {
    "exits": "def softmax(x, axis=-1):\n    import os\n    os._exit(3)\n",
    "exhausts_memory": ("def softmax(x, axis=-1):\n    import numpy as np\n"
                        "    hoard = np.ones(2**29)\n"),
    "ignores_interrupt": ("def softmax(x, axis=-1):\n    import signal\n"
                          "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n    while True:\n        pass\n"),
    "swallows_interrupt": ("def softmax(x, axis=-1):\n    while True:\n        try:\n            while True:\n"
                           "                pass\n        except:\n            pass\n"),
    "loops": "def softmax(x, axis=-1):\n    while True:\n        pass\n",
}
WHY = {
    "exits": ("the kernel died",),
    # killed for memory, or (on a machine short of memory, where filling the last pages
    # before the limit crawls) stopped as a kernel that cannot be interrupted
    "exhausts_memory": ("memory limit", "did not stop when interrupted"),
    "ignores_interrupt": ("did not stop when interrupted",),
    "swallows_interrupt": ("time limit",),
    "loops": ("time limit",),
}

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("crashes")
    student, reference, code = student_and_reference(ASSIGNMENT)
    batch = Submissions(folder / "submitted")
    batch.save("reference", reference)
    for name, answer in CRASHING_SOFTMAX.items():
        batch.save(name, catalogue.fill(student, {**code, "softmax": answer}))
    # A student cell that takes the kernel down when it runs, after the causal_mask answer.
    top_level = catalogue.fill(student, {**code, "causal_mask": code["causal_mask"] + "\nimport os\nos._exit(1)\n"})
    batch.save("exits_at_top_level", top_level)
    huge = code["self_attention"].replace("    queries = X @ W_q", "    causal_mask(40000)\n    queries = X @ W_q")
    assert huge != code["self_attention"]
    batch.save("asks_a_huge_reference", catalogue.fill(student, {**code, "self_attention": huge}))
    batch.save("too_deep_to_parse", catalogue.fill(student, {**code, **TOO_DEEP_TO_PARSE}))
    started = time.monotonic()
    status, lines, log = run_autograder("grade", ASSIGNMENT, *batch.values(), "--out", folder / "grading",
                                        "--cell-timeout", 5, "--submission-timeout", 60, "--no-progress")
    seconds = time.monotonic() - started
    assert status == 0, log[-3000:]
    print(f"graded {len(batch)} submissions in {seconds:.0f} s")
    return by_student(lines)


def test_the_reference_keeps_full_marks(graded):
    result = graded["reference"]
    assert result["score"] == result["max_score"] == 24.0, result["message"]


@pytest.mark.parametrize("name", sorted(CRASHING_SOFTMAX))
def test_a_crashing_function_costs_only_its_own_tests(graded, name):
    result = graded[name]
    assert result["status"] == "graded", result["message"]
    lost = {test for test, (got, top) in result["tests"].items() if got < top}
    assert lost == SOFTMAX_TESTS, f"{name}: lost {sorted(lost)}; {result['message']}"
    assert result["score"] == 20.0
    said = " ".join(result["messages"].values())
    assert any(why in said for why in WHY[name]), f"{name}: the messages do not say why: {said}"


@pytest.mark.parametrize("name", ["exits", "exhausts_memory", "ignores_interrupt"])
def test_a_crash_is_reported_with_the_function_it_hit(graded, name):
    problems = " ".join(graded[name]["problems"])
    assert "while `softmax` was tested" in problems and "fresh kernel" in problems, problems
    if graded[name]["messages"]["test_softmax"].startswith("the kernel"):  # the first test took it down
        later = graded[name]["messages"]["test_softmax_stability"]
        assert "remaining tests of `softmax` were not run" in later, later


def test_a_cell_that_kills_the_kernel_costs_only_what_it_defines(graded):
    result = graded["exits_at_top_level"]
    lost = {test for test, (got, top) in result["tests"].items() if got < top}
    assert lost == {"test_causal_mask"}, result["message"]
    assert any("your answer cell causal_mask" in p for p in result["problems"]), result["problems"]


def test_a_huge_reference_answer_fails_the_call_visibly(graded):
    result = graded["asks_a_huge_reference"]
    lost = {test for test, (got, top) in result["tests"].items() if got < top}
    assert lost == {"test_self_attention", "test_self_attention_mask"}, result["message"]
    message = result["messages"]["test_self_attention"]
    assert "causal_mask" in message and "memory limit" in message, message
    assert any("memory limit" in flag for flag in result["flags"]), result["flags"]


def test_an_answer_too_deep_to_parse_costs_at_most_its_own_tests(graded):
    """A long written-out expression (tests/attacks/_too_deep.py) that the parser gives up
    on: the grader's own parse of it never ends the grading (before: status error, no
    grade, 0 of 24; now 19). The kernel cannot compile the cell either (it is left out,
    as a cell that does not end), so softmax's tests fail; the chapter's shortcut test of
    scaled_dot_product_attention, whose helper parses every submitted cell, fails too."""
    result = graded["too_deep_to_parse"]
    assert result["status"] == "graded", result["message"]
    lost = {test for test, (got, top) in result["tests"].items() if got < top}
    assert lost <= SOFTMAX_TESTS | {"test_sdpa_no_shortcut"}, result["message"]
    assert result["score"] >= 19.0


# -- the bounded call itself --------------------------------------------------------------

def test_a_bounded_call_returns_values_and_errors():
    limits = bounded.Limits(memory=256 * bounded.MiB, seconds=10)
    value = bounded.call(np.tril, (np.ones((3, 3)),), {}, limits, "tril")
    assert np.array_equal(value, np.tril(np.ones((3, 3))))
    with pytest.raises(ValueError, match="bad"):
        bounded.call(lambda: (_ for _ in ()).throw(ValueError("bad")), (), {}, limits, "raises")


def test_a_bounded_call_over_its_memory_fails_within_the_limit():
    limits = bounded.Limits(memory=256 * bounded.MiB, seconds=20)
    before = bounded.status_bytes("VmRSS")
    started = time.monotonic()
    with pytest.raises(MemoryError, match="memory limit .256 MiB."):
        bounded.call(np.ones, ((32000, 32000),), {}, limits, "the grader's reference causal_mask")
    assert time.monotonic() - started < 10
    assert bounded.status_bytes("VmRSS") - before < 64 * bounded.MiB, "the caller's own memory grew"


def test_a_bounded_call_over_its_time_is_stopped():
    limits = bounded.Limits(memory=256 * bounded.MiB, seconds=1.0)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="time limit"):
        bounded.call(time.sleep, (60,), {}, limits, "the test's function")
    assert time.monotonic() - started < 5
