"""A kernel that died or was stopped while the notebook ran: why, what it costs, and
a fresh kernel for what follows.

A crash (the kernel exits or is killed for memory, or a cell cannot be interrupted)
fails the test that was running and the rest of its function's tests; a student cell
that crashes is not run again. The next function's tests run in a fresh kernel where
the notebook's cells before them have run again, at most MAX_RESTARTS times.
`AfterCrash` is the part of autograder/judging/executor.py's Execution that does this.
"""

import time

from autograder.isolation import sandbox
from autograder.judging.kernel import KernelDied
from autograder.judging.outputs import Outputs, grader_error

MAX_RESTARTS = 3  # fresh kernels after a crash, per notebook


class AfterCrash:
    """Execution's handling of a crash (it provides _open, _close, _left, _stop, the plan,
    the report and the state these methods keep)."""

    def _restart(self, upto):
        """A fresh kernel holding what the notebook's cells before `upto` define."""
        self._close()
        self.restarts += 1
        self._open(first=False)
        for index, cell, kind in self.plan[:upto]:
            if kind in ("student", "instructor") and index not in self.crashed_cells:
                left = self._left()
                if left <= 0:
                    raise KernelDied(self._out_of_time())
                try:
                    self.kernel.execute(cell.source, min(self.settings.cell_timeout, left),
                                        Outputs({"left": 0}, 0), silent=True)
                except KernelDied:
                    self.crashed_cells.add(index)
                    raise

    def _crash(self, index, cell, kind, key, section, label, why, outputs):
        """The kernel is gone (or stuck) while `cell` ran: what it costs, and no more."""
        self._close()
        if self._left() <= 0:  # the notebook's time is over: nothing more runs
            self._stop(why)
            outputs.outputs.append(grader_error("TimeoutError", f"{why}."))
            if kind == "test":
                self.report.verdicts[key], self.report.messages[key] = "failed", f"{why}."
            return
        if kind == "test":
            where = f"while {label} was tested" if label else "during a test"
            self.dead[section] = (f"This test did not run: {why} {where} (in {key}), so the remaining tests of "
                                  f"{label or 'this function'} were not run.")
            text = f"{why} {where} ({key}); the tests of other functions ran in a fresh kernel"
            self.report.verdicts[key] = "failed"
            self.report.messages[key] = f"{why} {where}."
            outputs.outputs.append(grader_error("KernelDied", f"{why} {where}."))
        else:
            self.crashed_cells.add(index)
            where = f"your answer cell {key}" if cell.metadata.get("nbgrader", {}).get("solution") else \
                f"cell {index + 1} (counting from 1)"
            text = f"{why} in {where}; the notebook went on in a fresh kernel without that cell"
            outputs.outputs.append(grader_error("KernelDied", f"{why}. The notebook went on without this cell."))
        self.report.problems.append(text)


def death_reason(text, box, settings, kernel=None):
    """Why the kernel stopped, in words for the student: its memory limit, an end of its
    own, or `text` (what the grader saw: a time limit, a kernel that did not stop)."""
    usage = box.usage() if box is not None else {}  # None: the kernel never started
    if usage.get("oom_kills"):
        return (f"the kernel was stopped because it used more than its memory limit "
                f"({settings.limits.memory / sandbox.GiB:g} GiB)")
    if kernel is not None and "did not stop" not in text:
        ending = time.monotonic() + 2  # a process that closed its sockets may take a moment to end
        while kernel.alive() and time.monotonic() < ending:
            time.sleep(0.05)
    if kernel is not None and not kernel.alive() and "did not stop" not in text:
        time.sleep(0.2)  # the cgroup counts an out-of-memory kill a moment after the process ends
        if box.usage().get("oom_kills"):
            return death_reason(text, box, settings)
        return "the kernel died (its process ended: an exit, a crash or a signal)"
    return text
