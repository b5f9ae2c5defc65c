"""Reading submissions: student ids from paths, layouts, and refusals (no kernel runs here)."""

import json
import zipfile
from pathlib import Path

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
    assert "does not exist" in messages[""], "a path that does not exist names no student"


# -- a folder of notebooks (what a learning management system's download gives) -------
def by_source(submissions):
    return {Path(s.source).name: s for s in submissions}


def test_a_folder_of_notebooks_is_one_submission_per_file(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    for name in ("alice.ipynb", "Bob Smith.ipynb"):
        (folder / name).write_bytes(NOTEBOOK)
    with zipfile.ZipFile(folder / "carol.zip", "w") as archive:
        archive.writestr("hw.ipynb", NOTEBOOK)
    submissions = collect([folder], "hw", ["hw.ipynb"])
    assert [s.student for s in submissions] == [student_id("Bob Smith"), "alice", "carol"]
    assert student_id("Bob Smith").startswith("Bob_Smith-"), "a name that is no id gets a hashed one"
    assert not any(s.error or s.refused for s in submissions)
    assert all(list(s.notebooks) == ["hw.ipynb"] for s in submissions)
    assert "submissions" not in {s.student for s in submissions}


def test_a_folder_named_like_the_assignment_can_hold_the_class(tmp_path):
    folder = tmp_path / "hw"
    folder.mkdir()
    for name in ("alice.ipynb", "bob.ipynb"):
        (folder / name).write_bytes(NOTEBOOK)
    assert [s.student for s in collect([folder], "hw", ["hw.ipynb"])] == ["alice", "bob"]
    (tmp_path / "dee" / "hw").mkdir(parents=True)  # nbgrader's STUDENT/ASSIGNMENT/ still reads as one
    (tmp_path / "dee" / "hw" / "hw.ipynb").write_bytes(NOTEBOOK)
    (submission,) = collect([tmp_path / "dee" / "hw"], "hw", ["hw.ipynb"])
    assert submission.student == "dee" and not submission.error


def test_what_a_folder_holds_besides_submissions_is_refused_or_passed_over(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "alice.ipynb").write_bytes(NOTEBOOK)
    (folder / "alice.zip").write_bytes(b"")  # a second submission for alice
    (folder / "bob.ipynb").write_bytes(NOTEBOOK)
    (folder / "index.html").write_text("the LMS's list")
    (folder / ".DS_Store").write_bytes(b"\0")  # hidden: passed over
    (folder / "__MACOSX").mkdir()
    (folder / "erin" / "other_hw").mkdir(parents=True)  # a student's other assignment: passed over
    (folder / "Frank Moodle_12_file_").mkdir()
    (folder / "Frank Moodle_12_file_" / "hw.ipynb").write_bytes(NOTEBOOK)
    found = by_source(collect([folder], "hw", ["hw.ipynb"]))
    assert set(found) == {"alice.ipynb", "alice.zip", "bob.ipynb", "index.html", "Frank Moodle_12_file_"}
    assert not found["bob.ipynb"].refused and found["bob.ipynb"].student == "bob"
    for name in ("alice.ipynb", "alice.zip"):
        assert found[name].refused and "2 submissions resolve to student 'alice'" in found[name].error
    assert found["index.html"].refused and found["index.html"].student == ""
    assert "neither a notebook (.ipynb) nor a zip" in found["index.html"].error
    assert found["Frank Moodle_12_file_"].refused and "no hw/ folder" in found["Frank Moodle_12_file_"].error


def test_a_folder_with_nothing_to_grade_is_refused_and_names_no_student(tmp_path):
    (tmp_path / "submissions").mkdir()
    (tmp_path / "submissions" / "notes.txt").write_text("")
    notes, nothing = collect([tmp_path / "submissions"], "hw", ["hw.ipynb"])
    assert notes.refused and nothing.refused and nothing.student == notes.student == ""
    assert "nothing to grade" in nothing.error


def test_a_given_file_that_is_no_notebook_is_refused(tmp_path):
    (tmp_path / "README.txt").write_text("hello")
    (refused,) = collect([tmp_path / "README.txt"], "hw", ["hw.ipynb"])
    assert refused.refused and refused.student == "" and "nor a zip" in refused.error
