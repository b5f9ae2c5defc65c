"""Grade a batch of submissions with nbgrader, one private course directory each.

For every submission: copy the prepared course directory (source notebooks and a
gradebook that already knows the assignment), put the notebooks in
submitted/STUDENT/ASSIGNMENT/, run `nbgrader autograde` (which restores the
instructor's test cells and runs the hidden tests) and `nbgrader generate_feedback`,
then read the scores back from that gradebook.

Results go to OUT/:
  results/STUDENT.json   one per submission, written atomically: a re-run skips a
                         student whose submission is unchanged (resume after a stop)
  feedback/STUDENT.html  nbgrader's feedback page
  grades.csv             every recorded result, rewritten at the end of each run
"""

import csv
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook

from autograder import paths
from autograder.course_directory import CourseDirectory, NbgraderError
from autograder.submissions import collect


@dataclass
class Result:
    student: str
    assignment: str
    score: float
    max_score: float
    status: str  # "graded" or "error"
    message: str
    source: str = ""
    digest: str = ""
    tests: dict = field(default_factory=dict)  # test cell -> [score, max_score]
    seconds: float = 0.0

    def line(self):
        return json.dumps(asdict(self), sort_keys=True)


def write_atomically(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


class Grader:
    def __init__(self, assignment, out, solutions=paths.SOLUTIONS, cell_timeout=120,
                 submission_timeout=900):
        self.assignment = assignment
        self.out = Path(out)
        self.solutions = Path(solutions)
        self.expected = [p.name for p in paths.assignment_notebooks(assignment, solutions)]
        self.cell_timeout = cell_timeout
        self.submission_timeout = submission_timeout
        self.scratch = Path(tempfile.mkdtemp(prefix="autograde-"))
        # One nbgrader course directory whose gradebook knows the assignment; each
        # submission is graded in a copy of it.
        self.template = CourseDirectory(self.scratch / "template", cell_timeout)
        self.template.add_source(assignment, self.solutions)
        self.template.generate_assignment(assignment)
        self.max_score = self._max_score(self.template.db_path)

    def _max_score(self, db_path):
        with Gradebook(f"sqlite:///{db_path}") as gradebook:
            return float(gradebook.find_assignment(self.assignment).max_score)

    def close(self):
        shutil.rmtree(self.scratch, ignore_errors=True)

    # -- one submission -------------------------------------------------------------
    def grade_one(self, submission):
        started = time.monotonic()
        result = Result(submission.student, self.assignment, 0.0, self.max_score, "error",
                        submission.error, submission.source, submission.digest())
        if submission.error:
            return result
        work = self.scratch / "students" / submission.student
        try:
            shutil.copytree(self.template.root, work)
            course = CourseDirectory(work, self.cell_timeout)
            folder = work / "submitted" / submission.student / self.assignment
            folder.mkdir(parents=True)
            for name, data in submission.notebooks.items():
                (folder / name).write_bytes(data)
            course.autograde_with_feedback(self.assignment, submission.student, timeout=self.submission_timeout)
            result.score, result.tests = self._scores(course.db_path, submission.student)
            result.status, result.message = "graded", self._summary(result)
            self._keep_feedback(work, submission.student)
        except NbgraderError as error:
            result.message = f"grading failed: {error}"
        except OSError as error:
            result.message = f"grading failed: {error}"
        finally:
            shutil.rmtree(work, ignore_errors=True)
            result.seconds = round(time.monotonic() - started, 2)
        return result

    def _scores(self, db_path, student):
        with Gradebook(f"sqlite:///{db_path}") as gradebook:
            submission = gradebook.find_submission(self.assignment, student)
            tests = {}
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    if grade.max_score > 0:
                        tests[grade.name] = [float(grade.score), float(grade.max_score)]
            return float(submission.score), tests

    def _summary(self, result):
        failed = [name for name, (score, top) in result.tests.items() if score < top]
        if not failed:
            return "all tests passed"
        return "tests that lost points: " + ", ".join(failed)

    def _keep_feedback(self, work, student):
        pages = sorted((work / "feedback" / student / self.assignment).glob("*.html"))
        for page in pages:
            name = f"{student}.html" if len(pages) == 1 else f"{student}-{page.stem}.html"
            target = self.out / "feedback" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, target)

    # -- a batch --------------------------------------------------------------------
    def previous(self, submission):
        """The recorded result of an unchanged submission, if any (resuming a batch)."""
        path = self.out / "results" / f"{submission.student}.json"
        try:
            recorded = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if recorded.get("digest") == submission.digest() and recorded.get("assignment") == self.assignment:
            return Result(**recorded)
        return None

    def record(self, result):
        write_atomically(self.out / "results" / f"{result.student}.json", result.line() + "\n")

    def write_grades(self):
        rows = []
        for path in sorted((self.out / "results").glob("*.json")):
            try:
                rows.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        lines = [["student", "assignment", "score", "max_score", "status", "message"]]
        lines += [[r["student"], r["assignment"], r["score"], r["max_score"], r["status"], r["message"]]
                  for r in rows if r.get("assignment") == self.assignment]
        temporary = self.out / ".grades.csv.tmp"
        with open(temporary, "w", newline="") as handle:
            csv.writer(handle).writerows(lines)
        os.replace(temporary, self.out / "grades.csv")


def grade(assignment, sources, out, jobs=None, force=False, progress=True, emit=print, **options):
    """Grade every submission in `sources`; emit one JSON line each; return the results."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    grader = Grader(assignment, out, **options)
    try:
        submissions = collect(sources, assignment, grader.expected)
        results, pending = [], []
        for submission in submissions:
            earlier = None if force or submission.duplicate else grader.previous(submission)
            if earlier is not None:
                results.append(earlier)
                emit(earlier.line())
            else:
                pending.append(submission)
        jobs = max(1, jobs or os.cpu_count() or 1)
        bar = _progress(len(pending), progress)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(grader.grade_one, s): s for s in pending}
            for future in as_completed(futures):
                result = future.result()
                if not futures[future].duplicate:
                    grader.record(result)
                results.append(result)
                emit(result.line())
                bar.update(1)
        bar.close()
        grader.write_grades()
        return results
    finally:
        grader.close()


def _progress(total, enabled):
    from tqdm import tqdm

    return tqdm(total=total, desc="grading", unit="submission", disable=not enabled or total == 0,
                file=__import__("sys").stderr)
