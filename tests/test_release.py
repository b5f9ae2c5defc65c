"""The student versions in book/ are exactly what solutions/ generates, and leak nothing."""

import shutil

import pytest

from autograder import paths
from autograder.release import release

ASSIGNMENTS = paths.assignments()
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def test_every_assignment_has_a_chapter_and_a_student_version():
    assert ASSIGNMENTS, "solutions/ holds no assignment"
    for assignment in ASSIGNMENTS:
        for source in paths.assignment_notebooks(assignment):
            student = paths.student_version_folder(assignment) / source.name
            assert student.is_file(), f"{student} is missing: run `make release`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_student_version_does_not_drift(assignment, tmp_path):
    """Regenerating from solutions/ into a scratch book gives the committed files, byte for byte."""
    chapter = paths.chapter_folder(assignment)
    scratch_book = tmp_path / "book"
    (scratch_book / chapter.name).mkdir(parents=True)
    generated = release(assignment, book=scratch_book, refresh_stored=False)
    committed = sorted(paths.student_version_folder(assignment).rglob("*.ipynb"))
    assert [p.name for p in generated] == [p.name for p in committed]
    for new, old in zip(generated, committed):
        assert new.read_bytes() == old.read_bytes(), (
            f"{old.relative_to(paths.REPO_ROOT)} differs from what solutions/ generates: run `make release`")


def test_nothing_under_book_holds_a_solution():
    for path in paths.BOOK.rglob("*"):
        if path.suffix in (".ipynb", ".md", ".py") and path.is_file():
            text = path.read_text()
            for marker in MARKERS:
                assert marker not in text, f"{path.relative_to(paths.REPO_ROOT)} contains {marker!r}"


def test_release_replaces_stale_files(tmp_path):
    """A notebook removed from solutions/ does not linger in the book after a release."""
    assignment = ASSIGNMENTS[0]
    chapter = paths.chapter_folder(assignment)
    scratch_book = tmp_path / "book"
    stale = scratch_book / chapter.name / "assignment" / "old.ipynb"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    release(assignment, book=scratch_book, refresh_stored=False)
    assert not stale.exists()
    shutil.rmtree(scratch_book)
