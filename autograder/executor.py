"""Execute a graded notebook from a trusted process, with its kernel in a sandbox.

The kernel (ipykernel) runs inside the sandbox (autograder/sandbox.py); this process
talks to it over unix sockets in the sandbox's /run/ipc, reached from outside through
/proc/PID/root. This process decides what runs, in which order, and how each test
ended; the kernel only executes.

* Before any student code, the kernel runs the guard (autograder/guard.py), which
  receives its configuration and a secret key on a pipe of its own.
* Student cells (solution cells and cells the student added) run as ordinary cells.
* Instructor cells (setup, helpers, tests) are never sent as code: the grader asks the
  guard to run cell K, and the guard runs the instructor's code, which it received
  before the student's code existed, and reports on another pipe, with messages signed
  by the key, whether the cell ran to its end. A test cell passes only on that signed
  report; what the kernel prints or answers can make a test fail, never pass.
* Outputs are capped as they arrive; each cell and the whole notebook have time limits;
  a kernel that stops answering, or uses too much, is killed with everything it started.
"""

import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import zmq
from jupyter_client.session import Session

from autograder import course_directory, sandbox

GUARD_SOURCE = (Path(__file__).with_name("guard.py")).read_text()

# What the kernel's environment holds: nothing of the grader's own environment.
KERNEL_ENV = {
    **course_directory.KERNEL_ENV,  # no RuntimeWarnings on stderr, a non-interactive matplotlib
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

# Modules whose attributes are put back before each instructor cell if student code
# changed them (besides the families the instructor's cells import): what libraries
# lean on while they run.
LIBRARY_FAMILIES = {"math", "inspect", "typing", "typing_extensions", "functools", "collections", "enum",
                    "warnings", "traceback", "linecache", "weakref", "abc", "dataclasses", "contextlib",
                    "copy", "operator", "numbers", "types", "importlib", "re", "json"}

MAX_MESSAGE = 4 * sandbox.MiB  # a bigger message from the kernel closes its connection


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


class GraderFault(RuntimeError):
    """Something went wrong on the grader's side (not the student's)."""


def trusted_prefixes():
    """Folders student code cannot write: native code and bytecode may load from there only."""
    roots = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)}
    return sorted(r.rstrip("/") + "/" for r in roots) + ["/usr/"]


# -- the verdict channel ---------------------------------------------------------------

class Verdicts:
    """Reads the guard's signed reports from its pipe; keeps only well-signed ones."""

    MAX_BYTES = 16 * sandbox.MiB
    MAX_LINE = sandbox.MiB

    def __init__(self, fd, key):
        self.fd, self.key = fd, key
        self.messages = {}  # nonce -> message; "ready" -> message
        self.rejected = 0
        self.condition = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        buffer, total = b"", 0
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                break
            if not data:
                break
            total += len(data)
            if total > self.MAX_BYTES:  # keep draining so the kernel never blocks, keep nothing
                self.rejected += 1
                buffer = b""
                continue
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                self._accept(line)
            if len(buffer) > self.MAX_LINE:
                self.rejected += 1
                buffer = b""
        with self.condition:
            self.condition.notify_all()

    def _accept(self, line):
        body, _, signature = line.rpartition(b"\t")
        expected = hmac.new(self.key, body, hashlib.sha256).hexdigest().encode()
        if not body or not hmac.compare_digest(signature, expected):
            self.rejected += 1
            return
        try:
            message = json.loads(body)
        except ValueError:
            self.rejected += 1
            return
        with self.condition:
            name = message.get("nonce") if message.get("type") == "verdict" else message.get("type")
            if name and name not in self.messages:
                self.messages[name] = message
            else:
                self.rejected += 1
            self.condition.notify_all()

    def wait(self, name, timeout):
        deadline = time.monotonic() + timeout
        with self.condition:
            while name not in self.messages:
                left = deadline - time.monotonic()
                if left <= 0 or not self.thread.is_alive():
                    return self.messages.get(name)
                self.condition.wait(min(left, 0.5))
            return self.messages[name]

    def close(self):
        try:
            os.close(self.fd)
        except OSError:
            pass


# -- the kernel ----------------------------------------------------------------------------

class Kernel:
    """One ipykernel in one sandbox, and the sockets to talk to it."""

    def __init__(self, box, settings, config, home_files=None):
        self.box, self.settings = box, settings
        self.session = Session(key=secrets.token_hex(32).encode(), signature_scheme="hmac-sha256",
                               username="grader")
        self.context = zmq.Context()
        self.sockets = {}
        self.stderr_tail = b""
        self.execution_count = 0
        self._start(config, home_files or {})

    def _start(self, config, home_files):
        box = self.box
        connection = {"transport": "ipc", "ip": box.inside(f"{sandbox.IPC}/kernel"),
                      "shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5,
                      "key": self.session.key.decode(), "signature_scheme": "hmac-sha256", "kernel_name": ""}
        files = {f"{sandbox.IPC}/kernel.json": box.file("kernel.json", json.dumps(connection).encode())}
        for name, data in home_files.items():
            files[f"{sandbox.HOME}/{name}"] = box.file(name, data)
        env = dict(KERNEL_ENV)
        env.update({k: box.inside(v) for k, v in SANDBOX_DIRS.items()})
        if box.isolation.sandboxed:
            env["PYTHONPATH"] = ""
        config_read, config_write = os.pipe()
        verdict_read, verdict_write = os.pipe()
        self.key = secrets.token_bytes(32)
        self.config_fd, self.verdict_fd = config_read, verdict_write
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", box.inside(f"{sandbox.IPC}/kernel.json"),
                "--HistoryManager.enabled=False", "--IPKernelApp.quiet=True"]
        err_read, err_write = os.pipe()
        try:
            box.popen(argv, files=files, env=env, pass_fds=(config_read, verdict_write),
                      stderr=err_write)
        finally:
            for fd in (config_read, verdict_write, err_write):
                os.close(fd)
        self.verdicts = Verdicts(verdict_read, self.key)
        threading.Thread(target=self._drain_stderr, args=(err_read,), daemon=True).start()
        payload = json.dumps({**config, "key": self.key.hex()}).encode()
        threading.Thread(target=self._write_config, args=(config_write, payload), daemon=True).start()
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

    @staticmethod
    def _write_config(fd, payload):
        try:
            while payload:
                payload = payload[os.write(fd, payload):]
        except OSError:
            pass
        finally:
            os.close(fd)

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
        return self.box.process is not None and self.box.process.poll() is None

    def send(self, channel, msg_type, content):
        message = self.session.msg(msg_type, content)
        try:
            self.session.send(self.sockets[channel], message)
        except zmq.ZMQError as error:
            raise KernelDied(f"the kernel stopped taking messages ({error})") from None
        return message["header"]["msg_id"]

    def receive(self, timeout):
        """The next message from shell, iopub or control: (channel, message) or None."""
        poller = zmq.Poller()
        for sock in self.sockets.values():
            poller.register(sock, zmq.POLLIN)
        poller.register(self.iopub_monitor, zmq.POLLIN)
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

    def execute(self, code, timeout, output, silent=False):
        """Run code; feed iopub messages to `output(message)`; return the reply content.

        Raises KernelDied when the kernel dies or must be killed."""
        msg_id = self.send("shell", "execute_request", {
            "code": code, "silent": silent, "store_history": not silent, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": False})
        deadline = time.monotonic() + timeout
        reply = None
        idle = False
        interrupted_at = replied_at = None
        disconnects = self.disconnects
        while reply is None or not idle:
            if not self.alive():
                raise KernelDied("the kernel died")
            now = time.monotonic()
            if replied_at is not None and now > replied_at + 5:
                break  # the idle status was lost with dropped output: the reply is what counts
            if now > deadline and interrupted_at is None:
                interrupted_at = now
                self.send("control", "interrupt_request", {})
                output({"msg_type": "timeout", "content": {}})
            if interrupted_at is not None and now > interrupted_at + 10:
                raise KernelDied(f"the cell ran past its time limit ({timeout:g} s) and could not be interrupted")
            got = self.receive(0.2)
            if got is None:
                continue
            channel, message = got
            if message is None or message["parent_header"].get("msg_id") != msg_id:
                continue
            if channel == "shell" and message["msg_type"] == "execute_reply":
                reply = message["content"]
                replied_at = time.monotonic()
            elif channel == "iopub":
                if message["msg_type"] == "status" and message["content"].get("execution_state") == "idle":
                    idle = True
                else:
                    output(message)
        if self.disconnects != disconnects or not idle:
            output({"msg_type": "lost", "content": {}})
        if interrupted_at is not None:
            reply = dict(reply, status="error", ename="TimeoutError",
                         evalue=f"the cell ran past its time limit ({timeout:g} s) and was interrupted")
        return reply

    def close(self):
        self.sockets["iopub"].disable_monitor()
        self.iopub_monitor.close(linger=0)
        for sock in self.sockets.values():
            sock.close(linger=0)
        self.context.term()
        self.box.kill()
        self.verdicts.close()


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


def imported_modules(sources):
    """Module names that `import` statements in the instructor's cells name."""
    import ast

    names = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
    return sorted(names)


@dataclass
class Report:
    verdicts: dict = field(default_factory=dict)  # test key -> "passed" | "failed" | "timeout" | "not run"
    notes: list = field(default_factory=list)  # tampering and refusals the guard saw
    problems: list = field(default_factory=list)  # what stopped the notebook (kernel died, time limit...)
    usage: dict = field(default_factory=dict)
    rejected_messages: int = 0


def execute_notebook(notebook, isolation, settings, slot=0, home_files=None, name="submission"):
    """Execute `notebook` in place in a sandboxed kernel; return a Report.

    `notebook` must come from the trusted assembly (autograder/assemble.py): its nbgrader
    metadata says which cells are the instructor's."""
    report = Report()
    plan = [(index, cell, cell_kind(cell)) for index, cell in enumerate(notebook.cells)]
    instructor = {cell_key(cell, i): [cell.source, kind == "test"] for i, cell, kind in plan
                  if kind in ("instructor", "test")}
    modules = imported_modules(source for source, _ in instructor.values())
    config = {
        "cells": instructor,
        "modules": modules,
        "families": sorted(({m.split(".")[0] for m in modules} | LIBRARY_FAMILIES) - {"sys", "os", "builtins"}),
        "cell_timeout": settings.cell_timeout,
        "trusted_prefixes": trusted_prefixes(),
    }
    budget = {"left": settings.notebook_output_limit}
    started = time.monotonic()
    for _, cell, kind in plan:
        if kind:
            cell.outputs = []
            cell.execution_count = None
    box = sandbox.Sandbox(isolation, settings.limits, slot=slot, name=name)
    kernel = None
    stop = ""
    try:
        kernel = Kernel(box, settings, config, home_files)
        kernel.wait_ready()
        bootstrap = (
            "__autograder_g__ = {'__builtins__': __import__('builtins').__dict__.copy(), "
            "'__name__': 'autograder_guard'}\n"
            f"exec(compile({GUARD_SOURCE!r}, '<autograder guard>', 'exec'), __autograder_g__)\n"
            f"__autograder_g__['_install']({kernel.config_fd}, {kernel.verdict_fd}, globals())\n"
            "del __autograder_g__\n")
        discard = Outputs({"left": 10_000}, 10_000)
        reply = kernel.execute(bootstrap, settings.startup_timeout, discard, silent=True)
        ready = kernel.verdicts.wait("ready", 30)
        if reply.get("status") != "ok" or ready is None:
            detail = reply.get("evalue") or kernel.stderr_tail.decode("utf-8", "replace")[-800:]
            raise GraderFault(f"the grader's guard did not start in the kernel: {reply.get('ename', '')} {detail}")
        for index, cell, kind in plan:
            if not kind:
                continue
            key = cell_key(cell, index)
            if stop:
                if kind == "test":
                    cell.outputs = [grader_error("NotRun", f"This test did not run: {stop}")]
                    report.verdicts[key] = "not run"
                continue
            left = settings.submission_timeout - (time.monotonic() - started)
            if left <= 0:
                stop = f"the notebook ran past its time limit ({settings.submission_timeout:g} s)"
                report.problems.append(stop)
                if kind == "test":
                    cell.outputs = [grader_error("NotRun", f"This test did not run: {stop}")]
                    report.verdicts[key] = "not run"
                continue
            outputs = Outputs(budget, settings.cell_output_limit)
            try:
                if kind == "student":
                    kernel.execute(cell.source, min(settings.cell_timeout, left), outputs)
                else:
                    nonce = uuid.uuid4().hex
                    code = f"__import__('sys').audit('autograder.run', {key!r}, {nonce!r})"
                    kernel.execute(code, min(settings.cell_timeout + 30, left), outputs)
                    message = kernel.verdicts.wait(nonce, 10)
                    _apply_verdict(cell, kind, key, message, outputs, report)
                    if message is not None and message.get("status") == "timeout":
                        stop = f"{key} ran past the time limit and the kernel had to be stopped"
                        report.problems.append(stop)
                        kernel.box.kill()
            except KernelDied as error:
                stop = _death_reason(str(error), box, settings)
                report.problems.append(stop)
                outputs.outputs.append(grader_error("KernelDied", stop))
                if kind == "test":
                    report.verdicts[key] = "failed"
            finally:
                cell.outputs = outputs.finish() + [o for o in cell.outputs if o.get("ename") == "NotRun"]
            if any(o.get("ename") == "MemoryError" for o in cell.outputs):
                text = (f"a cell ran out of memory (the memory limit is "
                        f"{settings.limits.memory / sandbox.GiB:g} GiB per submission)")
                if text not in report.problems:
                    report.problems.append(text)
            if outputs.timed_out and kind == "student":
                text = f"a cell ran past its time limit ({settings.cell_timeout:g} s) and was interrupted"
                cell.outputs.append(grader_error("TimeoutError", f"This cell ran past its time limit "
                                                                 f"({settings.cell_timeout:g} s) and was interrupted."))
                if text not in report.problems:
                    report.problems.append(text)
    except KernelDied as error:
        stop = _death_reason(str(error), box, settings)
        report.problems.append(stop)
        for index, cell, kind in plan:
            if kind == "test" and cell_key(cell, index) not in report.verdicts:
                cell.outputs = [grader_error("NotRun", f"This test did not run: {stop}")]
                report.verdicts[cell_key(cell, index)] = "not run"
    finally:
        report.usage = box.usage()
        if kernel is not None:
            report.rejected_messages = kernel.verdicts.rejected
            kernel.close()
        box.close()
    return report


def _apply_verdict(cell, kind, key, message, outputs, report):
    """Turn the guard's signed report into the cell's outcome."""
    # A test's own printed output stays; results it "returned" give no partial credit.
    outputs.outputs = [o for o in outputs.outputs if o.output_type != "execute_result"]
    if message is None:
        status = "failed"
        outputs.outputs.append(grader_error(
            "NoVerdict", "The grader received no report that this cell ran to its end, so it counts as "
                         "failed (was the kernel's execution changed by the notebook's code?)."))
    else:
        status = message.get("status", "failed")
        for text in message.get("notes", []):
            if text not in report.notes:
                report.notes.append(text)
        if status != "passed":
            outputs.outputs.append(nbformat.v4.new_output(
                "error", ename=str(message.get("ename", "Error")), evalue=str(message.get("evalue", "")),
                traceback=[str(t) for t in message.get("traceback", [])] or
                          [f"{message.get('ename')}: {message.get('evalue')}"]))
    cell.metadata["autograder"] = {"verdict": status}
    if kind == "test":
        report.verdicts[key] = status


def _death_reason(text, box, settings):
    usage = box.usage()
    if usage.get("oom_kills"):
        return (f"the kernel was stopped because it used more than its memory limit "
                f"({settings.limits.memory / sandbox.GiB:g} GiB)")
    return text
