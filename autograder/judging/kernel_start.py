"""Kernels ready to grade a notebook: started in a fresh sandbox (forked from a kernel
factory where a grading worker has one), waited for, the grader's agent started in them
and the instructor's libraries imported before any student code. A grading worker also
keeps a Spare: the next submission's kernel, started while this one is graded.
"""

import ast
import json
import os
import sys
import threading
from pathlib import Path

from autograder.isolation import kernel_factory, sandbox
from autograder.judging.kernel import KERNEL_ENV, Kernel, KernelDied
from autograder.judging.outputs import Outputs

# The agent and the codec it speaks live with the sandbox (autograder/isolation/).
ISOLATION = Path(__file__).resolve().parent.parent / "isolation"
AGENT_SOURCE = "\n".join((ISOLATION / name).read_text() for name in ("codec.py", "agent.py"))


class GraderFault(RuntimeError):
    """Something went wrong on the grader's side (not the student's)."""


BOOTSTRAP = """\
__autograder_agent__ = {{"__name__": "autograder_agent", "__builtins__": __builtins__}}
exec(compile({source!r}, "<autograder agent>", "exec"), __autograder_agent__)
__autograder_agent__["start"]({fd}, globals())
del __autograder_agent__
"""


def imported_modules(sources):
    """Top-level modules that `import` statements in the instructor's cells name."""
    names = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return sorted(names)


FACTORY_ENV = {**KERNEL_ENV, "PYTHONPATH": ""}
# Where a batch's factories are (autograder/grade.py): JSON, [{"address", "preload"}].
BATCH_FACTORIES = "AUTOGRADER_KERNEL_FACTORIES"


def instructor_preload(notebook):
    """What a kernel imports for `notebook` before any student code: the modules that its
    instructor's code cells import (locked, neither answers nor tests: the cells that
    executor.reference_cells keeps as the instructor's), without importing the executor."""
    sources = []
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("locked") and not meta.get("grade") and not meta.get("solution"):
            sources.append(cell.source)
    return imported_modules(sources)


class Factories:
    """A grading worker's kernel factories (autograder/isolation/kernel_factory.py), one per set of
    preloaded libraries: the batch's, which every worker of a batch shares (so PyTorch is
    imported, and its meta device warmed, once per batch rather than once per worker),
    or one of its own, started on first use. A factory that fails is not used again:
    kernels then start from nothing, as without one."""

    def __init__(self):
        self.factories, self.broken = {}, ""
        try:
            shared = json.loads(os.environ.get(BATCH_FACTORIES) or "[]")
            self.batch = {tuple(f["preload"]): f["address"] for f in shared}
        except (ValueError, TypeError, KeyError):
            self.batch = {}

    def get(self, isolation, preload):
        if self.broken or not (isolation.sandboxed and isolation.as_root):
            return None
        key = tuple(preload)
        if key not in self.factories:
            self.factories[key] = kernel_factory.KernelFactory(key, FACTORY_ENV, timeout=120,
                                                               address=self.batch.get(key))
        return self.factories[key]

    def fail(self, error):
        self.broken = str(error)
        sys.stderr.write(f"kernel factory failed, kernels start from nothing from now on: {error}\n")
        self.close()

    def close(self):
        for factory in self.factories.values():
            factory.close()
        self.factories = {}


FACTORIES = None  # a grading worker sets Factories here; elsewhere kernels start from nothing


def start_batch_factories(preloads):
    """The kernel factories of a batch, one per set of libraries in `preloads` (what the
    instructor's cells of each notebook import), started now, while the workers start:
    ([factories], the value of BATCH_FACTORIES for the workers, or None). None where no
    kernel can be forked (not root, or no bubblewrap); a factory that does not start is
    found out by the workers, whose kernels then start from nothing."""
    import shutil

    if os.geteuid() != 0 or shutil.which("bwrap") is None:
        return [], None
    factories = []
    for preload in dict.fromkeys(tuple(p) for p in preloads):
        factory = kernel_factory.KernelFactory(preload, FACTORY_ENV, timeout=120, serve_workers=True)
        try:
            factory.start()
        except OSError as error:
            sys.stderr.write(f"the batch's kernel factory did not start, each worker starts its own: {error}\n")
            factory.close()
            continue
        factories.append(factory)
    shared = [{"address": f.address, "preload": list(f.preload)} for f in factories]
    return factories, json.dumps(shared) if shared else None


def launch_kernel(isolation, settings, slot, name, preload=()):
    """(sandbox, kernel) just started. Call it from a thread that outlives the kernel:
    bubblewrap, and the kernel factory, die with the thread that started them."""
    factory = FACTORIES.get(isolation, preload) if FACTORIES is not None else None
    box = sandbox.Sandbox(isolation, settings.limits, slot=slot, name=name)
    try:
        return box, Kernel(box, settings, factory)
    except (kernel_factory.FactoryFailed, OSError) as error:
        box.close()
        if factory is None:
            raise
        FACTORIES.fail(error)
        return launch_kernel(isolation, settings, slot, name, preload)
    except BaseException:
        box.close()
        raise


def prepare_kernel(box, kernel, settings, preload=()):
    """Wait for a launched kernel; start the grader's agent in it and import the libraries
    the instructor's cells import (before any student code)."""
    try:
        kernel.wait_ready()
        code = BOOTSTRAP.format(source=AGENT_SOURCE, fd=kernel.agent_fd)
        code += "".join(f"try:\n    import {module}\nexcept Exception:\n    pass\n" for module in preload
                        if module.isidentifier())
        if "torch" in preload:
            code += kernel_factory.WARM_TORCH  # free in a kernel forked from a factory
        reply = kernel.execute(code, settings.startup_timeout, Outputs({"left": 10_000}, 10_000), silent=True)
        if reply.get("status") != "ok":
            detail = reply.get("evalue") or kernel.stderr_tail.decode("utf-8", "replace")[-800:]
            raise GraderFault(f"the grader's agent did not start in the kernel: {reply.get('ename', '')} {detail}")
    except BaseException:
        kernel.close()
        box.close()
        raise
    return box, kernel


def start_kernel(isolation, settings, slot, name, preload=()):
    """(sandbox, kernel) ready to run a notebook."""
    box, kernel = launch_kernel(isolation, settings, slot, name, preload)
    try:
        return prepare_kernel(box, kernel, settings, preload)
    except KernelDied as error:
        if not isinstance(kernel.process, kernel_factory.Forked):
            raise
        # A forked kernel that does not start is the factory's fault, not the student's:
        # this worker's kernels start from nothing from now on.
        FACTORIES.fail(error)
        box, kernel = launch_kernel(isolation, settings, slot, name, preload)
        return prepare_kernel(box, kernel, settings, preload)


class Spare:
    """The next submission's kernel, started while this one is graded.

    A grading worker grades one submission after another; starting a kernel (a sandbox,
    Python, ipykernel, NumPy and PyTorch) is a good part of each. With a Spare, the
    kernel of the next submission starts in the background as soon as the current one
    has taken its own. Each kernel is used once: a spare has run no student code."""

    def __init__(self):
        self.thread = None
        self.key = None
        self.ready = None  # (box, kernel) or the exception its start raised

    def take(self, isolation, settings, slot, preload):
        key = (isolation, repr(settings), slot, tuple(preload))
        ready = None
        if self.thread is not None:
            self.thread.join()
            ready, self.thread = self.ready, None
            if self.key != key or isinstance(ready, BaseException):
                self._discard(ready)
                ready = None
        if ready is None:
            ready = start_kernel(isolation, settings, slot, "kernel", preload)
        self.key, self.ready = key, None
        try:
            launched = launch_kernel(isolation, settings, slot, "spare", preload)  # in this thread, which stays
        except Exception as error:  # that submission will start its own
            self.ready = error
        else:
            self.thread = threading.Thread(target=self._prepare, args=(launched, settings, preload), daemon=True)
            self.thread.start()
        return ready

    def _prepare(self, launched, settings, preload):
        try:
            self.ready = prepare_kernel(*launched, settings, preload)
        except BaseException as error:  # reported when taken: that submission starts its own
            self.ready = error

    @staticmethod
    def _discard(ready):
        if isinstance(ready, tuple):
            box, kernel = ready
            kernel.close()
            box.close()

    def close(self):
        if self.thread is not None:
            self.thread.join()
        self._discard(self.ready)
        self.thread, self.ready = None, None


SPARE = None  # a grading worker sets a Spare here; elsewhere each notebook starts its kernel
