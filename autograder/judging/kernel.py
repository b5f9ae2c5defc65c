"""One ipykernel in one sandbox, and the messages to and from it.

The kernel runs inside the sandbox (autograder/isolation/sandbox.py); this process talks
to it over unix sockets in the sandbox's /run/ipc, reached from outside through
/proc/PID/root. `Kernel.execute` runs code and hands each output message to a callback;
`Run` follows one execute_request to its end. A kernel that dies, or that must be
killed, raises KernelDied. Starting kernels ready to grade (the agent in them, a spare,
a factory) is autograder/judging/kernel_start.py's.
"""

import json
import os
import secrets
import socket
import sys
import threading
import time

import zmq
from jupyter_client.session import Session

from autograder.isolation import kernel_factory, sandbox
from autograder.judging import course_directory

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


class KernelDied(RuntimeError):
    pass


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
