"""Regenerate the student version of every assignment from solutions/.

The visible tests' stored values are brought up to date in solutions/ first. The student version lands in book/NN_ASSIGNMENT/assignment/ where the book offers it
as a download. It is generated, never edited by hand: tests/test_release.py fails when
it drifts from solutions/.
"""

import shutil
import tempfile
from pathlib import Path

from autograder import paths, stored_values
from autograder.judging.course_directory import CourseDirectory


def release(assignment, solutions=paths.SOLUTIONS, book=paths.BOOK, refresh_stored=True):
    """Generate one assignment's student notebooks into the book; return their paths.

    First, with refresh_stored, the visible tests' stored values in solutions/ are
    computed anew from the reference solution where they drifted (autograder/stored_values.py)."""
    if refresh_stored:
        for source in paths.assignment_notebooks(assignment, solutions):
            stored_values.refresh_file(source)
    target = paths.student_version_folder(assignment, book)
    with tempfile.TemporaryDirectory(prefix="release-") as scratch:
        course = CourseDirectory(scratch)
        course.add_source(assignment, solutions)
        released = course.generate_assignment(assignment)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(released, target)
    return sorted(Path(target).rglob("*.ipynb"))


def release_all(solutions=paths.SOLUTIONS, book=paths.BOOK):
    written = []
    for assignment in paths.assignments(solutions):
        written += release(assignment, solutions, book)
    return written
