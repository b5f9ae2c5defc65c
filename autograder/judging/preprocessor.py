"""nbgrader's autograde, with the notebook executed by autograder/judging/executor.py.

nbgrader's own Execute preprocessor runs every cell, tests included, in one kernel
with the grader's rights, and trusts what the kernel reports. `SandboxedExecute` takes
its place in `Autograde`'s preprocessors (see course_directory.py): the student's cells
run in a sandboxed kernel, the test cells in this process against the student's
functions (autograder/judging/referee.py), and a test cell's outputs end with an error exactly
when it failed here. Everything else (restoring the instructor's cells, checksums,
saving grades, feedback) stays nbgrader's.
"""

import json
import os
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer, Unicode

from autograder.judging import diagnosis, executor
from autograder.isolation import sandbox


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
            report.notes.append(executor.DIAGNOSIS_FAILED.format(error=executor.short_error(error)))
            diagnosed = {}
        if self.report_dir:
            Path(self.report_dir).mkdir(parents=True, exist_ok=True)
            (Path(self.report_dir) / f"{name}.json").write_text(json.dumps({**report.__dict__,
                                                                           "diagnosed": diagnosed}))
        return nb, resources
