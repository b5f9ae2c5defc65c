"""The grader's own work for a submission, done within stated limits.

While a test runs, the student's code may ask the grader for work whose size it
chooses: a reference answer of another graded function (`causal_mask(32000)` is a
gigabyte), or a function the test handed to it (the `f` of a numerical gradient). That
work runs on the grader's side, outside the sandbox, so it must be bounded like the
student's own: it runs in a `Server`, a child forked from the grading worker, with an
address-space limit of `Limits.memory` bytes beyond what the worker held when it forked
and a time limit of `Limits.seconds` per call. The child answers calls one after
another as plain values (autograder/isolation/codec.py); a call over a limit raises MemoryError
or TimeoutError here, which fails the student's call (and so the test), and the child
is replaced by a fresh one for the next call.

A fork costs some ten milliseconds of a worker's time, too much for each of the hundred
calls a numerical gradient makes, so a server lives for one test cell. The child shares
the worker's memory copy-on-write: the reference functions and the test's own functions
are there without being sent, and `resolve(name)` finds them.
"""

import contextlib
import io
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import warnings
from dataclasses import dataclass

from autograder.isolation import codec

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    memory: int = 1024 * MiB  # bytes of address space beyond what the worker holds at the fork
    seconds: float = 30.0  # wall-clock seconds of one call


def status_bytes(field):
    """A size of this process from /proc/self/status, in bytes ("VmSize", "VmRSS"); 0 if absent."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    return 0


def _read_frame(sock):
    """One frame's body from a blocking socket; None at its end."""
    head = _read_exactly(sock, 8)
    if head is None:
        return None
    (size,) = struct.unpack("<Q", head)
    if size > codec.MAX_FRAME:
        return None
    return _read_exactly(sock, size)


def _read_exactly(sock, size):
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _serve(sock, resolve, limits):
    """In the forked child: answer calls until the grader closes the socket (never returns)."""
    try:
        # A thread pool the parent used is not in the child: an OpenMP parallel region
        # there waits for threads that do not exist. One thread runs no such region.
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = status_bytes("VmSize") + limits.memory
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
        while True:
            body = _read_frame(sock)
            if body is None:
                break
            try:
                request = codec.unpack(body)
                function = resolve(request["name"])
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                        warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    value = function(*request["args"], **request["kwargs"])
                frame = codec.pack({"value": value})
            except BaseException as error:  # noqa: BLE001 (whatever it was, it is the answer)
                try:
                    frame = codec.pack({"error": error})
                except BaseException:
                    frame = codec.pack({"error": RuntimeError("the answer could not be sent")})
            sock.sendall(frame)
    finally:
        os._exit(0)


class Server:
    """A child of this process that computes `resolve(name)(*args, **kwargs)` on request,
    within `limits`. `resolve` runs in the child, on its copy of this process's state."""

    def __init__(self, resolve, limits):
        self.limits = limits
        ours, theirs = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:
            ours.close()
            _serve(theirs, resolve, limits)
        theirs.close()
        self.sock = ours

    @property
    def alive(self):
        return self.sock is not None

    def call(self, name, args, kwargs, label, deadline=None):
        """The value, or the exception the call raised (rebuilt from its type and message).
        Over a limit: MemoryError or TimeoutError naming `label`, and the server is closed.
        `deadline` (time.monotonic()) can shorten the time."""
        try:
            request = codec.pack({"name": name, "args": list(args), "kwargs": dict(kwargs)})
        except TypeError:
            raise RuntimeError(f"{label} takes arrays, tensors and numbers; your code passed it an object of "
                               f"its own") from None
        stop = time.monotonic() + self.limits.seconds
        test_time = deadline is not None and deadline < stop
        stop = min(stop, deadline) if test_time else stop
        self.sock.sendall(request)
        data = bytearray()
        while len(data) < 8 or len(data) < 8 + struct.unpack_from("<Q", data)[0]:
            left = stop - time.monotonic()
            if left <= 0:
                self.close()
                raise TimeoutError(f"{label} ran past its time limit "
                                   + ("(the test's time ran out)" if test_time else f"({self.limits.seconds:g} s)")
                                   + " for the arguments your code gave it")
            if not select.select([self.sock], [], [], min(left, 1.0))[0]:
                continue
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                status = self.close()
                how = f" (signal {os.WTERMSIG(status)})" if status and os.WIFSIGNALED(status) else ""
                raise MemoryError(f"{label} stopped before it answered{how}: it ran out of its memory limit "
                                  f"({self.limits.memory // MiB} MiB) for the arguments your code gave it")
            data += chunk
            if len(data) > codec.MAX_FRAME + 8:
                self.close()
                raise MemoryError(f"{label} made an answer too large to send for the arguments your code gave it")
        message = codec.unpack(memoryview(data)[8:])
        if "error" in message:
            error = message["error"]
            if getattr(error, "remote_type", "") == "MemoryError" or "can't allocate memory" in str(error):
                self.close()  # its heap may be in pieces: the next call gets a fresh one
                raise MemoryError(f"{label} needs more than its memory limit ({self.limits.memory // MiB} MiB) "
                                  f"for the arguments your code gave it")
            raise error
        return message.get("value")

    def close(self):
        """Stop the child; its exit status (None when it was stopped already)."""
        if self.sock is None:
            return None
        self.sock.close()
        self.sock = None
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return os.waitpid(self.pid, 0)[1]


def call(function, args, kwargs, limits, label, deadline=None):
    """function(*args, **kwargs) once, in a child within `limits` (see Server.call)."""
    server = Server(lambda name: function, limits)
    try:
        return server.call(0, args, kwargs, label, deadline)
    finally:
        server.close()
