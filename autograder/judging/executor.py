"""Execute a graded notebook: the student's cells in a sandboxed kernel, the tests here.

The kernel (ipykernel) runs inside the sandbox (autograder/isolation/sandbox.py); this process
talks to it over unix sockets in the sandbox's /run/ipc, reached from outside through
/proc/PID/root, and over one more socket to the grader's agent in the kernel
(autograder/isolation/agent.py). This process decides what runs, in which order, and how each
test ended:

* Student cells (answer cells and cells the student added) run in the kernel.
* The instructor's other cells (setup, helpers) run in the kernel, so that the student's
  code finds its imports, and here, so that the tests do.
* Test cells never enter the kernel. They run here (autograder/judging/referee.py) against
  stand-ins that call the student's functions in the kernel and get values back; a test
  passes when it runs to its end here. Nothing the kernel prints or sends can make a
  test pass, and warnings or prints from the student's code never make one fail.
* Outputs are capped as they arrive; each cell and the whole notebook have time limits;
  a kernel that stops answering, or uses too much, is killed with everything it started.

This file runs the notebook, cell by cell. The rest lives beside it: the kernel and its
messages (kernel.py), kernels started ready to grade (kernel_start.py), capped outputs
(outputs.py), one test cell and the diagnosis probes (testing.py), and what a crash
costs and the fresh kernel after it (crashes.py).
"""

import base64
import time
from dataclasses import dataclass, field

from autograder.isolation import sandbox
from autograder.judging import diagnosis, kernel_start, referee, testing
from autograder.judging.assemble import solution_code
from autograder.judging.crashes import MAX_RESTARTS, AfterCrash, death_reason
from autograder.judging.kernel import KernelDied
from autograder.judging.outputs import Outputs, grader_error


@dataclass
class Settings:
    cell_timeout: float = 120.0
    submission_timeout: float = 900.0
    startup_timeout: float = 120.0
    cell_output_limit: int = 100_000  # characters of text output kept per cell
    notebook_output_limit: int = 2_000_000  # bytes of output kept per notebook
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)


def cell_kind(cell):
    """'student', 'instructor', 'test' or '' (not executed), from trusted nbgrader metadata."""
    if cell.cell_type != "code":
        return ""
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("solution") or not (meta.get("grade") or meta.get("locked")):
        return "student"
    return "test" if meta.get("grade") else "instructor"


def cell_key(cell, index):
    return str(cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell-{index}")


def reference_cells(source_notebook):
    """[(source, is a solution)]: the instructor's code cells in order, tests left out,
    solution cells with the reference code (what autograder/judging/referee.py runs on its side)."""
    cells = []
    for cell in source_notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or (meta.get("grade") and not meta.get("solution")):
            continue
        if meta.get("solution"):
            cells.append((solution_code(cell.source), True))
        elif meta.get("locked"):
            cells.append((cell.source, False))
    return cells


@dataclass
class Report:
    verdicts: dict = field(default_factory=dict)  # test key -> "passed" | "failed" | "not run"
    messages: dict = field(default_factory=dict)  # test key -> what a failed test said
    notes: list = field(default_factory=list)  # what the grader noticed
    problems: list = field(default_factory=list)  # what stopped the notebook (kernel died, time limit...)
    usage: dict = field(default_factory=dict)
    probed: dict = field(default_factory=dict)  # function -> its probes' values (autograder/judging/diagnosis.py)


HOME_FILES = """\
import base64 as __autograder_b64__
for __autograder_name__, __autograder_data__ in {files!r}.items():
    with open(__autograder_name__, "wb") as __autograder_file__:
        __autograder_file__.write(__autograder_b64__.b64decode(__autograder_data__))
del __autograder_b64__, __autograder_name__, __autograder_data__, __autograder_file__
"""


def sections_of(plan):
    """test key -> (section, label): the answer cell that a test follows (its function's
    tests sit right below it, up to the next answer cell) and the names that cell defines."""
    sections, current = {}, (None, "")
    for index, cell, kind in plan:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            names = [name for name, _ in referee.graded_names([solution_code(cell.source)])]
            current = (cell_key(cell, index), ", ".join(f"`{n}`" for n in names) or f"`{cell_key(cell, index)}`")
        elif kind == "test":
            sections[cell_key(cell, index)] = current
    return sections


class Execution(AfterCrash):
    """One graded notebook run: its kernel (fresh ones after a crash), its test verdicts.

    Time: the notebook has `submission_timeout` seconds in all. The tests of one graded
    function (a section) have together at most an equal share of it, so that a function
    that loops or hangs costs only its own tests. A crash (the kernel dies, is killed for
    memory, or cannot be interrupted) fails the test that was running and the rest of its
    function's tests; the next function's tests run in a fresh kernel where the notebook's
    other cells have run again (at most MAX_RESTARTS times)."""

    probes = {}  # grade_id -> diagnosis.Probes: run after the cells for functions that lost points

    def __init__(self, notebook, isolation, settings, reference, slot, home_files, name):
        self.notebook, self.isolation, self.settings = notebook, isolation, settings
        self.reference, self.slot, self.home_files, self.name = reference, slot, home_files, name
        self.report = Report()
        self.plan = [(index, cell, cell_kind(cell)) for index, cell in enumerate(notebook.cells)]
        self.sections = sections_of(self.plan)
        count = len({section for section, _ in self.sections.values()}) or 1
        self.share = settings.submission_timeout / count  # seconds for one section's tests
        self.spent = {}  # section -> seconds its tests have used
        self.dead = {}  # section -> why its remaining tests do not run
        self.crashed_cells = set()  # indices of cells that took a kernel down: not run again
        self.restarts = 0
        self.budget = {"left": settings.notebook_output_limit}
        self.started = time.monotonic()
        self.box = self.kernel = self.channel = None
        self.judge = None
        self.stop = ""  # why no further cell runs at all
        self.usage = {}

    # -- the kernel --------------------------------------------------------------------
    def _preload(self):
        return kernel_start.imported_modules(source for source, solution in self.reference if not solution)

    def _open(self, first):
        preload = self._preload()
        if first and kernel_start.SPARE is not None:
            self.box, self.kernel = kernel_start.SPARE.take(self.isolation, self.settings, self.slot, preload)
        else:
            self.box, self.kernel = kernel_start.start_kernel(
                self.isolation, self.settings, self.slot,
                self.name if first else f"{self.name}-restart{self.restarts}", preload)
        if self.home_files:
            files = {n: base64.b64encode(d).decode() for n, d in self.home_files.items()}
            self.kernel.execute(HOME_FILES.format(files=files), self.settings.startup_timeout,
                                Outputs({"left": 10_000}, 10_000), silent=True)
        if self.channel is None:
            self.channel = referee.Channel(self.kernel.agent_socket, pump=None, interrupt=self.kernel.interrupt,
                                           references={})
            self.judge = referee.Referee(self.channel, self.reference)
            self.judge.sources = [str(cell.source) for _, cell, kind in self.plan if kind in ("student", "instructor")]
        else:
            self.channel.reconnect(self.kernel.agent_socket, self.kernel.interrupt)
        # Memory is measured from the sandbox's cgroup, which a fresh kernel has anew.
        self.channel.memory_meter = self.box.memory_meter()

    def _close(self):
        if self.box is not None:
            for key, value in self.box.usage().items():
                self.usage[key] = max(value, self.usage.get(key, 0)) if key == "memory_peak" \
                    else self.usage.get(key, 0) + value
            if self.kernel is not None:
                self.kernel.close()
            self.box.close()
        self.box = self.kernel = None

    # -- time ----------------------------------------------------------------------------
    def _left(self):
        return self.settings.submission_timeout - (time.monotonic() - self.started)

    def _out_of_time(self):
        return f"the notebook ran past its time limit ({self.settings.submission_timeout:g} s)"

    # -- the cells -------------------------------------------------------------------------
    def run(self):
        for _, cell, kind in self.plan:
            if kind:
                cell.outputs = []
                cell.execution_count = None
        try:
            self._open(first=True)
            for index, cell, kind in self.plan:
                if kind:
                    self._cell(index, cell, kind)
            if self.probes:  # what each function that lost points does on its probes
                try:
                    self.report.probed = testing.probe_submission(self, self.probes)
                except Exception as error:  # the verdicts are in: a fault here never changes them
                    self.report.notes.append(diagnosis.DIAGNOSIS_FAILED.format(error=diagnosis.short_error(error)))
        except KernelDied as error:  # no kernel could be started
            self._stop(death_reason(str(error), self.box, self.settings))
        finally:
            self._close()
            if self.channel is not None:
                self.channel.close()
            self.report.usage = self.usage
            self.report.notes += [text for text in dict.fromkeys(self.channel.over_limits)] \
                if self.channel is not None else []
        for index, cell, kind in self.plan:
            key = cell_key(cell, index)
            if kind == "test" and key not in self.report.verdicts:
                self._not_run(cell, key, f"This test did not run: {self.stop}")
        return self.report

    def _stop(self, why):
        if not self.stop:
            self.stop = why
            self.report.problems.append(why)

    def _not_run(self, cell, key, text):
        cell.outputs = [grader_error("NotRun", text)]
        self.report.verdicts[key] = "not run"
        self.report.messages[key] = text

    def _cell(self, index, cell, kind):
        key = cell_key(cell, index)
        if not self.stop and self._left() <= 0:
            self._stop(self._out_of_time())
        if self.stop:
            return
        section, label = self.sections.get(key, (None, ""))
        if kind == "test" and section in self.dead:
            self._not_run(cell, key, self.dead[section])
            return
        while self.kernel is None:  # the last one crashed: a fresh one, if any are left
            if self.restarts >= MAX_RESTARTS:
                self._stop(f"the kernel stopped {self.restarts + 1} times; the rest of the notebook was not run")
                return
            try:
                self._restart(index)
            except KernelDied as error:
                self.report.problems.append(death_reason(str(error), self.box, self.settings)
                                            + " while the notebook's cells ran again in a fresh kernel")
                self._close()
        limit = min(self.settings.cell_timeout, self._left())
        if kind == "test":
            share_left = self.share - self.spent.get(section, 0.0)
            if share_left <= 0:
                self.dead[section] = (f"This test did not run: the tests of {label or 'this function'} used their "
                                      f"share of the notebook's time limit ({self.share:.0f} s).")
                return self._cell(index, cell, kind)
            limit = min(limit, share_left)
        outputs = Outputs(self.budget, self.settings.cell_output_limit)
        extra = []
        began = time.monotonic()
        try:
            if kind == "test":
                verdict, message, extra = testing.run_test(self.kernel, self.channel, self.judge, cell.source,
                                                           key, limit, outputs)
                self.report.verdicts[key] = verdict
                if message:
                    self.report.messages[key] = message
            else:
                self.kernel.execute(cell.source, limit, outputs)
                if kind == "instructor":
                    self.judge.run_setup(cell.source, key)
        except (KernelDied, referee.GradingStopped) as error:
            why = death_reason(str(error), self.box, self.settings, self.kernel)
            if self._left() <= 0:  # it was stopped because the notebook's time ran out
                why = self._out_of_time()
            self._crash(index, cell, kind, key, section, label, why, outputs)
        finally:
            if kind == "test":
                self.spent[section] = self.spent.get(section, 0.0) + time.monotonic() - began
            cell.outputs = outputs.finish() + extra
        self._note_limits(cell, kind, outputs)

    def _note_limits(self, cell, kind, outputs):
        over_limits = self.channel.over_limits if self.channel is not None else []
        if any(o.get("ename") == "MemoryError" and not any(text in o.get("evalue", "") for text in over_limits)
               for o in cell.outputs):  # the sandbox's memory, not the grader's limit on a reference
            text = (f"a cell ran out of memory (the memory limit is "
                    f"{self.settings.limits.memory / sandbox.GiB:g} GiB per submission)")
            if text not in self.report.problems:
                self.report.problems.append(text)
        if outputs.timed_out and kind != "test" and self._left() <= 0:
            self._stop(self._out_of_time())
            cell.outputs.append(grader_error("TimeoutError", f"This cell was interrupted: {self.stop}."))
        elif outputs.timed_out and kind != "test":
            text = f"a cell ran past its time limit ({self.settings.cell_timeout:g} s) and was interrupted"
            cell.outputs.append(grader_error("TimeoutError", f"This cell ran past its time limit "
                                                             f"({self.settings.cell_timeout:g} s) and was interrupted."))
            if text not in self.report.problems:
                self.report.problems.append(text)


def execute_notebook(notebook, isolation, settings, reference, slot=0, home_files=None, name="submission",
                     probes=None):
    """Execute `notebook` in place, student cells in a sandboxed kernel; return a Report.

    `notebook` must come from the trusted assembly (autograder/judging/assemble.py): its nbgrader
    metadata says which cells are the instructor's. `reference` is `reference_cells()` of
    the instructor's notebook; `probes` (grade_id -> diagnosis.Probes) run for the functions
    that lose points."""
    execution = Execution(notebook, isolation, settings, reference, slot, home_files, name)
    execution.probes = probes or {}
    return execution.run()
