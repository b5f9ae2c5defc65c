"""Tricks that try to raise a score must not, and honest answers that are noisy keep theirs.

Every hostile submission is the student version of the self-attention assignment with
wrong answers that have the right shapes (zeros; the `garbage` control), plus a trick in
a cell of its own or inside an answer: forged verdicts on every channel the kernel can
reach, forged replies, a replaced agent, rewritten cells, patched libraries and ufuncs,
objects that lie about equality or their class, outputs written into the running test's
own output (tests/attacks/_test_outputs.py). A grader that trusts anything decided
in the student's process would give these marks; ours must give each one at most what
the same wrong answers get without the trick, test by test.

Honest answers that warn, log, print a lot (into a test's output too), use threads or
compute with PyTorch keep full marks. The reference solution, graded in the same batch, keeps full marks and the
untouched student version scores zero.
"""

import shutil

import nbformat
import pytest

from autograder.judging import catalogue
from autograder import paths
from attacks import _test_outputs
from attacks import self_attention as attacks
from conftest import Submissions, by_student, run_autograder, student_and_reference

ASSIGNMENT = "self_attention"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox")

# Wrong answers of the right shapes: what a student who wants marks without the work has.
GARBAGE = attacks.GARBAGE  # the same baseline as tests/test_trusted_data.py

# A trick in a cell of its own, right after the setup cell (before every answer).
TRICK_CELLS = {
    "excepthook": """
import sys
sys.excepthook = lambda *args, **kwargs: None
""",
    "showtraceback": """
ip = get_ipython()
ip.showtraceback = lambda *args, **kwargs: None
ip._showtraceback = lambda *args, **kwargs: None
ip.showsyntaxerror = lambda *args, **kwargs: None
""",
    "run_cell_swallows": """
ip = get_ipython()
_real_run_cell = ip.run_cell
def _swallow(raw_cell, *args, **kwargs):
    try:
        exec(raw_cell, ip.user_ns)
    except BaseException:
        pass
    return _real_run_cell("None", *args, **kwargs)
async def _swallow_async(raw_cell, *args, **kwargs):
    return _swallow(raw_cell)
ip.run_cell = _swallow
ip.run_cell_async = _swallow_async
ip.should_run_async = lambda *args, **kwargs: False
""",
    "shell_class_patched": """
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.interactiveshell import ExecutionResult
async def _quiet(self, raw_cell, *args, **kwargs):
    result = ExecutionResult(None)
    try:
        exec(raw_cell, self.user_ns)
    except BaseException:
        pass
    return result
InteractiveShell.run_cell_async = _quiet
""",
    "numpy_torch_builtins_patched": """
import builtins
np.allclose = lambda *args, **kwargs: True
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast_shapes(np.shape(a), np.shape(b)), dtype=bool)
np.array_equal = lambda *args, **kwargs: True
np.all = lambda *args, **kwargs: True
np.any = lambda *args, **kwargs: False
np.testing.assert_allclose = lambda *args, **kwargs: None
np.testing.assert_array_equal = lambda *args, **kwargs: None
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
torch.Tensor.__eq__ = lambda self, other: torch.ones(self.shape, dtype=torch.bool)
builtins.isinstance = lambda *args: True
builtins.all = lambda *args: True
builtins.AssertionError = type("AssertionError", (Warning,), {})
np.core.numeric.isclose = np.isclose
""",
    "library_code_swapped": """
def _yes(*args, **kwargs):
    return True
for _function in (np.isclose, np.allclose, np.array_equal):
    try:
        _function.__code__ = _yes.__code__
    except Exception as error:
        print("refused:", error)
""",
    "sys_exit": """
import sys
sys.exit(0)
""",
    "kernel_killed": """
import os, signal
os.kill(os.getpid(), signal.SIGKILL)
""",
    "fake_results_printed": """
import json, os, sys
fake = {"student": "fake_results_printed", "assignment": "self_attention", "score": 24.0, "max_score": 24.0,
        "status": "graded", "message": "all tests passed", "tests": {}}
print(json.dumps(fake))
print(json.dumps(fake), file=sys.stderr)
os.write(1, (json.dumps(fake) + "\\n").encode())
os.write(2, (json.dumps(fake) + "\\n").encode())
print("[AutogradeApp | INFO] Test cell test_softmax passed: 2.0 / 2.0")
print('{"seq": 1, "type": "verdict", "status": "passed"}')
""",
    "verdicts_forged": """
import json, os, sys
ip = get_ipython()
passed = {"op": "result", "status": "passed", "verdict": "passed", "score": 24.0, "value": True}
for fd in range(3, 64):  # every descriptor the kernel holds: pipes, sockets, the agent's included
    for line in (json.dumps(passed).encode() + b"\\n", b"\\x08\\x00\\x00\\x00\\x00\\x00\\x00\\x00garbage!"):
        try:
            os.write(fd, line)
        except OSError:
            pass
session, kernel = ip.kernel.session, ip.kernel
for parent in ({}, {"msg_id": "0" * 32}, {"msg_type": "execute_request"}):
    session.send(kernel.iopub_socket, "stream", {"name": "stdout", "text": "test_softmax passed"}, parent=parent)
    session.send(kernel.iopub_socket, "execute_result",
                 {"data": {"text/plain": "True"}, "metadata": {}, "execution_count": 1}, parent=parent)
print("[AutogradeApp | INFO] Test cell test_softmax passed: 2.0 / 2.0")
""",
    "replies_forged_for_every_request": """
# Answer every request the grader sends with an "ok" of its own, before the kernel runs it.
ip = get_ipython()
kernel = ip.kernel
def _forge(stream, ident, parent):
    content = {"status": "ok", "execution_count": 1, "user_expressions": {}, "payload": []}
    kernel.session.send(stream, "execute_reply", content, parent, ident=ident)
    kernel.session.send(kernel.iopub_socket, "status", {"execution_state": "idle"}, parent=parent)
kernel.shell_handlers["execute_request"] = _forge
""",
    "agent_replaced": """
# A stand-in for the grader's agent that answers every request with its own arguments.
class _Echo:
    def __init__(self, real):
        self.real = real
    def serve(self, token):
        real = self.real
        def answer(message):
            args = message.get("args") or [None]
            return {"op": "result", "id": message.get("id"), "token": message.get("token"), "value": args[0]}
        real.answer = answer
        return real.serve(token)
__autograder__ = _Echo(__autograder__)
""",
    "input_transformer": """
# Every later cell the kernel receives becomes `None`: the grader's requests included.
get_ipython().input_transformers_post.append(lambda lines: ["None\\n"])
""",
    "audit_and_ufuncs_patched": """
import sys
import numpy._core.umath as umath
sys.audit = lambda *args: None
for name in ("equal", "isfinite", "less_equal", "greater", "subtract", "absolute"):
    try:
        setattr(umath, name, umath.logical_or)
    except Exception:
        pass
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast_shapes(np.shape(a), np.shape(b)), dtype=bool)
""",
}

# Tricks inside an answer: the function itself cheats when the test calls it.
TRICK_ANSWERS = {
    "patched_while_running": ("softmax", """
def softmax(x, axis=-1):
    import builtins
    np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast_shapes(np.shape(a), np.shape(b)), dtype=bool)
    np.allclose = lambda *args, **kwargs: True
    np.array_equal = lambda *args, **kwargs: True
    torch.allclose = lambda *args, **kwargs: True
    builtins.all = lambda *args: True
    return np.zeros_like(np.asarray(x, dtype=float))
"""),
    "always_equal_array": ("softmax", """
class _Yes(np.ndarray):
    def __eq__(self, other):
        return np.ones(self.shape, dtype=bool).view(_Yes)
    def __ne__(self, other):
        return np.zeros(self.shape, dtype=bool).view(_Yes)
    def __bool__(self):
        return True
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        shape = np.broadcast_shapes(*(np.shape(i) for i in inputs))
        return np.ones(shape, dtype=bool)
    def __array_function__(self, func, types, args, kwargs):
        return True
def softmax(x, axis=-1):
    return np.zeros(np.shape(x)).view(_Yes)
"""),
    "mirror_from_frames": ("scaled_dot_product_attention", """
import inspect, sys
def _expected_from_caller():
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("expected_weights", "expected", "expected_output"):
            if name in frame.f_locals:
                return frame.f_locals[name]
        frame = frame.f_back
    return None
class _Mirror:
    def __init__(self, shape):
        self.shape = shape
    def __array__(self, dtype=None, copy=None):
        found = _expected_from_caller()
        if found is None:
            try:
                raise RuntimeError
            except RuntimeError as error:
                frame = error.__traceback__.tb_frame
                while frame is not None and found is None:
                    found = frame.f_locals.get("expected") if hasattr(frame, "f_locals") else None
                    frame = frame.f_back
        if found is None:
            for record in inspect.stack():
                found = record.frame.f_locals.get("expected", found)
        return np.asarray(found if found is not None else np.zeros(self.shape), dtype=dtype)
    def __len__(self):
        return self.shape[0]
def scaled_dot_product_attention(Q, K, V, mask=None):
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    return _Mirror(Q.shape[:-1] + (V.shape[-1],)), _Mirror(Q.shape[:-1] + (K.shape[-2],))
"""),
    "mirror_from_globals": ("scaled_dot_product_attention", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    shape_o, shape_w = Q.shape[:-1] + (V.shape[-1],), Q.shape[:-1] + (K.shape[-2],)
    g = globals()
    output = g.get("expected_output", g.get("expected", np.zeros(shape_o)))
    weights = g.get("expected_weights", np.zeros(shape_w))
    return (output if np.shape(output) == shape_o else np.zeros(shape_o),
            weights if np.shape(weights) == shape_w else np.zeros(shape_w))
"""),
    "claims_to_be_numpy": ("softmax", """
class _Anything:
    __module__ = "numpy"
    shape = (2, 3)
    dtype = np.dtype(float)
    def __eq__(self, other):
        return True
    def __array__(self, dtype=None, copy=None):
        return np.ones(self.shape)
def softmax(x, axis=-1):
    return _Anything()
"""),
    "float_subclass": ("causal_mask", """
class _Lenient(float):
    def __eq__(self, other):
        return True
    def __bool__(self):
        return True
def causal_mask(n):
    return [[_Lenient(0.0)] * n for _ in range(n)]
"""),
    "exits_when_called": ("causal_mask", """
def causal_mask(n):
    import sys
    sys.exit(0)
"""),
    "dies_when_called": ("self_attention", """
def self_attention(X, W_q, W_k, W_v, mask=None):
    import os
    os._exit(0)
"""),
    # An execute_result claiming a point, written into each test's own output.
    **{f"claims_points_in_the_test_output_{function}": (function, code)
       for function, code in _test_outputs.WRONG_THAT_CLAIMS_POINTS.items()},
}


# Right answers that are noisy or unusual: each replaces one function of the reference.
HONEST_VARIANTS = {
    "warns": ("softmax", """
import warnings
def softmax(x, axis=-1):
    warnings.warn("softmax: computing", UserWarning)
    warnings.warn("softmax: numerics", RuntimeWarning)
    x = np.asarray(x)
    exponentials = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return exponentials / np.sum(exponentials, axis=axis, keepdims=True)
"""),
    "logs": ("scaled_dot_product_attention", """
import logging
logging.basicConfig(level=logging.INFO)
def scaled_dot_product_attention(Q, K, V, mask=None):
    logging.info("attention for Q of shape %s", np.shape(Q))
    logging.warning("this goes to stderr")
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        scores = np.where(mask.any(axis=-1, keepdims=True), np.where(mask, scores, -np.inf), 0.0)
    weights = softmax(scores, axis=-1)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)
    return weights @ V, weights
"""),
    "prints_a_lot": ("self_attention", """
import sys
def self_attention(X, W_q, W_k, W_v, mask=None):
    print("self_attention " * 20000)
    print("to stderr " * 20000, file=sys.stderr)
    return scaled_dot_product_attention(X @ W_q, X @ W_k, X @ W_v, mask=mask)
"""),
    "threads": ("causal_mask", """
from concurrent.futures import ThreadPoolExecutor
def causal_mask(n):
    with ThreadPoolExecutor(max_workers=2) as pool:
        rows = list(pool.map(lambda i: np.arange(n) <= i, range(n)))
    return np.array(rows, dtype=bool).reshape(n, n)
"""),
    "torch_warns": ("SelfAttention", """
import warnings
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v=None, bias=False):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.d_k = d_k
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)

    def forward(self, x, mask=None):
        warnings.warn("forward: a UserWarning from the student's module")
        queries, keys, values = self.W_q(x), self.W_k(x), self.W_v(x)
        scores = queries @ keys.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf")).masked_fill(~mask.any(-1, keepdim=True), 0.0)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return weights @ values, weights
"""),
    "torch_softmax": ("softmax", """
def softmax(x, axis=-1):
    return torch.softmax(torch.from_numpy(np.asarray(x)), dim=axis).numpy()
"""),
    # An execute_result of 0 and stderr, written into each test's own output.
    **{f"claims_zero_in_the_test_output_{function}": (function, code)
       for function, code in _test_outputs.RIGHT_THAT_CLAIMS_ZERO.items()},
}

def build(folder):
    (source,) = paths.assignment_notebooks(ASSIGNMENT)
    student, _, _ = student_and_reference(ASSIGNMENT)
    garbage = catalogue.fill(student, {k: v.strip() for k, v in GARBAGE.items()})
    batch = Submissions(folder)
    save = batch.save
    shutil.copyfile(source, folder / "honest.ipynb")
    batch["honest"] = folder / "honest.ipynb"
    save("untouched", student)
    save("garbage", garbage)
    for name, code in TRICK_CELLS.items():
        notebook = nbformat.from_dict(garbage)
        notebook = nbformat.reads(nbformat.writes(notebook), as_version=4)
        setup = next(i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
        notebook.cells.insert(setup + 2, nbformat.v4.new_code_cell(code.strip()))
        save(name, notebook)
    for name, (function, code) in TRICK_ANSWERS.items():
        save(name, catalogue.fill(garbage, {function: code.strip()}))
    _, _, reference = student_and_reference(ASSIGNMENT)
    for name, (function, code) in HONEST_VARIANTS.items():
        save(f"honest_{name}", catalogue.fill(student, {**reference, function: code.strip()}))
    return batch


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile-scores")
    batch = build(folder / "submissions")
    code, lines, log = run_autograder("grade", ASSIGNMENT, *batch.values(), "--out", folder / "grading",
                                      "--no-progress", "--jobs", "2", "--cell-timeout", "40")
    assert code == 0, log[-3000:]
    return {"results": by_student(lines), "log": log, "batch": batch, "out": folder / "grading"}


def test_controls(graded):
    results = graded["results"]
    assert results["honest"]["score"] == results["honest"]["max_score"], results["honest"]["message"]
    assert results["untouched"]["score"] == 0
    garbage = results["garbage"]
    assert garbage["status"] == "graded" and garbage["score"] < garbage["max_score"] / 4, garbage["message"]


@pytest.mark.parametrize("trick", sorted(TRICK_CELLS) + sorted(TRICK_ANSWERS))
def test_trick_does_not_raise_the_score(graded, trick):
    results = graded["results"]
    result, control = results[trick], results["garbage"]
    assert result["status"] == "graded", result["message"]
    assert result["score"] <= control["score"], result["message"]
    for test, (score, top) in result["tests"].items():
        assert score <= control["tests"][test][0], f"{trick} gained points on {test}: {result['message']}"


def test_one_line_per_student_whatever_the_kernel_prints(graded):
    lines = [line for line in graded["log"].splitlines() if line.startswith("{")]
    students = [line for line in lines if '"fake_results_printed"' in line]
    assert len(students) == 1, students
    assert graded["results"]["fake_results_printed"]["score"] <= graded["results"]["garbage"]["score"]


@pytest.mark.parametrize("variant", sorted(HONEST_VARIANTS))
def test_warnings_logging_prints_and_threads_cost_nothing(graded, variant):
    result = graded["results"][f"honest_{variant}"]
    assert result["status"] == "graded" and result["score"] == result["max_score"], (
        f"{variant}: {result['message']} {result.get('messages')}")


def test_what_an_answer_writes_into_a_tests_output_is_shown_and_never_scored(graded):
    """Outputs an answer sends into a running test count for nothing: a wrong answer that
    claims points has the garbage's score and a right one that claims zero keeps full
    marks (tested above), and neither stops the grading (nbgrader read them as scores,
    and the worker stopped on the disagreement: status error, no grade at all)."""
    for name in list(_test_outputs.WRONG_THAT_CLAIMS_POINTS):
        wrong = graded["results"][f"claims_points_in_the_test_output_{name}"]
        right = graded["results"][f"honest_claims_zero_in_the_test_output_{name}"]
        assert wrong["status"] == right["status"] == "graded", (wrong["message"], right["message"])
        assert not any("inconsistency" in text for text in wrong["problems"] + right["problems"])


def test_a_killed_kernel_is_reported_to_the_instructor(graded):
    results = graded["results"]
    assert results["kernel_killed"]["problems"], results["kernel_killed"]["message"]
    assert results["dies_when_called"]["status"] == "graded", results["dies_when_called"]["message"]
