"""Reading submissions: student ids from paths, layouts, and refusals (no kernel runs here)."""

import json
import zipfile

import nbformat

from autograder.records.submissions import collect, student_id

NOTEBOOK = nbformat.writes(nbformat.v4.new_notebook()).encode()


def test_student_id_is_safe_for_paths():
    assert student_id("alice") == "alice"
    assert student_id("Bob Smith (late)").startswith("Bob_Smith_late-")
    assert student_id("../../etc").startswith("etc-")
    assert "/" not in student_id("a/b")


def test_one_notebook_under_another_name_is_taken(tmp_path):
    (tmp_path / "alice.ipynb").write_bytes(NOTEBOOK)
    (submission,) = collect([tmp_path / "alice.ipynb"], "hw", ["hw.ipynb"])
    assert submission.student == "alice" and not submission.error
    assert list(submission.notebooks) == ["hw.ipynb"]


def test_nbgrader_submitted_folder_expands_to_students(tmp_path):
    for student in ("alice", "bob"):
        folder = tmp_path / "submitted" / student / "hw"
        folder.mkdir(parents=True)
        (folder / "hw.ipynb").write_bytes(NOTEBOOK)
    submissions = collect([tmp_path / "submitted"], "hw", ["hw.ipynb"])
    assert [s.student for s in submissions] == ["alice", "bob"]
    assert not any(s.error for s in submissions)


def test_two_submissions_for_one_student_are_both_refused(tmp_path):
    (tmp_path / "alice.ipynb").write_bytes(NOTEBOOK)
    with zipfile.ZipFile(tmp_path / "alice.zip", "w") as archive:
        archive.writestr("hw.ipynb", NOTEBOOK)
    first, second = collect([tmp_path / "alice.ipynb", tmp_path / "alice.zip"], "hw", ["hw.ipynb"])
    for submission in (first, second):
        assert submission.duplicate and "2 submissions resolve to student 'alice'" in submission.error


def test_refusals_name_the_problem(tmp_path):
    (tmp_path / "binary.ipynb").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    (tmp_path / "list.ipynb").write_text(json.dumps([1, 2, 3]))
    (tmp_path / "fake.zip").write_text("not a zip")
    messages = {s.student: s.error for s in collect(
        [tmp_path / "binary.ipynb", tmp_path / "list.ipynb", tmp_path / "fake.zip", tmp_path / "missing.ipynb"],
        "hw", ["hw.ipynb"])}
    assert "not a text file" in messages["binary"]
    assert "not a notebook" in messages["list"] or "not a valid notebook" in messages["list"]
    assert "not a readable zip" in messages["fake"]
    assert "does not exist" in messages["missing"]
