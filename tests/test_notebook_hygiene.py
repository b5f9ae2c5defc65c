"""Conventions of the committed notebooks and chapter folders (no kernel runs here)."""

import ast
import sys

import nbformat
import pytest
import yaml

from autograder import paths

REPO = paths.REPO_ROOT
LESSONS_AND_SOLUTIONS = sorted(
    p for p in list(paths.BOOK.rglob("*.ipynb")) + list(paths.SOLUTIONS.rglob("*.ipynb"))
    if "assignment" not in p.parent.name and ".ipynb_checkpoints" not in p.parts
    and p.parent.parent.name != "assignment"  # the Spanish student versions, assignment/es/
)
CHAPTERS = sorted(p for p in paths.BOOK.glob("[0-9][0-9]_*") if p.is_dir())
LESSONS = sorted(p for p in paths.BOOK.glob("[0-9][0-9]_*/lesson.ipynb"))
# Characters of code that the book's code column shows without scrolling (77 at the
# browser test's 1280-pixel window; tests/test_book_in_browser.py checks the pages too).
CODE_COLUMN = 76
ALLOWED_IN_ASSIGNMENTS = {"numpy", "torch", "matplotlib"} | set(sys.stdlib_module_names)


def ids(items):
    return [str(p.relative_to(REPO)) for p in items]


@pytest.mark.parametrize("path", LESSONS_AND_SOLUTIONS, ids=ids(LESSONS_AND_SOLUTIONS))
def test_only_checked_cells_keep_outputs(path):
    """Outputs stay out of git, except those nbval compares (cells tagged nbval-check-output)."""
    notebook = nbformat.read(path, as_version=4)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        # A tag, not a "# NBVAL_CHECK_OUTPUT" comment, so that readers of the book never see it.
        checked = "nbval-check-output" in cell.metadata.get("tags", [])
        if checked:
            assert cell.outputs, f"cell {index} is tagged nbval-check-output but has no stored output"
            assert cell.execution_count is not None, f"cell {index}: nbval skips checked cells never run"
        else:
            assert not cell.outputs, f"cell {index} of {path.name} has outputs committed: clear them"


@pytest.mark.parametrize("path", LESSONS, ids=ids(LESSONS))
def test_lesson_code_fits_the_book_column(path):
    """A lesson's code is read on the page: no line is cut off at the column's edge."""
    notebook = nbformat.read(path, as_version=4)
    long_lines = [f"cell {index}: {line!r}" for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"
                  for line in cell.source.splitlines() if len(line) > CODE_COLUMN]
    assert not long_lines, f"{len(long_lines)} lines longer than {CODE_COLUMN} characters:\n" + "\n".join(long_lines)


@pytest.mark.parametrize("path", sorted(paths.SOLUTIONS.rglob("*.ipynb")), ids=ids(sorted(paths.SOLUTIONS.rglob("*.ipynb"))))
def test_assignments_import_only_numpy_torch_matplotlib(path):
    """Students open assignments anywhere (Colab included): nothing beyond the three libraries."""
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in ALLOWED_IN_ASSIGNMENTS, f"{path.name} imports {name}"


def toc_files():
    def walk(entries):
        for entry in entries:
            if "file" in entry:
                yield entry["file"]
            yield from walk(entry.get("sections", []))
            yield from walk(entry.get("chapters", []))

    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    return {toc["root"], *walk(toc.get("parts", []) + toc.get("chapters", []))}


@pytest.mark.parametrize("chapter", CHAPTERS, ids=ids(CHAPTERS))
def test_chapter_has_prose_lesson_and_assignment_in_the_toc(chapter):
    listed = toc_files()
    relative = chapter.relative_to(REPO).as_posix()
    for page in ("index", "lesson", "assignment"):
        assert any((chapter / f"{page}{suffix}").is_file() for suffix in (".md", ".ipynb")), f"{relative} lacks {page}"
        assert f"{relative}/{page}" in listed, f"{relative}/{page} is not in _toc.yml"
    assignment = chapter.name.split("_", 1)[1]
    if (paths.SOLUTIONS / assignment).is_dir():
        page = (chapter / "assignment.md").read_text()
        for notebook in paths.assignment_notebooks(assignment):
            assert f"assignment/{notebook.name}>`" in page, f"{relative}/assignment.md has no download link to {notebook.name}"
