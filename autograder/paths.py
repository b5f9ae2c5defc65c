"""Where the course keeps its assignments: solutions/ and the book's chapter folders."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO_ROOT / "solutions"
BOOK = REPO_ROOT / "book"
CATALOGUES = Path(__file__).resolve().parent / "catalogues"
LOCALES = REPO_ROOT / "locales"  # gettext catalogs: the book's pages and the notebooks' Markdown


def assignments(solutions=SOLUTIONS):
    """Names of the assignments: the folders of solutions/ that hold a notebook."""
    return sorted(p.parent.name for p in Path(solutions).glob("*/*.ipynb"))


def assignment_notebooks(assignment, solutions=SOLUTIONS):
    """The nbgrader source notebooks of one assignment, by file name."""
    folder = Path(solutions) / assignment
    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        known = ", ".join(assignments(solutions)) or "none"
        raise ValueError(f"unknown assignment {assignment!r} (known: {known})")
    return notebooks


def chapter_folder(assignment, book=BOOK):
    """The book chapter that offers an assignment: book/NN_ASSIGNMENT/."""
    matches = sorted(Path(book).glob(f"[0-9][0-9]_{assignment}"))
    if len(matches) != 1:
        raise ValueError(f"expected one chapter folder book/NN_{assignment}, found {len(matches)}")
    return matches[0]


def student_version_folder(assignment, book=BOOK):
    """Where the generated student notebooks of an assignment live in the book."""
    return chapter_folder(assignment, book) / "assignment"
