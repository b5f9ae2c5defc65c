"""The course's grading toolchain, built on nbgrader.

    python -m autograder release                      regenerate every student version
    python -m autograder grade ASSIGNMENT SUBMISSION... [--out DIR] [--jobs N]
    python -m autograder validate NOTEBOOK            which tests pass, before submitting
    python -m autograder report ASSIGNMENT --out DIR  the class report: what to re-teach

`solutions/ASSIGNMENT/*.ipynb` (nbgrader source notebooks) are the single source of
truth: the student versions in `book/` and the gradebook are derived from them.

The package, by role:

    cli.py, grade.py, worker.py   the commands; a batch graded by worker processes
    isolation/    what runs student code: the sandbox, the kernels it starts, the agent
                  inside them, the plain values that cross, the grader's bounded helpers
    judging/      what decides: the notebook assembled from trusted parts, executed cell
                  by cell, each test run here against the student's functions, the
                  catalogues read, known mistakes diagnosed
    records/      what keeps records: submissions read and collected, their times and
                  late penalties, the class gradebook
    reporting/    what faces people: the feedback page and its summary, `validate`, the
                  class report
    release.py    student versions from solutions/
    catalogues/   known right and wrong answers, and the probes that tell them apart
"""
