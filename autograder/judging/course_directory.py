"""A throw-away nbgrader course directory, and the nbgrader commands run in it.

nbgrader wants its own layout (source/, release/, submitted/, autograded/, feedback/
and a gradebook). We build one in a scratch folder for each task instead of turning
the repository into one: the repository stays clean, and each graded submission gets
a course directory of its own (autograder/worker.py), so that submissions can be
graded in parallel without sharing a SQLite file.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

# A correct answer may print a NumPy RuntimeWarning (overflow in a masked row that is
# discarded afterwards, say). nbgrader scores a test cell zero when anything reaches
# stderr, so the grading kernel does not print RuntimeWarnings.
KERNEL_ENV = {"PYTHONWARNINGS": "ignore::RuntimeWarning", "MPLBACKEND": "Agg"}

CONFIG = """\
c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.db_url = {db_url!r}
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.Execute.timeout = {cell_timeout}
c.Execute.interrupt_on_timeout = True
c.Exchange.root = {exchange!r}
"""


# Autograding runs the notebook with autograder/judging/preprocessor.py instead of nbgrader's
# Execute (the kernel in a sandbox, the tests here) and saves each test's score from its
# verdict (VerdictGrades) instead of reading it from the cell's outputs (SaveAutoGrades).
GRADING_CONFIG = """
from autograder.judging.preprocessor import SandboxedExecute, VerdictGrades
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput
c.Autograde.autograde_preprocessors = [SandboxedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
                                       VerdictGrades, AssignLatePenalties, CheckCellMetadata]
c.GenerateFeedback.exporter_class = "autograder.reporting.feedback.FeedbackExporter"
"""
# Its traits (FeedbackExporter.show_hidden_tests, render_timeout) are set by configure_feedback.


class NbgraderError(RuntimeError):
    """An nbgrader command failed; the message holds the end of its log."""


class CourseDirectory:
    def __init__(self, root, cell_timeout=120):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.db_path = self.root / "gradebook.db"
        (self.root / "nbgrader_config.py").write_text(CONFIG.format(
            root=str(self.root),
            db_url=f"sqlite:///{self.db_path}",
            cell_timeout=int(cell_timeout),
            exchange=str(self.root / "exchange"),
        ))

    def configure_grading(self, **traits):
        """Autograde with SandboxedExecute, whose traits (cell_timeout, slot...) are given here."""
        lines = [GRADING_CONFIG] + [f"c.SandboxedExecute.{name} = {value!r}" for name, value in traits.items()]
        with open(self.root / "nbgrader_config.py", "a") as handle:
            handle.write("\n".join(lines) + "\n")

    def configure_lateness(self, percent_per_day):
        """Late penalties by autograder/records/lateness.py's rule, through nbgrader's AssignLatePenalties."""
        with open(self.root / "nbgrader_config.py", "a") as handle:
            handle.write('c.AssignLatePenalties.plugin_class = "autograder.records.lateness.PercentPerDay"\n'
                         f"c.PercentPerDay.percent_per_day = {float(percent_per_day)!r}\n")

    def configure_feedback(self, show_hidden_tests=False, render_timeout=None, lateness="", report_dir=""):
        """Feedback pages (autograder/reporting/feedback.py): hidden tests shown in full only with
        show_hidden_tests; render_timeout: seconds per page (None: the exporter's 60);
        lateness: a sentence on a late submission, shown with the score; report_dir: the
        grader's reports, whose diagnoses the page's summary shows."""
        lines = [f"c.FeedbackExporter.show_hidden_tests = {bool(show_hidden_tests)!r}",
                 f"c.FeedbackExporter.lateness = {str(lateness)!r}",
                 f"c.FeedbackExporter.report_dir = {str(report_dir)!r}"]
        if render_timeout is not None:
            lines.append(f"c.FeedbackExporter.render_timeout = {float(render_timeout)!r}")
        with open(self.root / "nbgrader_config.py", "a") as handle:
            handle.write("\n".join(lines) + "\n")

    def add_source(self, assignment, solutions):
        """Copy the instructor's source notebooks of `assignment` into source/."""
        target = self.root / "source" / assignment
        shutil.copytree(Path(solutions) / assignment, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        return target

    def _run(self, command, what, timeout):
        # nbgrader calls `alembic` and starts kernels by name: this Python's bin/ comes first.
        bin_dir = os.path.dirname(sys.executable)
        env = {**os.environ, **KERNEL_ENV, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
        try:
            done = subprocess.run(command, cwd=self.root, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise NbgraderError(f"{what} did not finish within {timeout} s") from None
        if done.returncode != 0:
            log = (done.stdout + done.stderr).strip().splitlines()
            raise NbgraderError(f"{what} failed:\n" + "\n".join(log[-25:]))
        return done

    def nbgrader(self, *args, timeout=None):
        """Run one nbgrader command here; raise NbgraderError with its log if it fails."""
        return self._run([sys.executable, "-m", "nbgrader", *args], f"nbgrader {args[0]}", timeout)

    def generate_assignment(self, assignment, in_process=False):
        """nbgrader generate_assignment: student versions in release/, the assignment in the gradebook.

        in_process: through nbgrader's Python API in this process (no new Python to start)."""
        if not in_process:
            self.nbgrader("generate_assignment", assignment, "--force")
            return self.root / "release" / assignment
        from nbgrader.apps import NbGraderAPI
        from nbgrader.coursedir import CourseDirectory as NbCourseDirectory
        from traitlets.config.loader import PyFileConfigLoader

        config = PyFileConfigLoader("nbgrader_config.py", path=str(self.root)).load_config()
        api = NbGraderAPI(coursedir=NbCourseDirectory(config=config), config=config)
        outcome = api.generate_assignment(assignment, force=True)
        if not outcome["success"]:
            log = (outcome.get("log") or "") + "\n" + (outcome.get("error") or "")
            raise NbgraderError("nbgrader generate_assignment failed:\n" + "\n".join(log.strip().splitlines()[-25:]))
        return self.root / "release" / assignment
