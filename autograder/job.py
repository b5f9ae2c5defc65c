"""One submission's nbgrader work in one process: autograde it, then write its feedback.

    python -m autograder.job COURSE_ROOT ASSIGNMENT STUDENT

Two `nbgrader` commands would start Python and import nbgrader twice (seconds each);
nbgrader's own Python API does both steps in one process. Exit status 0 on success;
otherwise the log of the failed step goes to stderr.
"""

import sys

from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader


def main(root, assignment, student):
    config = PyFileConfigLoader("nbgrader_config.py", path=root).load_config()
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    for step in (api.autograde, api.generate_feedback):
        result = step(assignment, student, force=True)
        if not result["success"]:
            sys.stderr.write(f"{step.__name__} failed\n{result.get('log', '')}\n{result.get('error', '')}\n")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:4]))
