"""The memory rule of chapter 8 is measured where student code cannot change the figure.

The notebook's `memory_beyond_inputs` helper measures with tracemalloc, in the student's
process: a student can stop tracemalloc, fake its figures or redefine the helper. When
graded, the referee swaps in its own version, which reads how far the sandbox's memory
cgroup rose during the call (sandbox.MemoryMeter), from outside the sandbox. These
tests check the meter on a process in a sandbox, and grade an honest tiled answer (full
marks), answers that build the full matrix or a block of queries against all the keys
(they lose their memory test and nothing else), and one that also hides from tracemalloc
(it gains nothing); and, without a sandbox, what the grader subtracts, and its fallback
where no cgroup can be measured.
"""

import shutil
import types

import nbformat
import numpy as np
import pytest

from autograder.judging import catalogue, referee
from autograder.isolation import sandbox
from conftest import Submissions, by_student, run_autograder, student_and_reference

ASSIGNMENT = "efficient_attention"
MiB = 2 ** 20

needs_sandbox = pytest.mark.skipif(shutil.which("bwrap") is None,
                                   reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox")


def cgroup_isolation():
    isolation = sandbox.probe()
    if not isolation.cgroup:
        pytest.skip("no writable cgroup (the grader is not root): memory is measured by tracemalloc in the kernel")
    return isolation


@needs_sandbox
@pytest.mark.parametrize("megabytes", [0, 96])
def test_the_meter_sees_what_a_sandboxed_process_touches(megabytes):
    isolation = cgroup_isolation()
    code = f"import time; block = bytearray({megabytes} * 2**20); block[::4096] = b'x' * len(block[::4096])"
    with sandbox.Sandbox(isolation, sandbox.Limits(), slot=0, name="meter") as box:
        meter = box.memory_meter()
        assert meter is not None
        meter.start()
        done = box.run(["/usr/bin/env", "python3", "-c", code], timeout=60)
        used = meter.stop()
    assert done.returncode == 0, done.stderr
    # Python itself takes some 10 MiB; the block comes on top of it.
    assert megabytes * MiB <= used <= (megabytes + 40) * MiB, used / MiB


def answer(identifier):
    return next(a for a in catalogue.load(ASSIGNMENT) if a.id == identifier)


HIDE = """
import sys, tracemalloc, types

# Every way a student's process could change the figure tracemalloc gives.
tracemalloc.start = lambda *args: None
tracemalloc.get_traced_memory = lambda: (0, 0)
sys.modules["tracemalloc"] = types.SimpleNamespace(start=lambda *a: None, stop=lambda: None,
                                                   get_traced_memory=lambda: (0, 0))

def memory_beyond_inputs(function, *args, **kwargs):
    return 0, function(*args, **kwargs)
"""


def with_cell_after(notebook, grade_id, source):
    notebook = nbformat.reads(nbformat.writes(notebook), as_version=4)
    at = next(i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    notebook.cells.insert(at + 1, nbformat.v4.new_code_cell(source.strip()))
    return notebook


@needs_sandbox
def test_only_the_memory_test_is_lost_and_hiding_gains_nothing(tmp_path):
    cgroup_isolation()
    student, reference, code = student_and_reference(ASSIGNMENT)
    forward, backward = answer("tiled-full-matrix").code, answer("backward-full-matrix").code
    batch = Submissions(tmp_path / "submitted")
    batch.save("honest", reference)
    batch.save("full_forward", catalogue.fill(student, {**code, "tiled_attention": forward}))
    batch.save("full_backward", catalogue.fill(student, {**code, "tiled_attention_backward": backward}))
    # A block of queries against all the keys: under the quarter-matrix rule at n = 2048,
    # over the bound of one block of keys at a time with 128 queries and 16384 keys.
    batch.save("rows_forward", catalogue.fill(student, {**code, "tiled_attention": answer("tiled-row-chunks").code}))
    batch.save("rows_backward", catalogue.fill(
        student, {**code, "tiled_attention_backward": answer("backward-row-chunks").code}))
    both = catalogue.fill(student, {**code, "tiled_attention": forward, "tiled_attention_backward": backward})
    batch.save("full_and_hidden", with_cell_after(both, "test_helpers", HIDE))
    status, lines, log = run_autograder("grade", ASSIGNMENT, *batch.values(), "--out", tmp_path / "grading",
                                        "--no-progress")
    assert status == 0, log[-3000:]
    results = by_student(lines)

    def lost(name):
        return sorted(test for test, (got, top) in results[name]["tests"].items() if got < top)

    assert results["honest"]["score"] == results["honest"]["max_score"], results["honest"]["messages"]
    assert lost("full_forward") == ["test_tiled_attention_memory"], results["full_forward"]["messages"]
    assert lost("full_backward") == ["test_tiled_attention_backward_memory"], results["full_backward"]["messages"]
    assert lost("rows_forward") == ["test_tiled_attention_memory"], results["rows_forward"]["messages"]
    assert lost("rows_backward") == ["test_tiled_attention_backward_memory"], results["rows_backward"]["messages"]
    for name in ("rows_forward", "rows_backward"):
        assert "16384 keys" in " ".join(results[name]["messages"].values())
    assert lost("full_and_hidden") == ["test_tiled_attention_backward_memory", "test_tiled_attention_memory"], (
        results["full_and_hidden"]["messages"])
    for name in ("full_forward", "full_and_hidden"):
        assert "MiB beyond its inputs" in results[name]["messages"]["test_tiled_attention_memory"]


class _Answer(referee.Remote):
    """A stand-in for the student's function whose call returns one float64 (1024, 64) array."""

    def _ask(self, op, args=(), kwargs=None, **fields):
        return np.zeros((1024, 64))


class _Meter:
    def __init__(self, used=0, fails=False):
        self.used, self.fails = used, fails

    def start(self):
        if self.fails:
            raise OSError("cgroup v2 before Linux 6.12: memory.peak cannot be reset")
        return 0

    def stop(self):
        return self.used


def _judge(meter):
    judge = referee.Referee.__new__(referee.Referee)
    judge.channel = types.SimpleNamespace(memory_meter=meter, over_limits=[])
    judge.kernel_memory = lambda function, *args, **kwargs: ("measured in the kernel", None)
    return judge


def test_the_grader_subtracts_the_copies_that_cross_and_nothing_else():
    judge = _judge(_Meter(used=40 * MiB))
    x = np.zeros((1024, 64))  # 0.5 MiB, as the result: each crosses as up to three copies
    used, result = judge.memory_beyond_inputs(_Answer(judge.channel, name="f"), x, scale=x)
    assert used == 40 * MiB - 3 * (3 * x.nbytes) and result.shape == (1024, 64)
    assert judge.channel.over_limits == []


@pytest.mark.parametrize("meter", [None, _Meter(fails=True)], ids=["no cgroup", "peak cannot be reset"])
def test_without_a_meter_the_notebook_s_own_helper_runs_and_the_report_says_so(meter):
    judge = _judge(meter)
    assert judge.memory_beyond_inputs(_Answer(judge.channel, name="f"), np.zeros(3)) == ("measured in the kernel",
                                                                                          None)
    assert any("the student's to forge" in note for note in judge.channel.over_limits)
