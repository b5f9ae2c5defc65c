"""Regenerate the student version of every assignment from solutions/, in English and Spanish.

The visible tests' stored values are brought up to date in solutions/ first. The student
version lands in book/NN_ASSIGNMENT/assignment/ where the book offers it as a download,
and its Spanish twin in book/NN_ASSIGNMENT/assignment/es/: the same notebook, cells, ids,
metadata, code and tests, with the instructor's Markdown cells translated from
locales/es/LC_MESSAGES/solutions/ASSIGNMENT.po (autograder/translation.py). Both are
generated, never edited by hand: tests/test_release.py and tests/test_spanish_release.py
fail when they drift from solutions/ and the catalogs.
"""

import shutil
import tempfile
from pathlib import Path

import nbformat

from autograder import paths, stored_values, translation
from autograder.judging.course_directory import CourseDirectory


def spanish_version_folder(assignment, book=paths.BOOK):
    """Where the Spanish student notebooks of an assignment live: assignment/es/."""
    return paths.student_version_folder(assignment, book) / translation.LANGUAGE


def release(assignment, solutions=paths.SOLUTIONS, book=paths.BOOK, refresh_stored=True, locales=paths.LOCALES):
    """Generate one assignment's student notebooks into the book, English and Spanish;
    return their paths.

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
    english = sorted(Path(target).glob("*.ipynb"))
    table = translation.translations(translation.catalog_path(assignment, locales))
    spanish_folder = spanish_version_folder(assignment, book)
    spanish_folder.mkdir()
    for path in english:
        notebook = nbformat.read(path, as_version=4)
        nbformat.write(translation.translate_notebook(notebook, table), spanish_folder / path.name)
    return sorted(Path(target).rglob("*.ipynb"))


def release_all(solutions=paths.SOLUTIONS, book=paths.BOOK):
    written = []
    for assignment in paths.assignments(solutions):
        written += release(assignment, solutions, book)
    return written
