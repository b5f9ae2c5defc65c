"""Submissions that loop, hog memory, flood processes or output, or reach outside: contained.

One batch, graded with small limits (--cell-timeout 30, --submission-timeout 100,
--memory 1.5 GiB, --processes 128) beside an honest and an untouched submission. Each
hostile submission is graded (or reported) on its own: the honest one keeps full
marks, the batch finishes, nothing is left running, nothing outside the submission's
sandbox changes, and the attempts to read the solutions, the gradebook, other students'
work or the network find nothing.
"""

import os
import re
import shutil
import socket
import threading
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from autograder.judging import catalogue
from autograder import paths
from autograder.isolation import sandbox
from conftest import REPO, Submissions, by_student, processes_with, run_autograder, student_and_reference

ASSIGNMENT = "self_attention"
MARKER = f"hostile-{uuid.uuid4().hex[:12]}"
SLEEP_MARKER = str(800000 + os.getpid() % 100000)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox")


def _with_cells(notebook, cells, after="setup"):
    notebook = nbformat.reads(nbformat.writes(notebook), as_version=4)
    position = next(i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == after)
    for offset, code in enumerate(cells):
        notebook.cells.insert(position + 1 + offset, nbformat.v4.new_code_cell(code.strip()))
    return notebook


def build(folder, port, unix_socket, others):
    (source,) = paths.assignment_notebooks(ASSIGNMENT)
    student, reference, reference_code = student_and_reference(ASSIGNMENT)
    batch = Submissions(folder)
    save = batch.save
    save("honest", reference)
    save("untouched", student)
    # Time: a cell that never ends (interrupted), one that cannot be interrupted (the
    # kernel is stopped), a test that never ends (interrupted; the others still run),
    # and a notebook slower than the whole submission's limit.
    save("loops_in_a_cell", _with_cells(student, ["while True:\n    pass"]))
    save("cannot_be_interrupted", _with_cells(student, [
        "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"]))
    save("loops_in_a_test", catalogue.fill(student, {**reference_code, "causal_mask": "def causal_mask(n):\n"
                                                     "    while True:\n        pass"}))
    save("slower_than_the_submission_limit", _with_cells(reference, ["import time\ntime.sleep(25)"] * 5,
                                                         after="test_softmax"))
    # Memory, processes, output.
    save("memory_hog", _with_cells(student, [
        "blocks = []\nfor i in range(40):\n    blocks.append(b'x' * (128 * 1024 * 1024))\nprint('allocated it all')"]))
    save("process_flood", _with_cells(reference, [
        "import subprocess\nstarted = 0\ntry:\n    for _ in range(400):\n"
        f"        subprocess.Popen(['sleep', '{SLEEP_MARKER}'], start_new_session=True)\n        started += 1\n"
        "except OSError as error:\n    print('refused after', started, error)"], after="test_module_device"))
    save("output_flood", _with_cells(student, [
        "import sys\nfor i in range(3000):\n    print('x' * 100000)\n    sys.stderr.write('y' * 1000)"]))
    # Reaching out: files of the course, of the grader and of other students; the network.
    targets = [str(paths.SOLUTIONS / ASSIGNMENT / source.name), str(REPO / "autograder" / "grade.py"),
               *map(str, others), "/etc/shadow", str(Path.home() / ".bash_history"), str(Path.home() / ".profile")]
    save("reaches_outside", _with_cells(student, [f"""
import glob, os, socket
leaks = []
for path in {targets!r} + glob.glob("/tmp/autograde-*/**/*.ipynb", recursive=True) + glob.glob("/work/**/*.db", recursive=True):
    try:
        with open(path, "rb") as handle:
            handle.read(10)
        leaks.append("read " + path)
    except OSError:
        pass
with open("/tmp/" + {MARKER!r}, "w") as handle:  # the sandbox's own /tmp: allowed, stays inside
    handle.write("scratch")
for path in {[str(REPO / MARKER), str(paths.SOLUTIONS / MARKER), str(others[0].parent / MARKER)]!r}:
    try:
        with open(path, "w") as handle:
            handle.write("pwned")
        leaks.append("wrote " + path)
    except OSError:
        pass
for address in [("127.0.0.1", {port}), ("::1", {port})]:
    try:
        socket.create_connection(address, timeout=3)
        leaks.append("connected to " + str(address))
    except OSError:
        pass
try:
    client = socket.socket(socket.AF_UNIX)
    client.connect({str(unix_socket)!r})
    leaks.append("connected to the unix socket")
except OSError:
    pass
print("LEAKS:", leaks)
"""]))
    return batch


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile-resources")
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    unix_path = folder / "grader.sock"
    unix_server = socket.socket(socket.AF_UNIX)
    unix_server.bind(str(unix_path))
    unix_server.listen()
    unix_server.settimeout(0.5)
    accepted, stop = [], threading.Event()

    def serve(sock):
        while not stop.is_set():
            try:
                accepted.append(sock.accept())
            except OSError:
                continue

    threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in (server, unix_server)]
    for thread in threads:
        thread.start()
    others = [folder / "submissions" / "honest.ipynb", folder / "grading" / "gradebook.db"]
    batch = build(folder / "submissions", server.getsockname()[1], unix_path, others)
    started = time.monotonic()
    try:
        code, lines, log = run_autograder(
            "grade", ASSIGNMENT, *batch.values(), "--out", folder / "grading", "--no-progress", "--jobs", "2",
            "--cell-timeout", "30", "--submission-timeout", "100", "--memory", "1.5", "--processes", "128")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        server.close()
        unix_server.close()
    return {"code": code, "results": by_student(lines), "log": log, "out": folder / "grading",
            "accepted": accepted, "seconds": time.monotonic() - started, "batch": batch}


def test_the_batch_finishes_and_the_honest_submission_keeps_full_marks(graded):
    assert graded["code"] == 0, graded["log"][-3000:]
    assert set(graded["results"]) == set(graded["batch"])
    honest = graded["results"]["honest"]
    assert honest["score"] == honest["max_score"], honest["message"]
    assert graded["results"]["untouched"]["score"] == 0


@pytest.mark.parametrize("student, words", [
    ("loops_in_a_cell", "time limit"),
    ("cannot_be_interrupted", "could not be interrupted"),
    ("slower_than_the_submission_limit", "notebook ran past its time limit"),
    ("memory_hog", "memory limit"),
])
def test_runaway_submissions_are_stopped_and_reported(graded, student, words):
    result = graded["results"][student]
    assert result["status"] == "graded", result["message"]
    assert any(words in problem for problem in result["problems"]), result["message"]
    assert result["score"] < result["max_score"]


def test_a_test_that_never_ends_fails_alone(graded):
    result = graded["results"]["loops_in_a_test"]
    assert result["tests"]["test_causal_mask"][0] == 0
    others = {name: score for name, score in result["tests"].items() if name != "test_causal_mask"}
    assert all(score == top for score, top in others.values()), result["message"]


def test_slow_notebook_keeps_what_ran_in_time(graded):
    result = graded["results"]["slower_than_the_submission_limit"]
    assert result["tests"]["test_softmax"][0] == result["tests"]["test_softmax"][1]


def test_process_flood_is_capped_and_nothing_is_left_running(graded):
    result = graded["results"]["process_flood"]
    assert result["score"] == result["max_score"], result["message"]
    feedback = (graded["out"] / "feedback" / "process_flood.html").read_text()
    isolation = sandbox.probe()
    if isolation.cgroup or isolation.as_root:  # else nothing can limit processes (see sandbox.probe)
        started = int(re.search(r"refused after (\d+)", feedback).group(1))
        assert started < 128
    left = processes_with(SLEEP_MARKER)
    assert not left, f"processes left running after grading: {left}"
    # cgroups of graders that have finished (other batches may be running beside this one)
    stale = []
    for line in open("/proc/self/cgroup").read().splitlines():
        path = line.split(":", 2)[2]
        for controller in ("memory", "pids"):
            folder = f"/sys/fs/cgroup/{controller}{path}"
            if os.path.isdir(folder):
                for name in os.listdir(folder):
                    creator = name.split("-")[1] if name.startswith("autograder-") else ""
                    if creator.isdigit() and not os.path.exists(f"/proc/{creator}"):
                        stale.append(name)
    assert not stale, f"cgroups left behind: {stale}"


def test_output_flood_is_capped(graded):
    result = graded["results"]["output_flood"]
    assert result["status"] == "graded", result["message"]
    feedback = graded["out"] / "feedback" / "output_flood.html"
    assert feedback.stat().st_size < 8 * 1024 * 1024
    assert "dropped" in feedback.read_text()


def test_nothing_outside_the_sandbox_is_reached(graded):
    feedback = (graded["out"] / "feedback" / "reaches_outside.html").read_text()
    assert "LEAKS: []" in feedback, re.findall(r"LEAKS:[^<]*", feedback)
    assert not graded["accepted"], "a submission reached a server on the grader's machine"
    for path in (REPO / MARKER, paths.SOLUTIONS / MARKER, f"/tmp/{MARKER}",
                 graded["out"].parent / "submissions" / MARKER):
        assert not os.path.exists(path), f"{path} was written"
