"""Remove one student's recorded grade of an assignment: `python -m autograder forget`.

    python -m autograder forget ASSIGNMENT STUDENT [STUDENT ...] --out grading/

For each student, in the order in which grading records (so that an interruption
leaves a state that `forget` or `grade` completes, never a half-grade that counts):

1. the class gradebook: the student's submission of ASSIGNMENT (its notebooks, grades
   and comments, and any extension kept on it), in one transaction, and the student
   too when they have no other submission there;
2. OUT/feedback/STUDENT.html (or STUDENT-NOTEBOOK.html, one per notebook);
3. OUT/results/STUDENT.json, when it is a result of ASSIGNMENT;
4. grades.csv, rewritten from the results that remain.

The feedback pages and the result file are moved to OUT/forgotten/TIME-STUDENT/, not
deleted, so that a grade removed by mistake can be read again (and a rerun of `grade`
records it anew). Only files named after this student, and the gradebook rows of this
student, are touched: other students' grades stay as they were. A student id must be
one the grader makes (letters, digits, '.', '_', '-'), so that no name reaches outside
OUT.
"""

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from autograder.records.gradebook import forget_submission
from autograder.records.submissions import SAFE_ID


class ForgetRefused(ValueError):
    """A student id that the grader never records (it could name a path outside OUT)."""


def forget(assignment, student, out, notebooks, db_url=None, write_grades=None):
    """Remove `student`'s recorded grade of `assignment` from `out`; return a report:
    {"student", "assignment", "forgotten": [what was removed], "kept_in": folder or None}.

    `notebooks`: the assignment's notebook file names (for the names of feedback pages);
    `write_grades(results_dir, assignment, csv_path)`: rewrites grades.csv."""
    check_student_id(student)
    out = Path(out)
    forgotten = []
    database = db_url or f"sqlite:///{(out / 'gradebook.db').resolve()}"
    if db_url or (out / "gradebook.db").exists():  # never create a gradebook to forget in
        forgotten += [f"gradebook: {what}" for what in forget_submission(database, assignment, student)]

    pages = [out / "feedback" / f"{student}.html"]
    if len(notebooks) > 1:
        pages = [out / "feedback" / f"{student}-{Path(name).stem}.html" for name in notebooks]
    result = out / "results" / f"{student}.json"
    moved = [page for page in pages if page.is_file()]
    if result.is_file() and _result_of(result) == assignment:
        moved.append(result)
    kept = None
    if moved:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        kept = out / "forgotten" / f"{stamp}-{student}"
        kept.mkdir(parents=True)
        for path in moved:  # the result file last: until it goes, `grade` counts the student as recorded
            os.replace(path, kept / path.name)
            forgotten.append(str(path.relative_to(out)))
    if forgotten and write_grades is not None:
        write_grades(out / "results", assignment, out / "grades.csv")
    return {"student": student, "assignment": assignment, "forgotten": forgotten,
            "kept_in": str(kept) if kept else None}


def check_student_id(student):
    """Refuse a name that the grader never gives a student (it could name a path outside OUT)."""
    if not SAFE_ID.fullmatch(student):
        raise ForgetRefused(f"{student!r} is not a student id the grader records (letters, digits, '.', '_', "
                            "'-', not starting with '.' or '-'; as the JSON lines and grades.csv show it)")


def _result_of(path):
    """The assignment a results/STUDENT.json records, or None if it cannot be read."""
    try:
        return json.loads(path.read_text()).get("assignment")
    except (OSError, ValueError, AttributeError):
        return None
