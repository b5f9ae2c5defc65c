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
"""

import ast
import base64
import json
import os
import secrets
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import zmq
from jupyter_client.session import Session

from autograder.judging import course_directory, diagnosis, referee
from autograder.isolation import kernel_factory, sandbox
from autograder.judging.assemble import solution_code

# The agent and the codec it speaks live with the sandbox (autograder/isolation/).
ISOLATION = Path(__file__).resolve().parent.parent / "isolation"
AGENT_SOURCE = "\n".join((ISOLATION / name).read_text() for name in ("codec.py", "agent.py"))

# What the kernel's environment holds: nothing of the grader's own environment.
KERNEL_ENV = {
    **course_directory.KERNEL_ENV,  # a non-interactive matplotlib
    "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "COURSE_FORCE_CPU": "1",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}
SANDBOX_DIRS = {"TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib", "IPYTHONDIR": "/tmp/ipython",
                "JUPYTER_RUNTIME_DIR": "/tmp/jupyter", "JUPYTER_DATA_DIR": "/tmp/jupyter"}

MAX_MESSAGE = 4 * sandbox.MiB  # a bigger message from the kernel closes its connection
TEST_PRINT_LIMIT = 20_000  # characters of what a test cell prints, kept in its output


@dataclass
class Settings:
    cell_timeout: float = 120.0
    submission_timeout: float = 900.0
    startup_timeout: float = 120.0
    cell_output_limit: int = 100_000  # characters of text output kept per cell
    notebook_output_limit: int = 2_000_000  # bytes of output kept per notebook
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)


class KernelDied(RuntimeError):
    pass


DIAGNOSIS_FAILED = ("The diagnosis of the functions that lost points could not be made ({error}); "
                    "the grade stands, and no known mistake is named.")


def short_error(error):
    """`Type: message`, at most 200 characters, for a note."""
    return f"{type(error).__name__}: {error}"[:200]


class GraderFault(RuntimeError):
    """Something went wrong on the grader's side (not the student's)."""


# -- the kernel ----------------------------------------------------------------------------

class Kernel:
    """One ipykernel in one sandbox, and the sockets to talk to it."""

    def __init__(self, box, settings, factory=None):
        self.box, self.settings, self.factory = box, settings, factory
        self.process = None  # the kernel: bubblewrap's Popen, or a kernel_factory.Forked
        self.session = Session(key=secrets.token_hex(32).encode(), signature_scheme="hmac-sha256",
                               username="grader")
        self.context = zmq.Context()
        self.sockets = {}
        self.stderr_tail = b""
        try:
            self._start()
        except BaseException:
            for sock in self.sockets.values():
                sock.close(linger=0)
            self.context.term()
            if getattr(self, "agent_socket", None) is not None:
                self.agent_socket.close()
            raise

    def _start(self):
        box = self.box
        connection = {"transport": "ipc", "ip": box.inside(f"{sandbox.IPC}/kernel"),
                      "shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5,
                      "key": self.session.key.decode(), "signature_scheme": "hmac-sha256", "kernel_name": ""}
        files = {f"{sandbox.IPC}/kernel.json": box.file("kernel.json", json.dumps(connection).encode())}
        env = dict(KERNEL_ENV)
        env.update({k: box.inside(v) for k, v in SANDBOX_DIRS.items()})
        if box.isolation.sandboxed:
            env["PYTHONPATH"] = ""
        # The agent's socket: the kernel keeps one end (same number inside), we the other.
        self.agent_socket, inside = socket.socketpair()
        self.agent_fd = inside.fileno()
        arguments = ["-f", box.inside(f"{sandbox.IPC}/kernel.json"), "--HistoryManager.enabled=False",
                     "--IPKernelApp.quiet=True"]
        err_read, err_write = os.pipe()
        try:
            if self.factory is None:
                self.process = box.popen([sys.executable, "-m", "ipykernel_launcher", *arguments], files=files,
                                         env=env, pass_fds=(self.agent_fd,), stderr=err_write)
            else:
                # The sandbox around a placeholder, then a kernel forked into it.
                box.popen(["sleep", "infinity"], files=files, env=env)
                request = {**box.joining(env), "kernel_args": arguments}
                self.process = self.factory.spawn(box.child_pid, request, err_write, self.agent_fd)
        except BaseException:
            os.close(err_read)
            raise
        finally:
            os.close(err_write)
            inside.close()
        threading.Thread(target=self._drain_stderr, args=(err_read,), daemon=True).start()
        self.prefix = box.root_path(f"{sandbox.IPC}/kernel") if box.isolation.sandboxed else connection["ip"]
        for name, kind, port in (("shell", zmq.DEALER, 1), ("iopub", zmq.SUB, 2), ("control", zmq.DEALER, 4)):
            self.sockets[name] = self._connect(kind, port)
        self.iopub_monitor = None
        self.disconnects = 0
        self._watch_iopub()

    def _connect(self, kind, port):
        sock = self.context.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        sock.setsockopt(zmq.RCVHWM, 64)
        sock.setsockopt(zmq.SNDTIMEO, 2000)  # a kernel that stops reading must not block us
        if kind == zmq.SUB:
            sock.setsockopt(zmq.SUBSCRIBE, b"")
        sock.connect(f"ipc://{self.prefix}-{port}")
        return sock

    def _watch_iopub(self):
        """A message over MAX_MESSAGE closes the iopub connection: notice it, to reconnect
        and to tell the student that output was dropped."""
        if self.iopub_monitor is not None:
            self.iopub_monitor.close(linger=0)
        self.iopub_monitor = self.sockets["iopub"].get_monitor_socket(zmq.EVENT_DISCONNECTED)

    def _reconnect_iopub(self):
        self.sockets["iopub"].disable_monitor()
        self.sockets["iopub"].close(linger=0)
        self.sockets["iopub"] = self._connect(zmq.SUB, 2)
        self._watch_iopub()

    def _drain_stderr(self, fd):
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            self.stderr_tail = (self.stderr_tail + data)[-4000:]
        os.close(fd)

    def alive(self):
        return (self.box.process is not None and self.box.process.poll() is None
                and self.process is not None and self.process.poll() is None)

    def send(self, channel, msg_type, content):
        message = self.session.msg(msg_type, content)
        try:
            self.session.send(self.sockets[channel], message)
        except zmq.ZMQError as error:
            raise KernelDied(f"the kernel stopped taking messages ({error})") from None
        return message["header"]["msg_id"]

    def receive(self, timeout, fd=None):
        """The next message from shell, iopub or control: (channel, message); ("fd", None)
        when `fd` is readable first; None when nothing came within `timeout` seconds."""
        poller = zmq.Poller()
        for sock in self.sockets.values():
            poller.register(sock, zmq.POLLIN)
        poller.register(self.iopub_monitor, zmq.POLLIN)
        if fd is not None:
            poller.register(fd, zmq.POLLIN)
        ready = dict(poller.poll(max(0, int(timeout * 1000))))
        if self.iopub_monitor in ready:
            try:
                self.iopub_monitor.recv_multipart(zmq.NOBLOCK)
                self.disconnects += 1
            except zmq.ZMQError:
                pass
            self._reconnect_iopub()
            return None
        for name, sock in self.sockets.items():
            if sock in ready:
                try:
                    _, parts = self.session.feed_identities(sock.recv_multipart(zmq.NOBLOCK))
                    return name, self.session.deserialize(parts, content=True)
                except (zmq.ZMQError, ValueError, KeyError, TypeError):
                    return name, None
        if fd is not None and fd in ready:
            return "fd", None
        return None

    def wait_ready(self):
        """Wait until the kernel answers on shell and its iopub messages reach us."""
        deadline = time.monotonic() + self.settings.startup_timeout
        msg_id = self.send("shell", "kernel_info_request", {})
        replied = flowing = False
        while not (replied and flowing):
            if not self.alive():
                raise KernelDied("the kernel did not start: " + self.stderr_tail.decode("utf-8", "replace")[-1500:])
            if time.monotonic() > deadline:
                raise KernelDied(f"the kernel did not start within {self.settings.startup_timeout:g} s")
            got = self.receive(0.2)
            if got is None:
                if replied and not flowing:  # iopub may have joined late: ask again
                    msg_id = self.send("shell", "kernel_info_request", {})
                continue
            channel, message = got
            if message is None or message["parent_header"].get("msg_id") != msg_id:
                continue
            if channel == "shell":
                replied = True
            elif channel == "iopub":
                flowing = True

    def start(self, code, output, silent=False):
        """Send code to run; return the Run that follows it."""
        msg_id = self.send("shell", "execute_request", {
            "code": code, "silent": silent, "store_history": not silent, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": False})
        return Run(self, msg_id, output)

    def execute(self, code, timeout, output, silent=False):
        """Run code; feed iopub messages to `output(message)`; return the reply content.

        Raises KernelDied when the kernel dies or must be killed."""
        run = self.start(code, output, silent)
        deadline = time.monotonic() + timeout
        interrupted_at = None
        while not run.done():
            now = time.monotonic()
            if now > deadline and interrupted_at is None:
                interrupted_at = now
                self.interrupt()
                output({"msg_type": "timeout", "content": {}})
            if interrupted_at is not None and now > interrupted_at + 10:
                raise KernelDied(f"the cell ran past its time limit ({timeout:g} s) and could not be interrupted")
            run.pump(0.2)
        reply = run.finish()
        if interrupted_at is not None:
            reply = dict(reply, status="error", ename="TimeoutError",
                         evalue=f"the cell ran past its time limit ({timeout:g} s) and was interrupted")
        return reply

    def interrupt(self):
        self.send("control", "interrupt_request", {})

    def close(self):
        self.sockets["iopub"].disable_monitor()
        self.iopub_monitor.close(linger=0)
        for sock in self.sockets.values():
            sock.close(linger=0)
        self.context.term()
        self.box.kill()
        if isinstance(self.process, kernel_factory.Forked):
            self.process.close()
        self.agent_socket.close()


class Run:
    """One execute_request: its outputs as they come, and its end (the reply, then idle)."""

    def __init__(self, kernel, msg_id, output):
        self.kernel, self.msg_id, self.output = kernel, msg_id, output
        self.reply = None
        self.idle = False
        self.replied_at = None
        self.disconnects = kernel.disconnects

    def done(self):
        if self.reply is None:
            return False
        # the idle status may be lost with dropped output: the reply is what counts
        return self.idle or time.monotonic() > self.replied_at + 5

    def pump(self, timeout, fd=None):
        """Handle the kernel's messages for up to `timeout` s; True as soon as `fd` is readable."""
        if not self.kernel.alive():
            raise KernelDied("the kernel died")
        got = self.kernel.receive(timeout, fd)
        if got is None:
            return False
        channel, message = got
        if channel == "fd":
            return True
        if message is None or message["parent_header"].get("msg_id") != self.msg_id:
            return False
        if channel == "shell" and message["msg_type"] == "execute_reply":
            self.reply = message["content"]
            self.replied_at = time.monotonic()
        elif channel == "iopub":
            if message["msg_type"] == "status" and message["content"].get("execution_state") == "idle":
                self.idle = True
            elif message["msg_type"] != "status":
                self.output(message)
        return False

    def finish(self):
        if self.kernel.disconnects != self.disconnects or not self.idle:
            self.output({"msg_type": "lost", "content": {}})
        return self.reply


# -- output, capped ------------------------------------------------------------------------

class Outputs:
    """Collects a cell's outputs from iopub messages, within the cell's and notebook's caps."""

    def __init__(self, budget, cell_limit):
        self.outputs = []
        self.budget = budget  # shared dict: {"left": bytes left for the notebook}
        self.cell_left = cell_limit
        self.dropped = 0
        self.lost = False
        self.timed_out = False

    def _take(self, size):
        if size > self.budget["left"]:
            self.dropped += size
            return False
        self.budget["left"] -= size
        return True

    def __call__(self, message):
        kind, content = message["msg_type"], message.get("content", {})
        if kind == "timeout":
            self.timed_out = True
        elif kind == "lost":
            self.lost = True
        elif kind == "stream":
            text = str(content.get("text", ""))
            keep = text[: max(0, self.cell_left)]
            self.dropped += len(text) - len(keep)
            if keep and self._take(len(keep)):
                self.cell_left -= len(keep)
                name = "stderr" if content.get("name") == "stderr" else "stdout"
                if self.outputs and self.outputs[-1].output_type == "stream" and self.outputs[-1].name == name:
                    self.outputs[-1].text += keep
                else:
                    self.outputs.append(nbformat.v4.new_output("stream", name=name, text=keep))
        elif kind in ("display_data", "execute_result", "error"):
            size = len(json.dumps(content))
            if not self._take(size):
                return
            try:
                if kind == "error":
                    output = nbformat.v4.new_output("error", ename=str(content.get("ename", ""))[:500],
                                                    evalue=str(content.get("evalue", ""))[:5000],
                                                    traceback=[str(t)[:5000] for t in content.get("traceback", [])][:100])
                elif kind == "display_data":
                    output = nbformat.v4.new_output("display_data", data=content.get("data", {}),
                                                    metadata=content.get("metadata", {}))
                else:
                    output = nbformat.v4.new_output("execute_result", data=content.get("data", {}),
                                                    metadata=content.get("metadata", {}),
                                                    execution_count=content.get("execution_count"))
                nbformat.validate(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[output])]))
            except Exception:
                self.dropped += size
                return
            self.outputs.append(output)
        elif kind == "clear_output":
            self.outputs = []

    def finish(self):
        if self.dropped or self.lost:
            amount = f"{self.dropped} characters of " if self.dropped and not self.lost else ""
            self.outputs.append(nbformat.v4.new_output(
                "stream", name="stdout", text=f"\n[the grader dropped {amount}output beyond its limits]\n"))
        return self.outputs


# -- a whole notebook --------------------------------------------------------------------

def grader_error(ename, evalue, traceback=None):
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                  traceback=traceback or [f"{ename}: {evalue}"])


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


BOOTSTRAP = """\
__autograder_agent__ = {{"__name__": "autograder_agent", "__builtins__": __builtins__}}
exec(compile({source!r}, "<autograder agent>", "exec"), __autograder_agent__)
__autograder_agent__["start"]({fd}, globals())
del __autograder_agent__
"""


HOME_FILES = """\
import base64 as __autograder_b64__
for __autograder_name__, __autograder_data__ in {files!r}.items():
    with open(__autograder_name__, "wb") as __autograder_file__:
        __autograder_file__.write(__autograder_b64__.b64decode(__autograder_data__))
del __autograder_b64__, __autograder_name__, __autograder_data__, __autograder_file__
"""


# PyTorch loads its meta-device machinery (some 300 modules, over a second of CPU) on
# first use, and the tests use the meta device to catch tensors made on the wrong
# device: load it while the kernel waits, not while a test runs.
WARM_TORCH = """\
try:
    torch.nn.functional.linear(torch.empty(1, 1, device="meta"), torch.empty(1, 1, device="meta"))
except Exception:
    pass
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


class Factories:
    """A grading worker's kernel factories (autograder/isolation/kernel_factory.py), one per set of
    preloaded libraries, started on first use. A factory that fails is not used again:
    kernels then start from nothing, as without one."""

    def __init__(self):
        self.factories, self.broken = {}, ""

    def get(self, isolation, preload):
        if self.broken or not (isolation.sandboxed and isolation.as_root):
            return None
        key = tuple(preload)
        if key not in self.factories:
            env = {**KERNEL_ENV, "PYTHONPATH": ""}
            self.factories[key] = kernel_factory.KernelFactory(key, env, timeout=120)
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
            code += WARM_TORCH
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


MAX_RESTARTS = 3  # fresh kernels after a crash, per notebook


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


class Execution:
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
        return imported_modules(source for source, solution in self.reference if not solution)

    def _open(self, first):
        preload = self._preload()
        if first and SPARE is not None:
            self.box, self.kernel = SPARE.take(self.isolation, self.settings, self.slot, preload)
        else:
            self.box, self.kernel = start_kernel(self.isolation, self.settings, self.slot,
                                                 self.name if first else f"{self.name}-restart{self.restarts}",
                                                 preload)
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
                    self.report.probed = diagnosis.probe_submission(self, self.probes)
                except Exception as error:  # the verdicts are in: a fault here never changes them
                    self.report.notes.append(DIAGNOSIS_FAILED.format(error=short_error(error)))
        except KernelDied as error:  # no kernel could be started
            self._stop(_death_reason(str(error), self.box, self.settings))
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
                self.report.problems.append(_death_reason(str(error), self.box, self.settings)
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
                verdict, message, extra = run_test(self.kernel, self.channel, self.judge, cell.source, key,
                                                   limit, outputs)
                self.report.verdicts[key] = verdict
                if message:
                    self.report.messages[key] = message
            else:
                self.kernel.execute(cell.source, limit, outputs)
                if kind == "instructor":
                    self.judge.run_setup(cell.source, key)
        except (KernelDied, referee.GradingStopped) as error:
            why = _death_reason(str(error), self.box, self.settings, self.kernel)
            if self._left() <= 0:  # it was stopped because the notebook's time ran out
                why = self._out_of_time()
            self._crash(index, cell, kind, key, section, label, why, outputs)
        finally:
            if kind == "test":
                self.spent[section] = self.spent.get(section, 0.0) + time.monotonic() - began
            cell.outputs = outputs.finish() + extra
        self._note_limits(cell, kind, outputs)

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


def run_test(kernel, channel, judge, source, key, timeout, outputs):
    """Run one test cell here, its calls answered by the kernel's agent.

    Returns (verdict, message, outputs to add: what the test printed, its error)."""
    token = uuid.uuid4().hex

    def from_kernel(message):
        """What the student's code printed while the test ran: shown, never held against it."""
        kind = message["msg_type"]
        if kind == "error":
            return  # the test's own message says what failed
        if kind == "stream":
            message = {**message, "content": {**message["content"], "name": "stdout"}}
        outputs(message)

    run = kernel.start(f"__autograder__.serve({token!r})", from_kernel, silent=True)

    def pump(seconds, fd):
        ready = run.pump(seconds, fd)
        channel.ended = run.reply is not None
        return ready

    channel.pump = pump
    channel.begin(token, time.monotonic() + timeout)
    try:
        passed, ename, evalue, printed = judge.run_test(source, key)
    finally:
        channel.finish()
    _wait_for_end(kernel, run)
    extra = []
    if printed:
        extra.append(nbformat.v4.new_output("stream", name="stdout", text=printed[:TEST_PRINT_LIMIT]))
    if passed:
        return "passed", "", extra
    extra.append(grader_error(ename, evalue))
    return "failed", f"{ename}: {evalue}", extra


def _wait_for_end(kernel, run):
    """The agent's cell ends once told; a kernel that does not end it is interrupted, then stopped."""
    deadline = time.monotonic() + 10
    interrupted = False
    while not run.done():
        if time.monotonic() > deadline:
            if interrupted:
                raise referee.GradingStopped("the kernel did not return from a test and did not stop when "
                                             "interrupted")
            kernel.interrupt()
            interrupted, deadline = True, time.monotonic() + 10
        run.pump(0.2)
    run.finish()


def _death_reason(text, box, settings, kernel=None):
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
            return _death_reason(text, box, settings)
        return "the kernel died (its process ended: an exit, a crash or a signal)"
    return text
