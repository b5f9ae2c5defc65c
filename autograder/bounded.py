"""The grader's own work for a submission, done within stated limits.

While a test runs, the student's code may ask the grader for work whose size it
chooses: a reference answer of another graded function (`causal_mask(32000)` is a
gigabyte), or a function the test handed to it (the `f` of a numerical gradient). That
work runs in the grader's process, outside the sandbox, so it must be bounded like the
student's own: each such call runs in a child forked from the grading worker, with an
address-space limit of `Limits.memory` bytes beyond what the worker already holds and a
time limit of `Limits.seconds`. The child sends its answer back as plain values
(autograder/codec.py) and exits; a call over a limit raises MemoryError or TimeoutError,
which fails the student's call (and so the test), and the report says so.

A fork costs a few milliseconds; the child shares the worker's memory copy-on-write, so
the reference functions and the test's own functions are there without being sent.
"""

import contextlib
import io
import os
import resource
import select
import signal
import struct
import time
import warnings
from dataclasses import dataclass

from autograder import codec

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    memory: int = 1024 * MiB  # bytes of address space beyond what the worker holds at the call
    seconds: float = 30.0  # wall-clock seconds of one call


def _address_space():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _child(function, args, kwargs, limits, write_end):
    """In the forked child: compute, send the answer as one frame, exit (never returns)."""
    try:
        try:
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            cap = _address_space() + limits.memory
            if hard != resource.RLIM_INFINITY:
                cap = min(cap, hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = function(*args, **kwargs)
            frame = codec.pack({"value": value})
        except BaseException as error:  # noqa: BLE001 (whatever it was, it is the answer)
            try:
                frame = codec.pack({"error": error})
            except BaseException:
                frame = codec.pack({"error": RuntimeError("the answer could not be sent")})
        view = memoryview(frame)
        while view:
            view = view[os.write(write_end, view):]
    finally:
        os._exit(0)


def call(function, args, kwargs, limits, label, deadline=None):
    """function(*args, **kwargs) in a child process within `limits`; its value, or the
    exception it raised (rebuilt from its type and message). Over a limit: MemoryError or
    TimeoutError naming `label`. `deadline` (time.monotonic()) can shorten the time."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(function, args, kwargs, limits, write_end)
    os.close(write_end)
    stop = time.monotonic() + limits.seconds
    timed_out = deadline is not None and deadline < stop
    stop = min(stop, deadline) if deadline is not None else stop
    data = bytearray()
    try:
        while True:
            left = stop - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                seconds = limits.seconds if not timed_out else None
                raise TimeoutError(f"{label} ran past its time limit"
                                   + (f" ({seconds:g} s)" if seconds else " (the test's time ran out)")
                                   + " for the arguments your code gave it")
            if not select.select([read_end], [], [], min(left, 1.0))[0]:
                continue
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            data += chunk
            if len(data) > codec.MAX_FRAME + 8:
                os.kill(pid, signal.SIGKILL)
                raise MemoryError(f"{label} made an answer too large to send for the arguments your code gave it")
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    if len(data) < 8 or struct.unpack_from("<Q", data)[0] != len(data) - 8:
        how = f" (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status) else ""
        raise MemoryError(f"{label} stopped before it answered{how}: it ran out of its memory limit "
                          f"({limits.memory // MiB} MiB) for the arguments your code gave it")
    message = codec.unpack(memoryview(data)[8:])
    if "error" in message:
        error = message["error"]
        if getattr(error, "remote_type", "") == "MemoryError" or "can't allocate memory" in str(error):
            raise MemoryError(f"{label} needs more than its memory limit ({limits.memory // MiB} MiB) for "
                              f"the arguments your code gave it")
        raise error
    return message.get("value")
