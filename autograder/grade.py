"""Grade a batch of submissions: in parallel, in sandboxes, resumable.

For every submission: assemble the notebook to grade from the instructor's source and
the student's answers (autograder/judging/assemble.py), autograde it with nbgrader in a
throw-away course directory whose gradebook knows the assignment, the notebook
executed by autograder/judging/executor.py (the kernel in a sandbox, each test's outcome from
the guard's signed verdict), and write feedback. Worker processes (autograder/worker.py)
do this, `jobs` at a time; this process hands out submissions, records results and is
the only writer of OUT/.

Results go to OUT/:
  gradebook.db           the class gradebook (nbgrader's), or the database given by db_url
  results/STUDENT.json   one per submission, written last and atomically: a re-run skips
                         a student whose submission is unchanged and whose grade is in
                         the gradebook (resume after a stop)
  feedback/STUDENT.html  nbgrader's feedback page
  grades.csv             every recorded result, rewritten at the end of each run

An input that is no student's submission (autograder/records/submissions.py: a missing
path, a stray file, a folder with nothing to grade, two submissions for one student) is
refused: its JSON line says so (status "refused") and nothing is recorded for it. A
student's submission that cannot be graded (too large, unreadable, without the
assignment's answer cells, or a grading that failed) is recorded with status "error": a
grade of 0 whose message is in grades.csv, its result and the gradebook (the automatic
comment of every answer cell), so that nbgrader's export lists that student too.
`python -m autograder forget` (autograder/records/forget.py) removes a recorded grade.

Late submissions (autograder/records/lateness.py): given a due date (here, or kept in the class
gradebook from an earlier run) and a penalty per day late, a submission whose time
(nbgrader's timestamp.txt) is past the student's due date loses points; its result,
feedback page, gradebook row and grades.csv line say how late it was and how much it
lost. `score` is always what the student gets, the penalty taken off.
"""

import csv
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from autograder.records import lateness
from autograder import paths
from autograder.isolation import sandbox
from autograder.judging import kernel_start
from autograder.judging.course_directory import CourseDirectory
from autograder.records.gradebook import COURSE_ID, ClassGradebook
from autograder.records.submissions import collect, read_notebook


@dataclass
class Result:
    student: str
    assignment: str
    score: float
    max_score: float
    status: str  # "graded", "error" (recorded) or "refused" (no student's submission: never recorded)
    message: str
    source: str = ""
    digest: str = ""
    tests: dict = field(default_factory=dict)  # test cell -> [score, max_score]
    seconds: float = 0.0
    flags: list = field(default_factory=list)  # what the grader noticed: replaced cells, cells that claim to be tests
    problems: list = field(default_factory=list)  # what stopped the notebook: time, memory, a dead kernel
    messages: dict = field(default_factory=dict)  # test cell -> what it said when it failed
    penalty: float = 0.0  # points taken off for lateness (already taken off `score`)
    submitted: str = ""  # when, as nbgrader's exchange recorded it (ISO 8601, UTC), if known
    seconds_late: float = 0.0  # past the student's due date (extension included)
    terms: str = ""  # the due date, extension and penalty rule it was graded under
    diagnoses: dict = field(default_factory=dict)  # function -> id of the catalogued mistake it behaves like
    unknown_mistakes: dict = field(default_factory=dict)  # function -> {"behaviour", "code"}: matched none

    def line(self):
        return json.dumps(asdict(self), sort_keys=True)


def write_atomically(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    if isinstance(data, str):
        data = data.encode()
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _die_with_parent():
    """In a worker, before it starts: be killed if the grader dies (its sandboxes follow)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


class Worker:
    """One `python -m autograder.worker` process, restarted when it dies."""

    def __init__(self, log_path, env=None):
        self.log_path = log_path
        self.env = dict(env or {})  # for the worker, beside this process's environment
        self.process = None

    def start(self):
        """Start the process now (it imports nbgrader while the parent prepares)."""
        if self.process is None or self.process.poll() is not None:
            self._start()

    def _start(self):
        log = open(self.log_path, "ab")
        # One thread for NumPy's and PyTorch's kernels in a worker: the test cells compute on
        # small arrays, and idle OpenMP threads that spin would take the CPU other workers need.
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **self.env}
        self.process = subprocess.Popen([sys.executable, "-m", "autograder.worker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=log, env=env, text=True,
                                        cwd=paths.REPO_ROOT, preexec_fn=_die_with_parent)
        log.close()

    def run(self, task, timeout):
        if self.process is None or self.process.poll() is not None:
            self._start()
        answer = {}

        def read():
            try:
                self.process.stdin.write(json.dumps(task) + "\n")
                self.process.stdin.flush()
                line = self.process.stdout.readline()
                answer["line"] = line
            except (OSError, ValueError) as error:
                answer["error"] = str(error)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive() or not answer.get("line"):
            self.stop()
            why = "did not answer in time" if reader.is_alive() else "stopped"
            return {"student": task["student"], "error": f"the grading worker {why}: {self.log_tail()}"}
        try:
            return json.loads(answer["line"])
        except ValueError:
            self.stop()
            return {"student": task["student"], "error": "the grading worker answered garbage"}

    def log_tail(self):
        try:
            text = Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-5:])[-1500:]

    def stop(self, wait=0.0):
        """Stop the worker: with `wait`, first let it finish on its own (it then removes the
        kernel it started for the next submission), then kill it."""
        if self.process is not None and self.process.poll() is None:
            if wait:
                try:
                    self.process.stdin.close()
                    self.process.wait(timeout=wait)
                except (OSError, ValueError, subprocess.TimeoutExpired):
                    pass
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
        self.process = None


class Grader:
    def __init__(self, assignment, out, solutions=paths.SOLUTIONS, cell_timeout=120, submission_timeout=900,
                 memory=sandbox.Limits.memory, processes=sandbox.Limits.processes, db_url=None, isolate=True,
                 feedback_hidden_tests=False, due=None, late_penalty=0.0, extensions=None):
        self.assignment = assignment
        self.given_due = due  # None: the due date the class gradebook has, if any
        self.percent_per_day = float(late_penalty)
        self.given_extensions = dict(extensions or {})
        self.due, self.extensions = None, {}  # settled by settle_lateness(), from the class gradebook
        self.out = Path(out)
        self.solutions = Path(solutions)
        self.expected = [p.name for p in paths.assignment_notebooks(assignment, solutions)]
        self.isolate = isolate
        self.settings = {"cell_timeout": float(cell_timeout), "submission_timeout": float(submission_timeout),
                         "memory": int(memory), "processes": int(processes), "isolate": bool(isolate)}
        self.feedback_hidden_tests = bool(feedback_hidden_tests)
        self.worker_timeout = submission_timeout + 600
        self.scratch = Path(tempfile.mkdtemp(prefix="autograde-"))
        # One nbgrader course directory whose gradebook knows the assignment; each
        # submission is graded in a copy of it.
        self.template = CourseDirectory(self.scratch / "template", cell_timeout)
        self.template.add_source(assignment, self.solutions)
        self.template.generate_assignment(assignment, in_process=True)
        self.max_score = self._max_score(self.template.db_path)
        self.answer_ids = {}  # notebook -> grade_ids of its answer cells
        for path in paths.assignment_notebooks(assignment, solutions):
            cells = nbformat.read(path, as_version=4).cells
            self.answer_ids[path.name] = {c.metadata["nbgrader"]["grade_id"] for c in cells
                                          if c.metadata.get("nbgrader", {}).get("solution")}
        self.db_url = db_url or f"sqlite:///{(self.out / 'gradebook.db').resolve()}"
        # Opening (or creating) the class gradebook goes on while the first submissions grade.
        self._gradebook, self._gradebook_error = None, None
        self._opening = threading.Thread(target=self._open_gradebook, daemon=True)
        self._opening.start()

    def _open_gradebook(self):
        try:
            self._gradebook = ClassGradebook(self.db_url, self.assignment, f"sqlite:///{self.template.db_path}",
                                             due=self.given_due)
        except Exception as error:  # raised where the gradebook is first needed
            self._gradebook_error = error

    @property
    def gradebook(self):
        self._opening.join()
        if self._gradebook_error is not None:
            raise RuntimeError(f"cannot open the gradebook {self.db_url}: {self._gradebook_error}")
        return self._gradebook

    def _max_score(self, db_path):
        with Gradebook(f"sqlite:///{db_path}", course_id=COURSE_ID) as gradebook:
            return float(gradebook.find_assignment(self.assignment).max_score)

    def close(self):
        self._opening.join()
        if self._gradebook is not None:
            self._gradebook.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def settle_lateness(self):
        """Record the extensions given, then read what lateness is judged by: the due
        date and every student's extension, as the class gradebook now holds them."""
        for student, length in self.given_extensions.items():
            try:
                self.gradebook.grant_extension(student, length)
            except Exception as error:  # the database: stop before anything is graded
                raise RuntimeError(f"cannot record {student}'s extension in the gradebook: {error}") from error
        self.due = self.gradebook.due
        self.extensions = self.gradebook.extensions()

    def due_for(self, student):
        """The student's due date: the assignment's, moved by their extension; or None."""
        if self.due is None:
            return None
        return self.due + self.extensions.get(student, timedelta(0))

    def terms(self, student):
        due = self.due_for(student)
        return f"due {due.isoformat() if due else 'none'}; {self.percent_per_day:g}% per day late"

    # -- one submission -------------------------------------------------------------
    def check(self, submission):
        """Refuse, before any kernel starts, a notebook with none of the assignment's answer cells."""
        for name, data in submission.notebooks.items():
            notebook = read_notebook(data)  # as submissions.check_notebook accepted it
            found = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in notebook.cells
                     if isinstance(c.get("metadata", {}).get("nbgrader"), dict)}
            expected = self.answer_ids.get(name, set())
            if expected and not expected & found:
                label = f"{submission.source}" + (f": {name}" if len(submission.notebooks) > 1 else "")
                submission.error = (f"{label} has none of the assignment's answer cells ({', '.join(sorted(expected))}); "
                                    "is it the notebook of this assignment, saved from the student version?")
                submission.notebooks = {}
                return

    def task(self, submission, slot):
        inputs = self.scratch / "inputs" / submission.student
        inputs.mkdir(parents=True, exist_ok=True)
        notebooks = {}
        for name, data in submission.notebooks.items():
            (inputs / name).write_bytes(data)
            notebooks[name] = str(inputs / name)
        return {"template": str(self.template.root), "work": str(self.scratch / "students" / submission.student),
                "assignment": self.assignment, "student": submission.student, "notebooks": notebooks,
                "settings": {**self.settings, "slot": slot}, "feedback_hidden_tests": self.feedback_hidden_tests,
                "lateness": {"timestamp": submission.submitted_at or None,
                             "due": due.isoformat() if (due := self.due_for(submission.student)) else None,
                             "percent_per_day": self.percent_per_day}}

    def finish(self, submission, answer, seconds):
        """Record a worker's answer: gradebook, then feedback, then the result file."""
        result = Result(submission.student, self.assignment, 0.0, self.max_score, "error", submission.error,
                        submission.source, submission.digest(), seconds=round(seconds, 2),
                        submitted=submission.submitted_at,
                        terms=self.terms(submission.student))
        work = self.scratch / "students" / submission.student
        try:
            if answer is None:
                pass
            elif "error" in answer:
                result.message = f"grading failed: {answer['error']}"
            else:
                result.penalty, result.seconds_late = answer["penalty"], answer["seconds_late"]
                result.score, result.tests = answer["score"] - result.penalty, answer["tests"]
                result.flags = answer["notes"]
                if self.due is not None and submission.timestamp is None:
                    result.flags.append("no time of submission (a notebook or a zip carries none; nbgrader's "
                                        "exchange records one): lateness not judged")
                result.messages = answer.get("messages", {})
                result.diagnoses = answer.get("diagnoses", {})
                result.unknown_mistakes = answer.get("unknown_mistakes", {})
                result.problems = answer["problems"]
                result.status = "graded"
                result.message = self._summary(result)
                if not submission.duplicate:
                    self.gradebook.merge(submission.student, f"sqlite:///{answer['db']}")
                    try:
                        self._keep_feedback(answer["feedback"], submission.student)
                    except OSError as error:  # the grade is recorded: it stands
                        result.flags.append(f"the feedback page could not be kept ({error})")
                        result.message = self._summary(result)
            if not submission.duplicate:
                if result.status == "error":  # a grade of 0 and why, in the gradebook too
                    self.gradebook.record_ungraded(submission.student, result.message, submission.timestamp)
                self.record(result)
        except Exception as error:  # the gradebook or the disk: report, keep going
            result.status, result.message = "error", f"recording the grade failed: {error}"
        finally:
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(self.scratch / "inputs" / submission.student, ignore_errors=True)
        return result

    def _summary(self, result):
        failed = [name for name, (score, top) in result.tests.items() if score < top]
        text = "all tests passed" if not failed else "tests that lost points: " + ", ".join(failed)
        if result.diagnoses:
            text += ". Behaves like: " + ", ".join(f"{f}: {i}" for f, i in sorted(result.diagnoses.items()))
        if result.seconds_late > 0:
            text += ". " + lateness.lateness_message(result.seconds_late, result.penalty, self.percent_per_day)
        if result.problems:
            text += ". " + "; ".join(result.problems)
        if result.flags:
            text += ". Noticed: " + "; ".join(result.flags[:5]) + (" ..." if len(result.flags) > 5 else "")
        return text

    def _keep_feedback(self, pages, student):
        for page in map(Path, pages):
            name = f"{student}.html" if len(pages) == 1 else f"{student}-{page.stem}.html"
            write_atomically(self.out / "feedback" / name, page.read_bytes())

    # -- a batch --------------------------------------------------------------------
    def previous(self, submission):
        """The recorded result of an unchanged submission, if any (resuming a batch)."""
        path = self.out / "results" / f"{submission.student}.json"
        try:
            recorded = json.loads(path.read_text())
            earlier = Result(**recorded)
        except (OSError, ValueError, TypeError):
            return None
        if (earlier.digest != submission.digest() or earlier.assignment != self.assignment
                or earlier.terms != self.terms(submission.student)):
            return None
        if earlier.status == "graded" and self.gradebook.recorded_score(submission.student) != earlier.score:
            return None  # the gradebook lost it (or never got it): grade again
        return earlier

    def record(self, result):
        write_atomically(self.out / "results" / f"{result.student}.json", result.line() + "\n")

    def write_grades(self):
        write_grades_csv(self.out / "results", self.assignment, self.out / "grades.csv")


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(value):
    """`value` as a cell no spreadsheet runs as a formula: text that would start one gets a
    leading quote (messages quote file names and notebooks); numbers stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def write_grades_csv(results_dir, assignment, csv_path):
    """grades.csv from every recorded result of `assignment`, safe to open in a spreadsheet."""
    rows = []
    for path in sorted(Path(results_dir).glob("*.json")):
        try:
            rows.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    columns = ["student", "assignment", "score", "max_score", "late_penalty", "submitted", "late", "status",
               "message"]
    lines = [columns]
    for row in rows:
        if row.get("assignment") == assignment:
            late = row.get("seconds_late", 0)
            row = {**row, "late_penalty": row.get("penalty", 0.0), "submitted": row.get("submitted", ""),
                   "late": lateness.how_late(late) if isinstance(late, (int, float)) and late > 0 else ""}
            lines.append([spreadsheet_text(row[column]) for column in columns])
    csv_path = Path(csv_path)
    temporary = csv_path.with_name(f".{csv_path.name}.tmp")
    with open(temporary, "w", newline="") as handle:
        csv.writer(handle).writerows(lines)
    os.replace(temporary, csv_path)


def grade(assignment, sources, out, jobs=None, force=False, progress=True, emit=print, **options):
    """Grade every submission in `sources`; emit one JSON line each; return the results."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # nbgrader runs `alembic` by name when it creates a gradebook: this Python's bin/ first.
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    logs = Path(tempfile.mkdtemp(prefix="autograde-logs-"))
    # The workers fork their kernels from the batch's factories, which import PyTorch
    # once for all of them (autograder/judging/kernel_start.py).
    factories, shared = [], None
    if options.get("isolate", True):
        preloads = [kernel_start.instructor_preload(nbformat.read(path, as_version=4))
                    for path in paths.assignment_notebooks(assignment, options.get("solutions", paths.SOLUTIONS))]
        factories, shared = kernel_start.start_batch_factories(preloads)
    env = {kernel_start.BATCH_FACTORIES: shared} if shared else {}
    workers = [Worker(logs / f"worker-{slot}.log", env) for slot in range(max(1, jobs or os.cpu_count() or 1))]
    for worker in workers:
        worker.start()

    def stop_all():
        for worker in workers:
            worker.stop()
        for factory in factories:
            factory.close()
        shutil.rmtree(logs, ignore_errors=True)

    try:
        grader = Grader(assignment, out, **options)
    except BaseException:
        stop_all()
        raise
    try:
        submissions = collect(sources, assignment, grader.expected)
        grader.settle_lateness()  # waits for the class gradebook: one that cannot be used stops the batch here
        results, pending = [], []
        for submission in submissions:
            if submission.refused:  # no student's submission: reported, never recorded
                result = Result(submission.student, assignment, 0.0, grader.max_score, "refused",
                                submission.error, submission.source)
                results.append(result)
                emit(result.line())
                continue
            if not submission.error:
                grader.check(submission)
            earlier = None if force or submission.duplicate or submission.error else grader.previous(submission)
            if earlier is not None:
                results.append(earlier)
                emit(earlier.line())
            elif submission.error:
                result = grader.finish(submission, None, 0.0)
                results.append(result)
                emit(result.line())
            else:
                pending.append(submission)
        jobs = max(1, min(len(workers), len(pending) or 1))
        for worker in workers[jobs:]:
            worker.stop()
        bar = _progress(len(pending), progress)
        todo, done = queue.Queue(), queue.Queue()
        for submission in pending:
            todo.put(submission)

        def serve(slot):
            worker = workers[slot]
            try:
                while True:
                    try:
                        submission = todo.get_nowait()
                    except queue.Empty:
                        return
                    started = time.monotonic()
                    answer = worker.run(grader.task(submission, slot), grader.worker_timeout)
                    done.put((submission, answer, time.monotonic() - started))
            finally:
                worker.stop(wait=30)

        threads = [threading.Thread(target=serve, args=(slot,), daemon=True) for slot in range(jobs)]
        for thread in threads:
            thread.start()
        for _ in range(len(pending)):
            submission, answer, seconds = done.get()
            result = grader.finish(submission, answer, seconds)
            results.append(result)
            emit(result.line())
            bar.update(1)
        for thread in threads:
            thread.join()
        bar.close()
        grader.write_grades()
        return results
    finally:
        stop_all()
        grader.close()
        sandbox.remove_stale_cgroups()


def _progress(total, enabled):
    from tqdm import tqdm

    return tqdm(total=total, desc="grading", unit="submission", disable=not enabled or total == 0, file=sys.stderr)
