"""nbgrader's autograde, with the notebook executed by autograder/judging/executor.py.

nbgrader's own Execute preprocessor runs every cell, tests included, in one kernel
with the grader's rights, and trusts what the kernel reports. `SandboxedExecute` takes
its place in `Autograde`'s preprocessors (see course_directory.py): the student's cells
run in a sandboxed kernel, the test cells in this process against the student's
functions (autograder/judging/referee.py), and a test cell's outputs end with an error exactly
when it failed here. `VerdictGrades` takes the place of nbgrader's SaveAutoGrades: a
test cell's score is the verdict reached here (all its points if it passed, none
otherwise), never read from the cell's outputs, which hold what the student's code
displayed. Everything else (restoring the instructor's cells, checksums, comments,
feedback) stays nbgrader's.
"""

import json
import os
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor, SaveAutoGrades
from traitlets import Bool, Float, Integer, Unicode

from autograder.judging import diagnosis, executor
from autograder.isolation import sandbox

VERDICTS = "autograder_verdicts"  # resources key: test key -> "passed" | "failed" | "not run"


class SandboxedExecute(NbGraderPreprocessor):
    isolate = Bool(True, help="run the kernel in the sandbox").tag(config=True)
    cell_timeout = Float(120.0).tag(config=True)
    submission_timeout = Float(900.0).tag(config=True)
    memory = Integer(sandbox.Limits.memory).tag(config=True)
    processes = Integer(sandbox.Limits.processes).tag(config=True)
    slot = Integer(0).tag(config=True)
    report_dir = Unicode("").tag(config=True)
    home_dir = Unicode("", help="files the student's kernel finds in its home folder").tag(config=True)
    source_dir = Unicode("", help="the instructor's notebooks: the reference answers").tag(config=True)

    def preprocess(self, nb, resources):
        isolation = sandbox.probe(allow_unsandboxed=True) if self.isolate else sandbox.Isolation(False)
        if self.isolate and not isolation.sandboxed:
            raise sandbox.SandboxUnavailable(isolation.reason)
        limits = sandbox.Limits(memory=self.memory, processes=self.processes)
        settings = executor.Settings(cell_timeout=self.cell_timeout, submission_timeout=self.submission_timeout,
                                     limits=limits)
        home = {}
        if self.home_dir and os.path.isdir(self.home_dir):
            home = {p.name: p.read_bytes() for p in sorted(Path(self.home_dir).iterdir()) if p.is_file()}
        name = resources.get("unique_key", "notebook")
        source = nbformat.read(Path(self.source_dir) / f"{name}.ipynb", as_version=4)
        reference = executor.reference_cells(source)
        assignment = Path(self.source_dir).name
        try:
            probes = diagnosis.load_probes(assignment)
        except Exception as error:  # a catalogue that cannot be read: graded without diagnosis
            self.log.warning("the probes of %s could not be read: %s", assignment, error)
            probes = {}
        report = executor.execute_notebook(nb, isolation, settings, reference, slot=self.slot, home_files=home,
                                           name=str(name)[:40], probes=probes)
        # The diagnosis, here, where no student code runs: what the probes gave against what
        # the catalogue's wrong answers give (never a verdict: scores are already decided).
        try:
            diagnosed = diagnosis.diagnose(assignment, reference, report.probed)
        except Exception as error:  # logged and noted; the grade stands
            self.log.warning("the diagnosis of %s failed: %r", name, error)
            report.notes.append(diagnosis.DIAGNOSIS_FAILED.format(error=diagnosis.short_error(error)))
            diagnosed = {}
        if self.report_dir:
            Path(self.report_dir).mkdir(parents=True, exist_ok=True)
            (Path(self.report_dir) / f"{name}.json").write_text(json.dumps({**report.__dict__,
                                                                           "diagnosed": diagnosed}))
        resources[VERDICTS] = dict(report.verdicts)
        return nb, resources


class VerdictGrades(SaveAutoGrades):
    """nbgrader's SaveAutoGrades, except that a test cell's score is its verdict
    (SandboxedExecute's, in the resources): all its points if it passed, none if it
    failed or did not run. nbgrader would read the cell's outputs (an execute_result as
    partial credit, stderr as a failure); what the student's kernel sends never becomes
    a score. Answer cells with points (manual grading) stay nbgrader's."""

    def _add_score(self, cell, resources):
        if cell.cell_type != "code" or utils.is_solution(cell):
            return super()._add_score(cell, resources)
        verdicts = resources.get(VERDICTS)
        if verdicts is None:
            raise RuntimeError("no verdicts to save: the notebook was not executed by SandboxedExecute")
        meta = cell.metadata["nbgrader"]
        grade = self.gradebook.find_grade(meta["grade_id"], self.notebook_id, self.assignment_id, self.student_id)
        grade.auto_score = float(meta["points"]) if verdicts.get(meta["grade_id"]) == "passed" else 0.0
        grade.needs_manual_grade = grade.manual_score is not None
        self.gradebook.db.commit()
