"""The course's grading toolchain, built on nbgrader.

    python -m autograder release                      regenerate every student version
    python -m autograder grade ASSIGNMENT SUBMISSION... [--out DIR] [--jobs N]
    python -m autograder validate NOTEBOOK            which tests pass, before submitting
    python -m autograder report ASSIGNMENT --out DIR  the class report: what to re-teach

`solutions/ASSIGNMENT/*.ipynb` (nbgrader source notebooks) are the single source of
truth: the student versions in `book/` and the gradebook are derived from them.
"""
