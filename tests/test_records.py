"""Grading records stay whole under hostile names and files.

* student ids are one-to-one: two different names never share an id, and two
  submissions of one batch that resolve to one id are both refused, neither recorded
  over the other (nor over a grade recorded earlier);
* grades.csv is safe to open in a spreadsheet: no cell runs as a formula;
* a zip bomb costs at most the fixed limits, whatever its headers claim.

* a folder of notebooks (a learning management system's download) is a class, one
  student per file; what is no student's submission is refused: reported, never
  recorded, and the exit status is 1;
* `forget` removes one student's recorded grade, and nothing of anyone else's.

All but the end-to-end tests read files only (no kernel); those grade small batches.
"""

import csv
import json
import shutil
import time
import tracemalloc
import unicodedata
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from nbgrader.api import Gradebook

from autograder import paths
from autograder.grade import Grader, Result, write_grades_csv
from autograder.records.submissions import (CHUNK_BYTES, MAX_NOTEBOOK_BYTES, MAX_UNZIPPED_BYTES, MAX_ZIP_MEMBERS, SAFE_ID,
                                    collect, student_id)
from conftest import run_autograder

NOTEBOOK = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
MiB = 2**20


# -- student ids ----------------------------------------------------------------------
def test_safe_names_are_their_own_ids():
    for name in ("alice", "a_b", "a-b", "Bob.Smith-2", "s1234567", "_x", "x" * 64):
        assert student_id(name) == name


def test_different_names_never_share_an_id():
    names = ["a b", "a_b", "a  b", "a/b", "a\\b", "a:b", "a-b", "a.b", "a b ",
             "José", "Jose", unicodedata.normalize("NFD", "José"), "日本語", "日本人", "",  " ",
             "x" * 64, "x" * 65, "x" * 64 + "y", "x" * 200, "x" * 199 + "y", "y" + "x" * 199,
             "../../etc", "etc", ".hidden", "hidden", "-rf", "rf", "=1+1", "+1", "@SUM(A1)",
             "bob-202401011230", "a\udcff", "a\udcfe", "a\ud800", "Bob Smith (late)", "Bob Smith [late]"]
    ids = [student_id(name) for name in names]
    assert len(set(ids)) == len(names), sorted(ids)
    for made in ids:
        assert SAFE_ID.fullmatch(made), made
        assert len(made) <= 64 and not made.startswith((".", "-", "=", "+", "@"))


def test_a_name_made_to_look_like_another_students_id_does_not_take_it():
    taken = student_id("a b")  # a_b-<hash>
    assert taken != "a_b" and taken.startswith("a_b-")
    assert student_id(taken) != taken


def test_two_submissions_resolving_to_one_id_are_both_refused(tmp_path):
    for folder in ("one", "two", "three/alice/hw", "four/alice/hw"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "one" / "alice.ipynb").write_bytes(NOTEBOOK)
    with zipfile.ZipFile(tmp_path / "two" / "alice.zip", "w") as archive:
        archive.writestr("hw.ipynb", NOTEBOOK)
    (tmp_path / "three/alice/hw/hw.ipynb").write_bytes(NOTEBOOK)
    (tmp_path / "four/alice/hw/hw.ipynb").write_bytes(NOTEBOOK)
    (tmp_path / "a b.ipynb").write_bytes(NOTEBOOK)
    (tmp_path / "a_b.ipynb").write_bytes(NOTEBOOK)
    given = [tmp_path / "one" / "alice.ipynb", tmp_path / "two" / "alice.zip", tmp_path / "three",
             tmp_path / "four" / "alice", tmp_path / "a b.ipynb", tmp_path / "a_b.ipynb"]
    *alices, spaced, underscored = collect(given, "hw", ["hw.ipynb"])
    assert len(alices) == 4
    for alice in alices:
        assert alice.student == "alice" and alice.duplicate and not alice.notebooks
        assert "4 submissions resolve to student 'alice'" in alice.error
        for source in (given[0], given[1], tmp_path / "three" / "alice", given[3]):
            assert str(source) in alice.error
    assert not spaced.error and not underscored.error, "names the old ids merged are two students"
    assert spaced.student != underscored.student == "a_b"


# -- grades.csv -----------------------------------------------------------------------
def _result(student, message, score=0.0, **fields):
    return {**Result(student, "hw", score, 24.0, "error", message).__dict__, **fields}


def test_grades_csv_runs_no_formula(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    hostile = {"m_equals": "=HYPERLINK(\"http://x\",\"y\")", "m_plus": "+1+1", "m_minus": "-2+3",
               "m_at": "@SUM(A1:A2)", "m_tab": "\t=1", "m_return": "\r=1", "m_fine": "all tests passed"}
    for student, message in hostile.items():
        (results / f"{student}.json").write_text(json.dumps(_result(student, message)))
    (results / "negative.json").write_text(json.dumps(_result("negative", "ok", score=-1.5)))
    (results / "forged.json").write_text(json.dumps(_result("=cmd|' /C calc'!A0", "ok", score="-1+1")))
    (results / "other.json").write_text(json.dumps(_result("other", "=1", assignment="other")))
    write_grades_csv(results, "hw", tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="") as handle:
        header, *rows = list(csv.reader(handle))
    assert header == ["student", "assignment", "score", "max_score", "late_penalty", "submitted", "late", "status",
                      "message"]
    by_student = {row[0]: row for row in rows}
    for student, message in hostile.items():
        expected = message if student == "m_fine" else "'" + message
        assert by_student[student][header.index("message")] == expected
    assert by_student["negative"][2] == "-1.5", "a number we wrote stays a number"
    assert by_student["'=cmd|' /C calc'!A0"][2] == "'-1+1", "text in a number's place is text"
    assert "other" not in by_student, "rows of other assignments are left out"
    assert not list(tmp_path.glob(".*.tmp"))


def test_grader_writes_grades_csv_through_the_same_escaping(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text(json.dumps(_result("x", "-oops")))
    Grader.write_grades(SimpleNamespace(out=tmp_path, assignment="hw"))
    assert "'-oops" in (tmp_path / "grades.csv").read_text()


# -- zip bombs ------------------------------------------------------------------------
def _write_member(archive, name, size, byte=b"\0"):
    """A member of `size` bytes, compressed as it is written (the payload is never whole in memory)."""
    with archive.open(name, "w") as handle:
        for start in range(0, size, CHUNK_BYTES):
            handle.write(byte * min(CHUNK_BYTES, size - start))


def _headers(data):
    """Offsets of each member's two headers in a zip's bytes: (central directory entry, local header)."""
    at = int.from_bytes(data[data.rindex(b"PK\x05\x06") + 16:][:4], "little")
    while data[at:at + 4] == b"PK\x01\x02":
        yield at, int.from_bytes(data[at + 42:at + 46], "little")
        at += 46 + sum(int.from_bytes(data[at + k:at + k + 2], "little") for k in (28, 30, 32))


def _patch(path, central, local, value):
    """Write `value` at these offsets of every member's two headers (what a forger does)."""
    data = bytearray(path.read_bytes())
    for entry, header in list(_headers(data)):
        data[entry + central:entry + central + len(value)] = value
        data[header + local:header + local + len(value)] = value
    path.write_bytes(data)


def _claim_sizes(path, claimed):
    """Make every header of the zip claim that each member inflates to `claimed` bytes."""
    _patch(path, 24, 22, claimed.to_bytes(4, "little"))


def _collect_measured(path):
    """(the one submission, peak bytes allocated, seconds) of collecting one zip."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        (submission,) = collect([path], "hw", ["hw.ipynb"])
        return submission, tracemalloc.get_traced_memory()[1], time.monotonic() - started
    finally:
        tracemalloc.stop()


def test_a_member_that_inflates_past_what_its_header_claims_is_refused(tmp_path):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        _write_member(archive, "hw.ipynb", 200 * MiB)
    _claim_sizes(path, 1000)
    assert zipfile.ZipFile(path).getinfo("hw.ipynb").file_size == 1000
    submission, peak, seconds = _collect_measured(path)
    assert submission.error and not submission.notebooks
    assert peak < 4 * CHUNK_BYTES and seconds < 20, (peak, seconds)


def test_a_member_past_the_notebook_limit_is_refused_on_what_comes_out(tmp_path):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        _write_member(archive, "hw.ipynb", 200 * MiB)
    submission, peak, seconds = _collect_measured(path)
    assert "hw.ipynb unzips to more than 20 MiB" in submission.error and not submission.notebooks
    assert peak < 2 * MAX_NOTEBOOK_BYTES + 4 * CHUNK_BYTES and seconds < 20, (peak, seconds)


def test_members_that_add_up_past_the_total_limit_are_refused(tmp_path):
    path = tmp_path / "many.zip"
    member = MAX_NOTEBOOK_BYTES - MiB
    count = MAX_UNZIPPED_BYTES // member + 1
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for k in range(count):
            _write_member(archive, f"copy{k}/hw.ipynb", member, b" ")
    submission, peak, seconds = _collect_measured(path)
    assert "unzips to more than 100 MiB" in submission.error
    assert not submission.notebooks
    assert peak < MAX_UNZIPPED_BYTES + 2 * MAX_NOTEBOOK_BYTES + 4 * CHUNK_BYTES and seconds < 30, (peak, seconds)


def test_a_zip_of_too_many_members_is_refused(tmp_path):
    path = tmp_path / "crowded.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for k in range(MAX_ZIP_MEMBERS + 1):
            archive.writestr(f"{k}.txt", b"")
    (submission,) = collect([path], "hw", ["hw.ipynb"])
    assert f"holds more than {MAX_ZIP_MEMBERS} files" in submission.error


def test_members_that_cannot_be_read_within_bounds_are_errors_not_crashes(tmp_path):
    with zipfile.ZipFile(tmp_path / "bzip2.zip", "w", zipfile.ZIP_BZIP2) as archive:
        archive.writestr("hw.ipynb", NOTEBOOK)
    with zipfile.ZipFile(tmp_path / "encrypted.zip", "w") as archive:
        archive.writestr("hw.ipynb", NOTEBOOK)
    _patch(tmp_path / "encrypted.zip", 8, 6, b"\x01\x00")  # the flag "encrypted", which zipfile never writes
    with zipfile.ZipFile(tmp_path / "corrupt.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("hw.ipynb", NOTEBOOK * 100)
    data = bytearray((tmp_path / "corrupt.zip").read_bytes())
    data[40:60] = b"\xff" * 20  # inside the deflated stream
    (tmp_path / "corrupt.zip").write_bytes(data)
    errors = {s.student: s.error for s in collect(
        [tmp_path / "bzip2.zip", tmp_path / "encrypted.zip", tmp_path / "corrupt.zip"], "hw", ["hw.ipynb"])}
    assert "compressed with method 12" in errors["bzip2"]
    assert "is encrypted" in errors["encrypted"]
    assert "not a readable zip file" in errors["corrupt"]


# -- end to end -----------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("bwrap") is None,
                    reason="bubblewrap (Debian package bubblewrap) is not installed: no sandbox")
def test_a_colliding_pair_is_refused_and_leaves_the_earlier_grade_alone(tmp_path):
    assignment = "self_attention"
    (source,) = paths.assignment_notebooks(assignment)
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
    shutil.copyfile(source, tmp_path / "one" / "alice.ipynb")
    with zipfile.ZipFile(tmp_path / "two" / "alice.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(source, source.name)
    shutil.copyfile(source, tmp_path / "bob.ipynb")
    out = tmp_path / "grading"
    earlier = Result("alice", assignment, 7.0, 24.0, "graded", "graded last week").line() + "\n"
    (out / "results").mkdir(parents=True)
    (out / "results" / "alice.json").write_text(earlier)
    (out / "feedback").mkdir()
    (out / "feedback" / "alice.html").write_text("last week's feedback")

    given = [tmp_path / "one" / "alice.ipynb", tmp_path / "two" / "alice.zip", tmp_path / "bob.ipynb"]
    code, lines, log = run_autograder("grade", assignment, *given, "--out", out, "--no-progress", "--jobs", "1")
    assert code == 1, log[-3000:]  # refused inputs: the exit status says so
    alices = [line for line in lines if line["student"] == "alice"]
    (bob,) = [line for line in lines if line["student"] == "bob"]
    assert len(alices) == 2 and len(lines) == 3
    for alice in alices:
        assert alice["status"] == "refused" and "2 submissions resolve to student 'alice'" in alice["message"]
        assert str(given[0]) in alice["message"] and str(given[1]) in alice["message"]
    assert bob["status"] == "graded" and bob["score"] == bob["max_score"] == 24, bob["message"]

    assert (out / "results" / "alice.json").read_text() == earlier
    assert (out / "feedback" / "alice.html").read_text() == "last week's feedback"
    with open(out / "grades.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert rows["alice"]["message"] == "graded last week" and rows["bob"]["status"] == "graded"
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}", course_id="attention-course") as gradebook:
        assert [s.id for s in gradebook.students] == ["bob"]


# -- a folder of notebooks, refusals, and forgetting a student ---------------------------
LMS_ASSIGNMENT = "soft_lookup"


def recorded_students(out):
    """Who grades.csv, results/ and the class gradebook record."""
    with open(out / "grades.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}", course_id="attention-course") as gradebook:
        students = {s.id for s in gradebook.students}
        scores = {s.student.id: float(s.score) for s in gradebook.assignment_submissions(LMS_ASSIGNMENT)}
    return {"csv": rows, "results": {p.stem for p in (out / "results").glob("*.json")},
            "gradebook": students, "scores": scores}


@pytest.fixture(scope="module")
def lms_class(tmp_path_factory):
    """An LMS download graded as it is: a folder of two notebooks and a stray file, and
    beside it a folder with nothing to grade."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed: no sandbox")
    root = tmp_path_factory.mktemp("lms")
    (source,) = paths.assignment_notebooks(LMS_ASSIGNMENT)
    folder = root / "submissions"
    folder.mkdir()
    shutil.copyfile(source, folder / "alice.ipynb")
    shutil.copyfile(paths.student_version_folder(LMS_ASSIGNMENT) / source.name, folder / "bob.ipynb")
    (folder / "index.html").write_text("the LMS's list of files")
    (root / "empty").mkdir()
    out = root / "grading"
    code, lines, log = run_autograder("grade", LMS_ASSIGNMENT, folder, root / "empty", "--out", out,
                                      "--no-progress", "--jobs", "1")
    return {"root": root, "out": out, "code": code, "lines": lines, "log": log}


def test_a_folder_of_notebooks_is_graded_one_student_per_file(lms_class):
    lines = lms_class["lines"]
    graded = {line["student"]: line for line in lines if line["status"] == "graded"}
    assert set(graded) == {"alice", "bob"}, lms_class["log"][-3000:]
    assert graded["alice"]["score"] == graded["alice"]["max_score"] > 0, graded["alice"]["message"]
    assert graded["bob"]["score"] == 0
    recorded = recorded_students(lms_class["out"])
    assert set(recorded["csv"]) == recorded["results"] == recorded["gradebook"] == {"alice", "bob"}


def test_refused_inputs_exit_non_zero_and_record_nothing(lms_class):
    assert lms_class["code"] == 1, lms_class["log"][-3000:]
    refused = [line for line in lms_class["lines"] if line["status"] == "refused"]
    assert len(refused) == 2 and all(line["student"] == "" for line in refused), refused
    messages = " ".join(line["message"] for line in refused)
    assert "index.html is neither a notebook" in messages and "empty holds no notebook" in messages
    assert "2 input(s) refused" in lms_class["log"]
    recorded = recorded_students(lms_class["out"])
    for phantom in ("", "submissions", "empty", "index"):
        assert phantom not in recorded["csv"] and phantom not in recorded["gradebook"], phantom
        assert phantom not in recorded["results"], phantom


def test_forgetting_a_student_removes_their_grade_and_nothing_else(lms_class, tmp_path):
    out = tmp_path / "grading"
    shutil.copytree(lms_class["out"], out)
    alice_before = (out / "results" / "alice.json").read_text()
    # A phantom that an older grader recorded for a folder: an error result and a student.
    phantom = Result("submissions", LMS_ASSIGNMENT, 0.0, 22.0, "error", "holds neither soft_lookup/ nor ...")
    (out / "results" / "submissions.json").write_text(phantom.line() + "\n")
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}", course_id="attention-course") as gradebook:
        gradebook.add_student("submissions")
    Grader.write_grades(SimpleNamespace(out=out, assignment=LMS_ASSIGNMENT))
    assert "submissions" in recorded_students(out)["csv"]

    code, lines, log = run_autograder("forget", LMS_ASSIGNMENT, "submissions", "bob", "--out", out)
    assert code == 0, log
    assert [line["student"] for line in lines] == ["submissions", "bob"]
    assert "results/bob.json" in lines[1]["forgotten"] and "feedback/bob.html" in lines[1]["forgotten"]
    assert any("bob's submission" in what for what in lines[1]["forgotten"]), lines[1]
    assert "forgot bob's grade of soft_lookup" in log, "said on stderr, where the grader speaks"
    recorded = recorded_students(out)
    assert set(recorded["csv"]) == recorded["results"] == recorded["gradebook"] == {"alice"}
    assert recorded["scores"] == {"alice": 22.0}
    assert (out / "results" / "alice.json").read_text() == alice_before
    assert (out / "feedback" / "alice.html").is_file() and not (out / "feedback" / "bob.html").exists()
    kept = Path(lines[1]["kept_in"])
    assert json.loads((kept / "bob.json").read_text())["student"] == "bob", "kept, to read again"


def test_forgetting_what_is_not_recorded_fails_and_changes_nothing(lms_class, tmp_path):
    out = tmp_path / "grading"
    shutil.copytree(lms_class["out"], out)
    before = recorded_students(out)
    code, lines, log = run_autograder("forget", LMS_ASSIGNMENT, "carol", "--out", out)
    assert code == 1 and lines[0]["forgotten"] == [] and "no record of carol" in log, log
    for name in ("../grading/results/alice", "a b", ".."):
        code, lines, log = run_autograder("forget", LMS_ASSIGNMENT, "bob", name, "--out", out)
        assert code == 2 and not lines and "not a student id" in log, log
    assert recorded_students(out) == before
    assert not (out / "forgotten").exists()


# -- a submission that cannot be graded is recorded all the same -------------------------
def test_a_submission_that_cannot_be_graded_has_its_0_and_why_in_the_gradebook(tmp_path):
    """A notebook refused for its size, an unreadable one, one without the assignment's
    answers: each is a student's submission, recorded as a grade of 0 with its message in
    the gradebook (every answer cell's automatic comment) as in grades.csv, so that
    nbgrader's export lists the student with a submission (no kernel runs)."""
    from nbgrader.plugins.export import CsvExportPlugin

    folder = tmp_path / "submissions"
    folder.mkdir()
    (source,) = paths.assignment_notebooks(LMS_ASSIGNMENT)
    text = source.read_text()
    (folder / "carol.ipynb").write_text(text[:-2] + ', "padding": "' + "x" * MAX_NOTEBOOK_BYTES + '"}\n')
    (folder / "dave.ipynb").write_bytes(b"{not json")
    (folder / "erin.ipynb").write_bytes(NOTEBOOK)
    out = tmp_path / "grading"
    out.mkdir()
    grader = Grader(LMS_ASSIGNMENT, out)
    try:
        grader.settle_lateness()
        results = {}
        for submission in collect([folder], LMS_ASSIGNMENT, grader.expected):
            if not submission.error:
                grader.check(submission)
            results[submission.student] = grader.finish(submission, None, 0.0)
        grader.write_grades()
        max_score = grader.max_score
    finally:
        grader.close()
    why = {"carol": f"larger than {MAX_NOTEBOOK_BYTES // MiB} MiB", "dave": "invalid JSON",
           "erin": "none of the assignment's answer cells"}
    recorded = recorded_students(out)
    assert set(recorded["csv"]) == recorded["results"] == recorded["gradebook"] == set(why)
    assert recorded["scores"] == {student: 0.0 for student in why}
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}", course_id="attention-course") as gradebook:
        for student, words in why.items():
            assert results[student].status == "error" and words in results[student].message
            assert words in recorded["csv"][student]["message"]
            submission = gradebook.find_submission(LMS_ASSIGNMENT, student)
            assert float(submission.max_score) == max_score > 0
            grades = [grade for notebook in submission.notebooks for grade in notebook.grades]
            assert grades and all(g.auto_score == 0 and not g.needs_manual_grade for g in grades)
            comments = [c.auto_comment for notebook in submission.notebooks for c in notebook.comments]
            assert comments and all(c.startswith("Not graded: ") and words in c for c in comments), comments
        exported = tmp_path / "export.csv"
        CsvExportPlugin(to=str(exported)).export(gradebook)
    with open(exported, newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert set(rows) == set(why) and all(float(rows[s]["score"]) == 0 and rows[s]["max_score"] for s in why)
