"""The memory rule of chapter 8 is measured where student code cannot change the figure.

The notebook's `memory_beyond_inputs` helper measures with tracemalloc, in the student's
process: a student can stop tracemalloc, fake its figures or redefine the helper. When
graded, the referee swaps in its own version, which reads how far the sandbox's memory
cgroup rose during the call (sandbox.MemoryMeter), from outside the sandbox. These
tests check the meter on a process in a sandbox, and grade an honest tiled answer (full
marks), answers that build the full matrix or a block of queries against all the keys
(they lose their memory test and nothing else), and one that also hides from tracemalloc
(it gains nothing); the attacks on the meter itself (tests/attacks/efficient_attention.py,
MEMORY_ATTACKS: memory handed back lazily so that the group sits at its limit, and twice
the budget in float32 with the result in float64 or complex128) each lose their memory
test and nothing else; and, without a sandbox, what the grader subtracts (sized from the
reference's result, never from the student's), the second measurement it takes when the
kernel took memory back during the first, and its fallback where no cgroup can be
measured.
"""

import shutil
import subprocess
import sys
import types

import nbformat
import numpy as np
import pytest

from attacks.efficient_attention import _HAND_BACK_LAZILY, MEMORY_ATTACKS
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


# A process that hands memory back lazily until its group is at its limit, then, at each
# line it reads, allocates and touches 64 MiB (and frees them).
LAZY_PROCESS = "import sys\nimport numpy as np\n" + _HAND_BACK_LAZILY + """
print("ready", flush=True)
while sys.stdin.readline().strip():
    block = np.ones(2 ** 23)
    print("done", flush=True)
    del block
"""


@needs_sandbox
def test_memory_handed_back_lazily_spoils_the_figure_until_the_kernel_takes_it_back():
    isolation = cgroup_isolation()
    with sandbox.Sandbox(isolation, sandbox.Limits(memory=512 * MiB), slot=0, name="lazy") as box:
        process = box.popen([sys.executable, "-c", LAZY_PROCESS], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert process.stdout.readline() == b"ready\n"
        meter = box.memory_meter()

        def measured():
            meter.start()
            process.stdin.write(b"go\n")
            process.stdin.flush()
            assert process.stdout.readline() == b"done\n"
            return meter.stop()

        assert meter.usage() >= meter.limit - meter.margin  # the group sits at its limit
        meter.reclaim = lambda: None  # as the meter measured before it took memory back first
        hidden = measured()
        assert hidden < 64 * MiB and meter.spoiled, (hidden / MiB, meter.spoiled)
        del meter.reclaim
        meter.reclaim()  # as the grader does before it measures again: the lazily freed memory goes
        assert meter.usage() < meter.limit // 2
        seen = measured()
        process.stdin.write(b"\n")
        process.stdin.flush()
        process.wait(timeout=30)
    assert 64 * MiB <= seen <= 96 * MiB and not meter.spoiled, (seen / MiB, meter.spoiled)


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
    for name, (cells, _) in MEMORY_ATTACKS.items():
        batch.save(name, catalogue.fill(student, {**code, **cells}))
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
    for name, (_, test) in MEMORY_ATTACKS.items():
        assert lost(name) == [test], (name, results[name]["messages"])


class _Answer(referee.Remote):
    """A stand-in for the student's function `f`, whose call returns one (1024, 64) array of
    `dtype` (float64 unless the test says otherwise)."""

    dtype = np.float64

    def _ask(self, op, args=(), kwargs=None, **fields):
        return np.zeros((1024, 64), dtype=_Answer.dtype)


class _Meter:
    """A meter whose figures are given: `used`, and `spoiled` for the first `spoiled_times` calls."""

    def __init__(self, used=0, fails=False, spoiled_times=0):
        self.used, self.fails, self.spoiled_times = used, fails, spoiled_times
        self.spoiled, self.stops, self.reclaims = "", 0, 0

    def start(self):
        if self.fails:
            raise OSError("cgroup v2 before Linux 6.12: memory.peak cannot be reset")
        return 0

    def stop(self):
        self.stops += 1
        self.spoiled = "the sandbox's memory reached its limit" if self.stops <= self.spoiled_times else ""
        return self.used

    def reclaim(self):
        self.reclaims += 1


def _judge(meter, references=None):
    judge = referee.Referee.__new__(referee.Referee)
    judge.channel = types.SimpleNamespace(memory_meter=meter, over_limits=[], references=references or {})
    judge.kernel_memory = lambda function, *args, **kwargs: ("measured in the kernel", None)
    return judge


def test_the_grader_subtracts_the_copies_that_cross_and_nothing_else():
    x = np.zeros((1024, 64))  # 0.5 MiB, sent twice (positional and keyword)
    sent = 2 * x.nbytes
    # Without a reference the result is the student's, and nothing is allowed for it.
    judge = _judge(_Meter(used=40 * MiB))
    used, result = judge.memory_beyond_inputs(_Answer(judge.channel, name="f"), x, scale=x)
    assert used == 40 * MiB - 3 * sent and result.shape == (1024, 64)
    # With one, three copies of each argument and of the reference's result.
    judge = _judge(_Meter(used=40 * MiB), {"f": lambda x, scale: x + scale})
    used, _ = judge.memory_beyond_inputs(_Answer(judge.channel, name="f"), x, scale=x)
    assert used == 40 * MiB - 3 * (sent + x.nbytes)
    assert judge.channel.over_limits == []


def test_a_wider_result_than_the_reference_s_is_not_allowed_for(monkeypatch):
    x = np.zeros((1024, 64))
    figures = {}
    for dtype in (np.float64, np.complex128, np.float32):
        monkeypatch.setattr(_Answer, "dtype", dtype)
        judge = _judge(_Meter(used=40 * MiB), {"f": lambda x: x.copy()})
        figures[np.dtype(dtype).name], _ = judge.memory_beyond_inputs(_Answer(judge.channel, name="f"), x)
    assert figures["complex128"] == figures["float64"] == 40 * MiB - 3 * (x.nbytes + x.nbytes)
    assert figures["float32"] == 40 * MiB - 3 * (x.nbytes + x.nbytes // 2)  # less crosses, less is allowed


def test_a_spoiled_figure_is_taken_again_and_a_second_one_fails_the_test():
    meter = _Meter(used=5 * MiB, spoiled_times=1)
    judge = _judge(meter)
    used, _ = judge.memory_beyond_inputs(_Answer(judge.channel, name="f"), np.zeros(3))
    assert (meter.stops, meter.reclaims, used) == (2, 1, 5 * MiB - 3 * 24)
    meter = _Meter(used=0, spoiled_times=2)
    judge = _judge(meter)
    with pytest.raises(AssertionError, match="could not be measured: while it ran, the sandbox's memory reached"):
        judge.memory_beyond_inputs(_Answer(judge.channel, name="f"), np.zeros(3))
    assert (meter.stops, meter.reclaims) == (2, 1)


@pytest.mark.parametrize("meter", [None, _Meter(fails=True)], ids=["no cgroup", "peak cannot be reset"])
def test_without_a_meter_the_notebook_s_own_helper_runs_and_the_report_says_so(meter):
    judge = _judge(meter)
    assert judge.memory_beyond_inputs(_Answer(judge.channel, name="f"), np.zeros(3)) == ("measured in the kernel",
                                                                                          None)
    assert any("the student's to forge" in note for note in judge.channel.over_limits)
