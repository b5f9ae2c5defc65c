"""Command-line entry point: python -m autograder {release,grade,forget,collect,validate,report}."""

import argparse
import json
import os
import sys

from autograder import paths


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    release = commands.add_parser("release", help="regenerate every student version from solutions/")
    release.add_argument("assignments", nargs="*", help="only these assignments (default: all)")

    grade = commands.add_parser("grade", help="autograde submissions; one JSON line per submission")
    grade.add_argument("assignment", help="the assignment's name, as in solutions/ASSIGNMENT/")
    grade.add_argument("submissions", nargs="+",
                       help="notebooks (STUDENT.ipynb), zip files (STUDENT.zip), nbgrader folders "
                            "(STUDENT/ASSIGNMENT/*.ipynb) or folders of any of these (an LMS download, "
                            "nbgrader's submitted/)")
    grade.add_argument("--solutions", default=str(paths.SOLUTIONS),
                       help="the folder of source notebooks, SOLUTIONS/ASSIGNMENT/*.ipynb (default: this "
                            "repository's solutions/; a private copy keeps hidden tests from students)")
    grade.add_argument("--out", default="grading", help="where grades.csv, feedback/ and results/ go")
    grade.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: cores)")
    grade.add_argument("--force", action="store_true", help="regrade submissions already graded in --out")
    grade.add_argument("--cell-timeout", type=int, default=120, help="seconds per cell (default: 120)")
    grade.add_argument("--submission-timeout", type=int, default=900,
                       help="seconds per submission, all cells together (default: 900)")
    grade.add_argument("--memory", type=float, default=3.0, help="GiB of memory per submission (default: 3)")
    grade.add_argument("--processes", type=int, default=256,
                       help="processes and threads per submission (default: 256)")
    grade.add_argument("--db", default=None,
                       help="the class gradebook's database URL (default: sqlite:///OUT/gradebook.db), "
                            "e.g. postgresql://user@host/gradebook")
    grade.add_argument("--no-isolation", action="store_true",
                       help="run student code WITHOUT a sandbox, with your rights, files and network "
                            "(only where bubblewrap cannot run, and only for code you trust)")
    grade.add_argument("--due", default=None, metavar="DATETIME",
                       help="the due date, ISO 8601 with its time zone (2026-12-01T17:00+01:00); kept in the "
                            "gradebook for later runs (default: the gradebook's, if any)")
    grade.add_argument("--late-penalty", type=float, default=0.0, metavar="PERCENT",
                       help="percent of the points earned taken off per day, or part of a day, past the due "
                            "date (default: 0, lateness reported only; 100: zero for a late submission)")
    grade.add_argument("--extension", action="append", default=[], metavar="STUDENT=DURATION",
                       help="move one student's due date (alice=2d, bob=36h, carol=0 to remove); kept in the "
                            "gradebook; repeat for more students")
    grade.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    grade.add_argument("--feedback-hidden-tests", action="store_true",
                       help="show the full source of hidden tests in feedback pages (default: each failed "
                            "test's message only; hidden tests stay hidden from students)")

    forget = commands.add_parser("forget", help="remove students' recorded grades of an assignment from "
                                                 "--out (gradebook, results, feedback, grades.csv); one JSON "
                                                 "line per student")
    forget.add_argument("assignment", help="the assignment's name, as in solutions/ASSIGNMENT/")
    forget.add_argument("students", nargs="+", metavar="STUDENT",
                        help="student ids as the JSON lines and grades.csv show them")
    forget.add_argument("--out", default="grading", help="the folder grade wrote (default: grading)")
    forget.add_argument("--db", default=None, help="the class gradebook's database URL (default: "
                                                   "sqlite:///OUT/gradebook.db)")
    forget.add_argument("--solutions", default=str(paths.SOLUTIONS), help="the folder of source notebooks")

    collect = commands.add_parser("collect", help="collect submissions from nbgrader's exchange, safely "
                                                   "(instead of nbgrader collect); one JSON line per student")
    collect.add_argument("assignment")
    collect.add_argument("--exchange", default=os.environ.get("NBGRADER_EXCHANGE"),
                         required="NBGRADER_EXCHANGE" not in os.environ,
                         help="nbgrader's exchange folder (default: $NBGRADER_EXCHANGE)")
    collect.add_argument("--course", default=None, help="the course id (default: attention-course)")
    collect.add_argument("--to", default="submitted", help="where STUDENT/ASSIGNMENT/ folders go (default: submitted)")

    validate = commands.add_parser("validate", help="run a notebook and say which visible tests pass")
    validate.add_argument("notebook")

    report = commands.add_parser("report", help="the class report: points per function, known mistakes, "
                                                 "unknown mistakes grouped by behaviour (HTML and PNG charts)")
    report.add_argument("assignment")
    report.add_argument("--out", required=True, help="where index.html, the charts and report.json go")
    report.add_argument("--grading", default="grading", help="the folder grade wrote (--out of grade; "
                                                             "default: grading)")
    report.add_argument("--db", default=None, help="the class gradebook's database URL (default: "
                                                   "sqlite:///GRADING/gradebook.db)")
    report.add_argument("--solutions", default=str(paths.SOLUTIONS), help="the folder of source notebooks")
    report.add_argument("--names", action="store_true", help="name the students behind each mistake "
                                                             "(default: counts only)")

    args = parser.parse_args(argv)
    if args.command == "release":
        from autograder.release import release

        for assignment in args.assignments or paths.assignments():
            for path in release(assignment):
                print(f"wrote {path.relative_to(paths.REPO_ROOT)}")
        return 0
    if args.command == "grade":
        from autograder.records import lateness
        from autograder.isolation import sandbox
        from autograder.grade import grade as grade_batch

        try:
            paths.assignment_notebooks(args.assignment, args.solutions)
            due = lateness.due_date(args.due) if args.due else None
            extensions = dict(map(lateness.extension, args.extension))
            if not 0 <= args.late_penalty <= 100:
                raise ValueError(f"--late-penalty is a percentage from 0 to 100, not {args.late_penalty:g}")
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        try:
            isolation = sandbox.probe(allow_unsandboxed=args.no_isolation)
        except sandbox.SandboxUnavailable as error:
            print(f"error: refusing to run student code without a sandbox: {error}", file=sys.stderr)
            return 2
        limits = sandbox.Limits(memory=int(args.memory * sandbox.GiB), processes=args.processes)
        if isolation.sandboxed:
            print(isolation.describe(limits), file=sys.stderr)
            for note in isolation.notes:
                print(f"note: {note}", file=sys.stderr)
        else:
            print("WARNING: " + isolation.describe() + " (--no-isolation). " + isolation.reason, file=sys.stderr)
        try:
            results = grade_batch(args.assignment, args.submissions, args.out, jobs=args.jobs, force=args.force,
                                  progress=not args.no_progress, emit=lambda line: print(line, flush=True),
                                  cell_timeout=args.cell_timeout, submission_timeout=args.submission_timeout,
                                  memory=limits.memory, processes=limits.processes, db_url=args.db,
                                  isolate=isolation.sandboxed, feedback_hidden_tests=args.feedback_hidden_tests,
                                  solutions=args.solutions, due=due, late_penalty=args.late_penalty,
                                  extensions=extensions)
        except RuntimeError as error:  # the gradebook cannot be used: nothing is recorded
            print(f"error: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("\ninterrupted: what was graded is recorded; run the same command again to go on",
                  file=sys.stderr)
            return 130
        refused = [result for result in results if result.status == "refused"]
        for result in refused:
            print(f"refused: {result.message}", file=sys.stderr)
        if refused:
            print(f"error: {len(refused)} input(s) refused, nothing recorded for them; the others are graded "
                  "and recorded", file=sys.stderr)
            return 1
        return 0
    if args.command == "forget":
        from autograder.grade import write_grades_csv
        from autograder.records.forget import check_student_id, forget

        try:
            notebooks = [p.name for p in paths.assignment_notebooks(args.assignment, args.solutions)]
            for student in args.students:  # all checked before anything is removed
                check_student_id(student)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        code = 0
        for student in args.students:
            try:
                report = forget(args.assignment, student, args.out, notebooks, db_url=args.db,
                                write_grades=write_grades_csv)
            except Exception as error:  # the gradebook or the disk: run the same command again
                print(f"error: cannot forget {student}: {error}", file=sys.stderr)
                return 2
            print(json.dumps(report, sort_keys=True), flush=True)
            if report["forgotten"]:
                print(f"forgot {student}'s grade of {args.assignment}: " + "; ".join(report["forgotten"])
                      + (f" (kept in {report['kept_in']})" if report["kept_in"] else ""), file=sys.stderr)
            else:
                print(f"error: {args.out} holds no record of {student} for {args.assignment}", file=sys.stderr)
                code = 1
        return code
    if args.command == "collect":
        from autograder.records.collect import collect as collect_submissions
        from autograder.records.gradebook import COURSE_ID

        try:
            reports = collect_submissions(args.assignment, args.exchange, args.course or COURSE_ID, args.to)
        except OSError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        for report in reports:
            print(json.dumps(report, sort_keys=True), flush=True)
        return 0
    if args.command == "validate":
        from autograder.reporting.validate import print_report, validate

        return print_report(validate(args.notebook))
    if args.command == "report":
        from autograder.reporting import report as class_report

        try:
            built = class_report.build(args.assignment, args.grading, args.db, args.solutions)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        page = class_report.render(built, args.out, names=args.names)
        print(f"wrote {page} ({len(built.students)} students)")
        return 0
    return 2
