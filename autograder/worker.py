"""A grading worker: one process that grades submissions one after another.

    python -m autograder.worker        (driven by autograder/grade.py)

The parent sends one task per line on stdin (JSON) and reads one result per line on
stdout. A worker imports nbgrader once and keeps it, which saves seconds per
submission over one process per submission. The worker is the grader's own code: it
runs no student code itself (the kernel does, in the sandbox), and nothing the kernel
prints reaches its stdout.

A task: {"template": course directory whose gradebook knows the assignment,
         "work": a folder to grade in (created here), "assignment", "student",
         "notebooks": {name: path of the submitted notebook}, "settings": {...},
         "lateness": {"timestamp", "due" (ISO 8601 or null; the student's extension
         included), "percent_per_day"}}
A result: {"student", "score" (before any late penalty), "max_score", "penalty",
           "seconds_late", "tests": {cell: [score, max]}, "verdicts", "notes", "diagnoses",
           "unknown_mistakes",
           "problems", "feedback": [html paths], "db": gradebook path}
           or {"student", "error": message}
"""

import json
import os
import shutil
import sys
import traceback
from pathlib import Path

import nbformat


def grade(task):
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory as NbCourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    from autograder.judging.assemble import assemble
    from autograder.judging.diagnosis import DIAGNOSIS_FAILED, short_error
    from autograder.judging.course_directory import CourseDirectory
    from autograder.records.gradebook import COURSE_ID
    from autograder.records.lateness import due_date, lateness_note, naive_utc
    from autograder.records.submissions import read_notebook

    assignment, student = task["assignment"], task["student"]
    work = Path(task["work"])
    shutil.copytree(task["template"], work)
    course = CourseDirectory(work, task["settings"].get("cell_timeout", 120))
    home = work / "home"
    home.mkdir()
    course.configure_grading(report_dir=str(work / "reports"), home_dir=str(home),
                             source_dir=str(work / "source" / assignment), **task["settings"])
    lateness = task.get("lateness") or {}
    course.configure_lateness(lateness.get("percent_per_day", 0.0))
    course.configure_feedback(show_hidden_tests=task.get("feedback_hidden_tests", False),
                              lateness=lateness_note(lateness), report_dir=str(work / "reports"))
    folder = work / "submitted" / student / assignment
    folder.mkdir(parents=True)
    if lateness.get("timestamp"):  # read by nbgrader's autograde, as from its exchange
        (folder / "timestamp.txt").write_text(lateness["timestamp"])
    with Gradebook(f"sqlite:///{course.db_path}", course_id=COURSE_ID) as gradebook:
        due = naive_utc(due_date(lateness["due"])) if lateness.get("due") else None
        gradebook.update_or_create_assignment(assignment, duedate=due)
    notes = []
    for name, path in task["notebooks"].items():
        data = Path(path).read_bytes()
        (home / name).write_bytes(data)  # the student's own notebook, as submitted
        source = nbformat.read(work / "source" / assignment / name, as_version=4)
        submitted = read_notebook(data)  # within the limits that the grader checked
        notebook, cell_notes = assemble(source, submitted)
        notes += [f"{name}: {n}" if len(task["notebooks"]) > 1 else n for n in cell_notes]
        nbformat.write(notebook, folder / name)

    config = PyFileConfigLoader("nbgrader_config.py", path=str(work)).load_config()
    api = NbGraderAPI(coursedir=NbCourseDirectory(config=config), config=config)
    outcome = api.autograde(assignment, student, force=True)
    if not outcome["success"]:
        raise RuntimeError(f"nbgrader autograde failed:\n{_log_tail(outcome)}")
    # The scores are in the gradebook: what follows (the feedback page, the diagnoses'
    # examples) is noted when it fails, and the grade stands.
    after = []
    try:
        outcome = api.generate_feedback(assignment, student, force=True)
        if not outcome["success"]:
            raise RuntimeError((_log_tail(outcome).splitlines() or ["no log"])[-1])
    except Exception as error:
        sys.stderr.write(f"the feedback of {student} failed: {error}\n")
        after.append(FEEDBACK_FAILED.format(error=short_error(error)))

    reports = {}
    for path in sorted((work / "reports").glob("*.json")):
        reports[path.stem] = json.loads(path.read_text())
    with Gradebook(f"sqlite:///{course.db_path}", course_id=COURSE_ID) as gradebook:
        submission = gradebook.find_submission(assignment, student)
        tests = {}
        for notebook in submission.notebooks:
            for grade_row in notebook.grades:
                if grade_row.max_score > 0:
                    tests[grade_row.name] = [float(grade_row.score), float(grade_row.max_score)]
        score, max_score = float(submission.score), float(submission.max_score)
        penalty, seconds_late = float(submission.late_submission_penalty or 0), float(submission.total_seconds_late)
    # The verdicts reached outside the kernel decide (autograder/judging/preprocessor.py's
    # VerdictGrades saves them): the gradebook must hold them.
    verdicts, messages = {}, {}
    for report in reports.values():
        verdicts.update(report["verdicts"])
        messages.update(report["messages"])
    for name, (got, top) in tests.items():
        if (got > 0) != (verdicts.get(name) == "passed"):
            raise RuntimeError(f"internal inconsistency: nbgrader gave {name} {got:g} of {top:g} points, "
                               f"but the test {verdicts.get(name, 'did not run')}")
    try:
        diagnoses, unknown = _diagnoses(reports, {Path(name).stem: folder / name for name in task["notebooks"]})
    except Exception as error:
        diagnoses, unknown = {}, {}
        after.append(DIAGNOSIS_FAILED.format(error=short_error(error)))
    feedback = sorted(str(p) for p in (work / "feedback" / student / assignment).glob("*.html"))
    return {
        "student": student, "score": score, "max_score": max_score, "penalty": penalty,
        "seconds_late": seconds_late, "tests": tests, "verdicts": verdicts,
        "messages": messages, "diagnoses": diagnoses, "unknown_mistakes": unknown,
        "notes": notes + [n for r in reports.values() for n in r["notes"]] + after,
        "problems": [p for r in reports.values() for p in r["problems"]],
        "usage": {k: v for r in reports.values() for k, v in r["usage"].items()},
        "feedback": feedback, "db": str(course.db_path),
    }


FEEDBACK_FAILED = "The feedback page could not be made ({error}); the grade stands."


def _log_tail(outcome):
    log = (outcome.get("log") or "") + "\n" + (outcome.get("error") or "")
    return "\n".join(log.strip().splitlines()[-25:])


def _diagnoses(reports, notebooks):
    """({function: id of the catalogued mistake it behaves like}, {function: {"behaviour": its
    probes' values, "code": the answer, anonymized}} for the functions that lost points and
    behave like no catalogued mistake): what the class report (autograder/reporting/report.py) reads."""
    from autograder.judging.diagnosis import anonymized

    diagnoses, unknown = {}, {}
    for name, report in reports.items():
        diagnosed = report.get("diagnosed", {})
        diagnoses.update({function: found["id"] for function, found in diagnosed.items()})
        probed = {f: values for f, values in report.get("probed", {}).items() if f not in diagnosed}
        if not probed or name not in notebooks:
            continue
        answers = {}
        for cell in nbformat.read(notebooks[name], as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution") and meta.get("grade_id") in probed:
                answers[meta["grade_id"]] = anonymized(cell.source)
        unknown.update({f: {"behaviour": values, "code": answers.get(f, "")} for f, values in probed.items()})
    return diagnoses, unknown


def main():
    # The protocol owns the real stdout; anything else printed goes to stderr.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import warnings

    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's own session use, harmless
    # The test cells run in this process: on the CPU, like the student's sandboxed kernel
    # (a tensor the tests make must be one the kernel can take).
    os.environ["COURSE_FORCE_CPU"] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import nbgrader.apps  # noqa: F401  (imported now, while the parent prepares the batch)
    import numpy  # noqa: F401  (the test cells need them: imported once per worker)
    import torch  # noqa: F401

    import autograder.judging.preprocessor  # noqa: F401
    from autograder.judging import kernel_start

    kernel_start.SPARE = kernel_start.Spare()  # the next submission's kernel starts while this one is graded
    kernel_start.FACTORIES = kernel_start.Factories()  # kernels forked from a process that imported PyTorch once
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        try:
            result = grade(task)
        except Exception as error:  # reported for this submission; the worker goes on
            detail = "".join(traceback.format_exception_only(type(error), error)).strip()
            sys.stderr.write(traceback.format_exc())
            result = {"student": task.get("student"), "error": detail[-3000:]}
        protocol.write(json.dumps(result) + "\n")
    kernel_start.SPARE.close()
    kernel_start.FACTORIES.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
