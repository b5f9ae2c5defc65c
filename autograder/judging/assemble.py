"""Assemble the notebook that is graded: the instructor's notebook, the student's answers.

A student's notebook is trusted for one thing only: the answers. Everything else comes
from the instructor's source notebook in solutions/:

* every cell with nbgrader metadata that is not a solution cell (instructions, setup,
  helpers, visible and hidden tests) is the instructor's, in the instructor's order,
  with the instructor's source, points and metadata, whatever the student's copy says
  (edited, emptied, duplicated, moved, deleted, or relabelled as a solution cell);
* each solution cell takes its source from the student's cell with the same grade_id
  and the solution flag (the first one); a missing answer is an empty cell;
* cells the student added (scratch work, helpers) keep their place: after the
  instructor cell that precedes them in the student's notebook. They carry no nbgrader
  metadata: a cell that claims to be a test, or claims points, is ordinary code here.

`assemble()` returns the notebook and notes for the student ("test_softmax was edited:
the instructor's version was graded").

A Spanish student version (`"lang": "es"` in its metadata; autograder/translation.py)
is graded like the English one: the same cells, code and tests. Its instructor Markdown
cells are the catalog's translation of the source's (not an edit), and the graded
notebook, hence the feedback page, shows that translation. These cells lose their
grade_id there, since nbgrader would otherwise put back the English text it knows by
that id; they carry no points either way.
"""

import copy

import nbformat

from autograder import translation


def _meta(cell):
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


def _grade_id(cell):
    grade_id = _meta(cell).get("grade_id")
    return grade_id if isinstance(grade_id, str) else None


def _normal(source):
    return "\n".join(line.rstrip() for line in str(source).strip().splitlines())


SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def solution_code(source):
    """A solution cell's reference code, without nbgrader's solution markers."""
    return "\n".join(line for line in str(source).splitlines() if line.strip() not in SOLUTION_MARKERS)


def released_source(source, begin="BEGIN HIDDEN TESTS", end="END HIDDEN TESTS", note=None):
    """`source` as students get it: without its hidden blocks, each replaced by `note`
    (indented like the line that opened it) when one is given. Lines are matched as
    nbgrader's ClearHiddenTests matches them (the delimiter anywhere in the line); a
    block never closed hides the rest of the cell."""
    kept, hidden = [], False
    for line in str(source).splitlines():
        if hidden:
            hidden = end not in line
        elif begin in line:
            hidden = True
            if note is not None:
                kept.append(line[:len(line) - len(line.lstrip())] + note)
        else:
            kept.append(line)
    return "\n".join(kept)


def _plain_copy(cell):
    """A cell the student wrote, without nbgrader metadata or outputs."""
    kind = cell.get("cell_type")
    source = str(cell.get("source", ""))
    if kind == "code":
        return nbformat.v4.new_code_cell(source)
    if kind == "markdown":
        new = nbformat.v4.new_markdown_cell(source)
        if isinstance(cell.get("attachments"), dict):
            new["attachments"] = cell["attachments"]
        return new
    return nbformat.v4.new_raw_cell(source)


def _translations(student_notebook):
    """{English message: translation} for a notebook in the catalogs' language, else {}."""
    if translation.language_of(student_notebook) != translation.LANGUAGE:
        return {}
    try:
        return translation.all_translations()
    except Exception:  # catalogs that cannot be read: the English text, graded the same
        return {}


def assemble(source_notebook, student_notebook):
    """(graded notebook, notes): the instructor's cells around the student's answers."""
    notes = []
    instructor = source_notebook.cells
    table = _translations(student_notebook)
    translated = {}  # grade_id -> the student's language's text of an instructor Markdown cell
    for cell in instructor:
        if table and cell.cell_type == "markdown" and _grade_id(cell) and not _meta(cell).get("solution"):
            text = translation.translate_source(str(cell.source), table)
            if text != str(cell.source):
                translated[_grade_id(cell)] = text
    by_id = {_grade_id(c): c for c in instructor if _grade_id(c)}
    solution_ids = {gid for gid, c in by_id.items() if _meta(c).get("solution")}
    fixed_ids = set(by_id) - solution_ids

    answers = {}  # grade_id -> the student's source
    extras = {None: []}  # anchor grade_id -> cells the student added after it
    seen_fixed = {}
    anchor = None
    for cell in student_notebook.cells:
        grade_id = _grade_id(cell)
        meta = _meta(cell)
        if grade_id in solution_ids and meta.get("solution") and grade_id not in answers \
                and cell.get("cell_type") == by_id[grade_id].cell_type:
            answers[grade_id] = str(cell.get("source", ""))
            anchor = grade_id
            continue
        if grade_id in fixed_ids:
            seen_fixed[grade_id] = seen_fixed.get(grade_id, 0) + 1
            original = by_id[grade_id]
            if seen_fixed[grade_id] == 2:
                notes.append(f"cell {grade_id} appears more than once; the instructor's copy was graded once.")
            elif seen_fixed[grade_id] == 1:
                given = _normal(cell.get("source", ""))
                if given not in (_normal(original.source), _normal(released_source(original.source))) and \
                        (grade_id not in translated or given != _normal(translated[grade_id])):
                    notes.append(f"cell {grade_id} was changed; the instructor's version was graded.")
                if meta.get("solution") != _meta(original).get("solution") or \
                        meta.get("points") != _meta(original).get("points") or \
                        meta.get("grade") != _meta(original).get("grade"):
                    notes.append(f"the nbgrader metadata of cell {grade_id} was changed; the instructor's was used.")
                anchor = grade_id
            continue
        if meta:
            if meta.get("grade") or meta.get("points"):
                label = grade_id or "without a grade_id"
                notes.append(f"a cell claims to be graded ({label}); it is not one of the assignment's "
                             "tests and ran as ordinary code.")
            elif grade_id in solution_ids:
                notes.append(f"a second copy of the answer cell {grade_id} ran as ordinary code.")
        extras.setdefault(anchor, []).append(_plain_copy(cell))

    for grade_id in sorted(fixed_ids - set(seen_fixed)):
        if _meta(by_id[grade_id]).get("grade"):
            notes.append(f"test cell {grade_id} was missing; the instructor's copy was restored and graded.")

    cells = list(extras[None])
    for cell in instructor:
        grade_id = _grade_id(cell)
        if grade_id is None:
            continue  # an unlabelled instructor cell is the student's to edit: it came with extras
        new = copy.deepcopy(cell)
        new.pop("id", None)
        if new.cell_type == "code":
            new.outputs = []
            new.execution_count = None
        if grade_id in solution_ids:
            if grade_id not in answers:
                notes.append(f"the answer cell {grade_id} was missing; it was graded as empty.")
            new.source = answers.get(grade_id, "")
        elif grade_id in translated:
            new.source = translated[grade_id]
            new.metadata["nbgrader"] = {"grade": False, "locked": False, "solution": False, "task": False,
                                        "schema_version": _meta(cell).get("schema_version", 3)}
        cells.append(new)
        cells += extras.get(grade_id, [])

    notebook = nbformat.v4.new_notebook(cells=[], metadata=copy.deepcopy(source_notebook.metadata))
    if table:  # the student's language, which the feedback speaks (autograder/reporting/language.py)
        notebook.metadata[translation.METADATA_KEY] = translation.language_of(student_notebook)
    for cell in cells:
        fresh = {"cell_type": cell.cell_type, "metadata": cell.get("metadata", {}), "source": cell.source}
        if cell.cell_type == "code":
            fresh.update(outputs=[], execution_count=None)
        elif cell.get("attachments"):
            fresh["attachments"] = cell["attachments"]
        node = nbformat.from_dict(fresh)
        node["id"] = nbformat.v4.nbbase.random_cell_id()
        notebook.cells.append(node)
    nbformat.validate(notebook)
    return notebook, notes
