"""The trusted side of grading: test cells run here, where no student code ever runs.

A graded notebook runs in two processes. The student's cells run in a sandboxed kernel
(autograder/judging/executor.py); the instructor's test cells run in the grader's own process,
in a namespace where each graded name (every function and class a solution cell
defines) is a `Remote`: a stand-in that asks the kernel's agent (autograder/isolation/agent.py)
to call the student's object and gets back plain values (autograder/isolation/codec.py). Test
code, the expected values it computes and the decision pass or fail never enter the
kernel; only the arguments of a call do. A test passes when its cell runs to its end
here without an exception.

Objects that are not plain values (a module instance, a bound method) stay in the
kernel; the test gets a `Remote` for them too. Helpers that need the student's objects
themselves, for example to backpropagate through a module, are marked in the notebook
with `@runs_beside_your_code`: they run in the kernel, next to the student's code, and
their results are checked here like any answer.

Each graded function is graded on its own: while the kernel answers a call that started
from graded name F, every graded *function* defined before F in the notebook is bound,
in the kernel, to a stand-in that asks this process for the reference answer
(computed from the instructor's solution, which never leaves this process). A mistake
in `softmax` then costs only the tests of `softmax`.
"""

import ast
import builtins
import contextlib
import functools
import io
import select
import socket
import struct
import time
import types
import warnings

import numpy as np
import torch

from autograder.isolation import bounded, codec

HELPER_MARK = "runs_beside_your_code"


class GradingStopped(BaseException):
    """The kernel cannot go on (it died or stopped answering): later tests do not run.
    Not an Exception, so that a test's `except Exception` does not hide it."""


class AgentGone(RuntimeError):
    pass


def graded_names(solution_sources):
    """[(name, is a function)] of what the solution cells define, in notebook order."""
    names = []
    for source in solution_sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # the student's: too deep to parse
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append((node.name, not isinstance(node, ast.ClassDef)))
    return names


# -- the connection to the kernel's agent ------------------------------------------------

class Channel:
    """The grader's end of the socket to one kernel's agent.

    `pump(timeout, fd)` is the executor's: it handles the kernel's own messages (outputs,
    the end of the agent's cell) for up to `timeout` seconds, and returns True as soon as
    `fd` is readable. `interrupt()` interrupts the kernel."""

    STUCK_AFTER = 10.0  # seconds an interrupted kernel has to answer
    forked = False  # True in a bounded.Server's child, which must not call the kernel

    def __init__(self, sock, pump, interrupt, references):
        self.sock = sock
        self.sock.setblocking(False)
        self.pump, self.interrupt = pump, interrupt
        self.references = references  # name -> reference function (this process)
        self.buffer = bytearray()
        self.proxies = {}  # handle id -> Remote
        self.token = None
        self.deadline = None
        self.interrupted_at = None
        self.ended = False  # the kernel's serving cell ended early
        self.sequence = 0
        self.allowed = frozenset()  # the references the kernel may ask for now
        self.creating = None  # the origin of handles being decoded
        self.referee = None  # the Referee that uses this channel
        self.test_functions = []  # functions the test cell gave to student code
        self.watched = None  # (arguments, keywords) as the last watched call left them
        self.limits = bounded.Limits()  # for the grader's work done at the student's code's request
        # The bounded.Server that computes that work, and what it knows: the test cell it was
        # forked in (its count of begin()s) and how many of that cell's functions.
        self.server, self.server_cell, self.server_knows = None, -1, 0
        self.cells = 0
        self.over_limits = []  # what that work could not finish (shown in the report)
        self.memory_meter = None  # the kernel's sandbox.MemoryMeter, set by the executor

    def reconnect(self, sock, interrupt):
        """The agent of a fresh kernel (the last one crashed): objects of the old one are gone."""
        self.sock = sock
        self.sock.setblocking(False)
        self.interrupt = interrupt
        self.buffer = bytearray()
        self.proxies = {}
        self.token = None
        self._stop_server()

    # -- one test cell ---------------------------------------------------------------
    def begin(self, token, deadline):
        self.cells += 1
        self.token, self.deadline = token, deadline
        self.test_functions = []
        self.interrupted_at, self.ended = None, False

    def finish(self):
        """Tell the agent the test cell is over (it may have ended already)."""
        if self.token is not None and not self.ended:
            try:
                self._send({"op": "end", "token": self.token}, time.monotonic() + 5)
            except (OSError, GradingStopped, codec.CodecError):
                pass
        self.token = None

    # -- requests --------------------------------------------------------------------
    def request(self, message, origin, references):
        if Channel.forked:
            raise RuntimeError("the grader's reference cannot call your objects: pass it arrays or tensors")
        if self.token is None:
            raise RuntimeError("the student's code can be called only from a test cell")
        if self.ended:
            raise AgentGone("the grader's helper in your kernel is no longer running (did the notebook's code "
                            "change or stop it?), so this test cannot call your code")
        self.sequence += 1
        number = f"g{self.sequence}"
        message = {**message, "id": number, "token": self.token, "references": list(references)}
        outer_allowed, self.allowed = self.allowed, frozenset(references) | self.allowed
        try:
            self._send(message, self.deadline)
            while True:
                reply = self._receive(origin)
                if reply.get("op") == "callback":
                    self._answer_callback(reply)
                    continue
                if reply.get("op") != "result" or reply.get("id") != number:
                    continue
                if message.get("watch"):
                    self.watched = (reply.get("arguments"), reply.get("keywords"))
                if "error" in reply:
                    error = reply["error"]
                    if getattr(error, "remote_type", "") == "KeyboardInterrupt" and self.interrupted_at:
                        raise TimeoutError("your code ran past the time limit of this test and was interrupted")
                    raise error
                return reply.get("value")
        finally:
            self.allowed = outer_allowed

    def _answer_callback(self, message):
        name = message.get("name")
        reply = {"op": "result", "id": message.get("id"), "token": self.token}
        if self._resolve(name) is None:
            reply["error"] = PermissionError(f"the grader's function {name!r} is not available here")
        else:
            try:
                args = message.get("args") or []
                kwargs = message.get("kwargs") or {}
                if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
                    raise TypeError("malformed arguments")
                calls = getattr(self._resolve(name), RECORDED_CALLS, None) if type(name) is int else None
                if type(calls) is list:  # a record_calls function: written down here, out of the kernel's reach
                    calls.append((tuple(args), dict(kwargs)))
                reply["value"] = self._bounded(name, args, kwargs)
            except Exception as error:
                reply["error"] = error
        try:
            self._send(reply, self.deadline)
        except (codec.CodecError, TypeError) as error:
            self._send({**reply, "value": None, "error": error}, self.deadline)

    def _resolve(self, name, allowed=None):
        """The function a callback names, if the kernel may call it now (`allowed`: the
        references it may ask for; by default those of the current call): a function the
        test passed to the student's code (by number), a reference (by name), or a
        reference's backward pass ("vjp:NAME"); None otherwise."""
        allowed = self.allowed if allowed is None else allowed
        if type(name) is int and 0 <= name < len(self.test_functions):
            return self.test_functions[name]
        if type(name) is str and name in allowed and name in self.references:
            return self.references[name]
        if type(name) is str and name.startswith("vjp:") and name[4:] in allowed and name[4:] in self.references:
            return functools.partial(_vector_jacobian_product, self.references[name[4:]])
        return None

    def _bounded(self, name, args, kwargs):
        """The callback `name` computed within the limits of the grader's work (its arguments
        are the student's code's to choose), in a bounded.Server: one for the notebook while
        only references are asked for, a fresh one for a test cell's own functions. A call
        over a limit raises here and fails the student's call, visibly."""
        label = "the test's function" if type(name) is int else f"the grader's reference {name}"
        stale = type(name) is int and (self.server_cell != self.cells or name >= self.server_knows)
        if self.server is None or not self.server.alive or stale:
            self._stop_server()  # a function the test made after the fork: a fresh copy knows it
            self.server = bounded.Server(self._resolve_in_child, self.limits)
            self.server_cell, self.server_knows = self.cells, len(self.test_functions)
        try:
            return self.server.call(name, args, kwargs, label,
                                    deadline=self.deadline + self.STUCK_AFTER if self.deadline else None)
        except (MemoryError, TimeoutError) as error:
            self.over_limits.append(str(error))
            raise

    def _resolve_in_child(self, name):
        """In the server's child, which must not use the kernel's socket: the parent has
        checked that the kernel may call `name`."""
        Channel.forked = True
        return self._resolve(name, allowed=self.references)

    def _stop_server(self):
        if self.server is not None:
            self.server.close()
        self.server = None

    def close(self):
        """The notebook is graded: stop what this channel started."""
        self._stop_server()

    # -- frames ------------------------------------------------------------------------
    def _send(self, message, deadline):
        frame = memoryview(codec.pack(message, self._encode_other))
        while frame:
            try:
                sent = self.sock.send(frame)
                frame = frame[sent:]
                continue
            except BlockingIOError:
                pass
            except OSError as error:
                raise GradingStopped(f"the kernel's connection closed ({error})") from None
            self._wait(deadline, writable=True)

    def _receive(self, origin):
        while True:
            if len(self.buffer) >= 8:
                (size,) = struct.unpack_from("<Q", self.buffer)
                if size > codec.MAX_FRAME:
                    raise GradingStopped("the kernel sent a message beyond the size limit")
                if len(self.buffer) >= 8 + size:
                    body = bytes(self.buffer[8:8 + size])
                    del self.buffer[:8 + size]
                    self.creating = origin
                    try:
                        message = codec.unpack(body, on_handle=self._proxy)
                    except codec.CodecError as error:
                        message = {"op": "garbled", "error": str(error)}
                    if type(message) is not dict or message.get("token") != self.token:
                        continue
                    return message
            self._wait(self.deadline)
            try:
                data = self.sock.recv(1 << 20)
            except BlockingIOError:
                continue
            except OSError as error:
                raise GradingStopped(f"the kernel's connection closed ({error})") from None
            if not data:
                raise GradingStopped("the kernel closed its connection to the grader")
            self.buffer += data

    def _wait(self, deadline, writable=False):
        """Until the socket is ready, handling the kernel's messages; the time limit."""
        while True:
            now = time.monotonic()
            if deadline is not None and now > deadline and self.interrupted_at is None:
                self.interrupted_at = now
                self.interrupt()
            if self.interrupted_at is not None and now > self.interrupted_at + self.STUCK_AFTER:
                raise GradingStopped("the kernel ran past the time limit and did not stop when interrupted")
            if writable:
                if select.select([], [self.sock], [], 0.05)[1]:
                    return
                self.pump(0.0, None)
            elif self.pump(0.2, self.sock.fileno()):
                return
            if self.ended and not writable and not self._readable():
                if self.interrupted_at is not None:
                    raise TimeoutError("your code ran past the time limit of this test and was interrupted")
                raise AgentGone("the grader's helper in your kernel stopped before it answered (did your code "
                                "end it, or did the kernel restart?)")

    def _readable(self):
        return bool(select.select([self.sock], [], [], 0)[0])

    # -- handles -------------------------------------------------------------------------
    def _proxy(self, number, path, text):
        proxy = self.proxies.get(number)
        if proxy is None:
            proxy = self.proxies[number] = Remote(self, handle=number, type_path=path, text=text,
                                                  origin=self.creating)
        return proxy

    def _encode_other(self, value):
        if isinstance(value, Remote) and object.__getattribute__(value, "_channel") is self:
            handle = object.__getattribute__(value, "_handle")
            if handle is None:
                return {"name": object.__getattribute__(value, "_name")}
            return {"ref": handle}
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                              functools.partial)):
            self.test_functions.append(value)
            return {"callable": len(self.test_functions) - 1}
        raise TypeError(f"a {type(value).__name__} cannot be sent to the student's kernel (values only)")


def _vector_jacobian_product(reference, args, kwargs, tracked, grads):
    """The gradients of `reference`'s tensor arguments at positions `tracked`, given the
    gradients of its outputs: the backward pass of a reference in the student's graph."""
    if type(args) is not list or type(kwargs) is not dict or type(tracked) is not list or type(grads) is not list:
        raise TypeError("malformed arguments")
    args = list(args)
    leaves = []
    for i in tracked:
        if type(i) is not int or not 0 <= i < len(args) or not torch.is_tensor(args[i]):
            raise TypeError("malformed arguments")
        args[i] = args[i].detach().clone().requires_grad_(True)
        leaves.append(args[i])
    with torch.enable_grad():
        value = reference(*args, **kwargs)
        outputs = [value] if torch.is_tensor(value) else list(value)
        pairs = [(o, g) for o, g in zip(outputs, grads) if torch.is_tensor(g) and o.requires_grad]
        if not pairs:
            return [None] * len(leaves)
        found = torch.autograd.grad([o for o, _ in pairs], leaves, [g for _, g in pairs], allow_unused=True)
    return list(found)


WATCH_INPUTS = "watch_inputs"
RECORD_CALLS = "record_calls"
RECORDED_CALLS = "_grader_recorded_calls"  # the list of calls a record_calls function keeps
MEMORY_BEYOND_INPUTS = "memory_beyond_inputs"
SUBMITTED_SOURCES = "submitted_sources"  # the notebook's code as it ran: here, the cells submitted
DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
               ast.AnnAssign)


@functools.lru_cache(maxsize=256)  # the instructor's cells: the same in every submission
def definitions_of(source):
    """The imports, definitions and assignments of an instructor cell, as text (no calls
    made for their effects, no prints)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    kept = [node for node in tree.body if isinstance(node, DEFINITIONS)]
    return ast.unparse(ast.Module(body=kept, type_ignores=[])) + "\n" if kept else ""


def _is_array(value):
    return isinstance(value, np.ndarray) or torch.is_tensor(value)


def _same(before, after):
    """Whether `after` (what came back) holds exactly what `before` (what was sent) held."""
    if torch.is_tensor(before):
        if not torch.is_tensor(after) or after.shape != before.shape or after.dtype != before.dtype:
            return False
        if "meta" in (before.device.type, after.device.type):
            return True
        before, after = before.detach().cpu(), after.detach().cpu()
        return torch.equal(before, after) or bool(
            before.is_floating_point() and torch.allclose(before, after, rtol=0.0, atol=0.0, equal_nan=True))
    if not isinstance(after, np.ndarray) or after.shape != before.shape or after.dtype != before.dtype:
        return False
    return bool(np.array_equal(before, after, equal_nan=before.dtype.kind in "fc"))


def _array_bytes(value, depth=0):
    """The bytes of the arrays and tensors in `value` (nested tuples, lists, dicts)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if torch.is_tensor(value):
        return value.element_size() * value.nelement()
    if depth < 4 and isinstance(value, (list, tuple)):
        return sum(_array_bytes(item, depth + 1) for item in value)
    if depth < 4 and isinstance(value, dict):
        return sum(_array_bytes(item, depth + 1) for item in value.values())
    return 0


def _copied(value):
    """Copies of the arrays and tensors in `value` (nested tuples, lists, dicts), for a
    reference that must not change the test's own."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if torch.is_tensor(value):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(_copied(item) for item in value)
    if isinstance(value, list):
        return [_copied(item) for item in value]
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    return value


def _memory_here(function, args, kwargs):
    """memory_beyond_inputs for a function of this process (the instructor's own)."""
    import tracemalloc

    tracemalloc.start()
    try:
        result = function(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return max(0, peak - _array_bytes(result)), result


def _watch_here(function, args, kwargs):
    """watch_inputs for a function of this process (the instructor's own)."""
    labelled = list(enumerate(args)) + list(kwargs.items())
    before = {label: (v.detach().clone() if torch.is_tensor(v) else v.copy()) for label, v in labelled
              if _is_array(v)}
    result = function(*args, **kwargs)
    return result, [label for label, value in labelled if label in before and not _same(before[label], value)]


@contextlib.contextmanager
def quiet():
    """Instructor code's prints and warnings kept out of the grader's output."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# -- stand-ins for the student's objects -----------------------------------------------------

# Classes a Remote may claim to be an instance of, by their module: library classes the
# test cells check with isinstance (nn.Linear, say). A class of the student's own code
# is represented by a stand-in class of the same name.
LIBRARY_MODULES = ("builtins", "numpy", "torch", "collections", "functools", "math")


class Remote:
    """The student's object, in the kernel: calls and attributes are asked for there."""

    __slots__ = ("_channel", "_name", "_handle", "_type_path", "_text", "_origin", "_referee", "_helper")

    def __init__(self, channel, name=None, handle=None, type_path="", text="", origin=None, referee=None,
                 helper=False):
        for slot, value in (("_channel", channel), ("_name", name), ("_handle", handle), ("_type_path", type_path),
                            ("_text", text), ("_origin", origin), ("_referee", referee), ("_helper", helper)):
            object.__setattr__(self, slot, value)

    def _ask(self, op, args=(), kwargs=None, **fields):
        get = object.__getattribute__
        channel, origin = get(self, "_channel"), get(self, "_origin")
        if origin is None:  # a helper: it acts for the graded objects it is given
            origin = _first_origin((args, kwargs))
        referee = channel.referee
        target = None if op == "helper" else self
        message = {"op": op, "target": target, "args": list(args), "kwargs": dict(kwargs or {}), **fields}
        return channel.request(message, origin, referee.references_for(origin))

    def __call__(self, *args, **kwargs):
        get = object.__getattribute__
        if get(self, "_helper"):  # the instructor's helper, sent with its source: never the student's name
            referee = get(self, "_channel").referee
            return self._ask("helper", args, kwargs, helper=get(self, "_name"), definitions=referee.definitions)
        return self._ask("call", args, kwargs)

    def __getattr__(self, attribute):
        if attribute.startswith("__") and attribute.endswith("__"):
            raise AttributeError(attribute)
        return self._ask("getattr", attribute=attribute)

    def __setattr__(self, attribute, value):
        self._ask("setattr", attribute=attribute, value=value)

    def __getitem__(self, key):
        return self._ask("method", (key,), attribute="__getitem__")

    def __len__(self):
        return self._ask("len")

    def __iter__(self):
        return iter(self._ask("iterate"))

    def __repr__(self):
        get = object.__getattribute__
        return get(self, "_text") or f"<your {get(self, '_name')}>"

    @property
    def __class__(self):
        return _claimed_class(object.__getattribute__(self, "_type_path"))

    @property
    def __name__(self):
        name = object.__getattribute__(self, "_name")
        return name if name else self._ask("getattr", attribute="__name__")


def _first_origin(value, depth=0):
    if isinstance(value, Remote):
        return object.__getattribute__(value, "_origin")
    if depth < 4 and isinstance(value, (list, tuple)):
        for item in value:
            origin = _first_origin(item, depth + 1)
            if origin is not None:
                return origin
    if depth < 4 and isinstance(value, dict):
        return _first_origin(list(value.values()), depth + 1)
    return None


_stand_ins = {}


def _claimed_class(path):
    """The class a kernel object says it has: a library class of this process, or a stand-in."""
    module, _, qualname = path.rpartition(".")
    import sys

    if module.split(".")[0] in LIBRARY_MODULES and module in sys.modules:
        value = sys.modules[module]
        for part in qualname.split("."):
            value = getattr(value, part, None)
        if isinstance(value, type):
            return value
    if path not in _stand_ins:
        _stand_ins[path] = type(qualname.split(".")[-1] or "object", (), {"__module__": module or "notebook"})
    return _stand_ins[path]


# -- a notebook's instructor cells, run here ------------------------------------------------

class Referee:
    """The instructor's cells of one submission, and the reference answers."""

    def __init__(self, channel, reference_cells):
        """reference_cells: [(source, is a solution)], the instructor's notebook in order
        without its test cells: setup and helper cells, and the reference solutions."""
        self.channel = channel
        channel.referee = self
        self.graded = graded_names(source for source, solution in reference_cells if solution)
        self.functions = [name for name, is_function in self.graded if is_function]
        self.namespace = {"__name__": "__main__", "__builtins__": builtins}
        self.definitions = ""  # the instructor's imports and definitions so far (for helpers)
        self.kernel_memory = None  # the notebook's memory_beyond_inputs, run in the kernel
        self.sources = []  # the code cells that run in the kernel, in order (set by the executor)
        for name, _ in self.graded:
            self.namespace[name] = Remote(channel, name=name, type_path=f"notebook.{name}", origin=name)
        channel.references = self._reference_functions(source for source, _ in reference_cells)

    def _reference_functions(self, sources):
        """Run the instructor's cells and the reference solutions, in order, in a namespace of their own."""
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        with quiet():
            for source in sources:
                exec(compile(source, "<reference>", "exec"), namespace)
        return {name: namespace[name] for name in self.functions if callable(namespace.get(name))}

    def references_for(self, origin):
        """The graded functions defined before `origin`: they answer with the reference."""
        order = [name for name, _ in self.graded]
        if origin not in order:
            return []
        return [name for name in order[:order.index(origin)] if name in self.channel.references]

    def run_setup(self, source, key):
        """An instructor cell that is not a test (imports, helpers): here as well as in the kernel.

        Its imports and definitions also go, as text, with every call of a helper marked
        @runs_beside_your_code, which the kernel defines anew from them; `watch_inputs` is
        replaced here by the grader's own."""
        with quiet():
            exec(compile(source, f"<{key}>", "exec"), self.namespace)
        self.definitions += definitions_of(source)
        for name, value in list(self.namespace.items()):
            if type(value) is types.FunctionType and getattr(value, HELPER_MARK, False) is True:
                self.namespace[name] = Remote(self.channel, name=name, type_path=f"notebook.{name}", origin=None,
                                              helper=True)
            elif name == WATCH_INPUTS and type(value) is types.FunctionType:
                self.namespace[name] = self.watch_inputs
            elif name == RECORD_CALLS and type(value) is types.FunctionType:
                self.namespace[name] = self.record_calls
            elif name == SUBMITTED_SOURCES and type(value) is types.FunctionType:
                self.namespace[name] = self.submitted_sources
            elif name == MEMORY_BEYOND_INPUTS and type(value) is types.FunctionType:
                # The notebook's own version (tracemalloc), kept for a sandbox without a cgroup.
                self.kernel_memory = Remote(self.channel, name=name, type_path=f"notebook.{name}", origin=None,
                                            helper=True)
                self.namespace[name] = self.memory_beyond_inputs

    def submitted_sources(self):
        """The grader's `submitted_sources() -> [str]`: the code cells of the graded notebook
        that run in the kernel (the instructor's setup and helpers, the student's answers
        and added cells), in order, as this process assembled them. A test that reads
        them (to find a library call a contract rules out) parses text here and never
        asks the kernel, whose history student code could rewrite."""
        return list(self.sources)

    def watch_inputs(self, function, *args, **kwargs):
        """The grader's `watch_inputs(function, *args, **kwargs) -> (result, changed)`:
        `changed` lists the array and tensor arguments (positions, keyword names) that the
        call changed in place, from the copies this process sent and what came back. The
        test's own arrays never change: only copies cross."""
        if not isinstance(function, Remote):
            return _watch_here(function, args, kwargs)
        self.channel.watched = None
        result = function._ask("call", args, kwargs, watch=True)
        arguments, keywords = self.channel.watched or (None, None)
        arguments = arguments if type(arguments) is list else []
        keywords = keywords if type(keywords) is dict else {}
        changed = [i for i, value in enumerate(args)
                   if _is_array(value) and not _same(value, arguments[i] if i < len(arguments) else None)]
        changed += [k for k, value in kwargs.items() if _is_array(value) and not _same(value, keywords.get(k))]
        return result, changed

    MEASUREMENTS = 2  # a call measured while the kernel took memory back is measured once more

    def memory_beyond_inputs(self, function, *args, **kwargs):
        """The grader's `memory_beyond_inputs(function, *args, **kwargs) -> (bytes, result)`:
        how far the sandbox's memory rose during the call, read from its cgroup outside the
        sandbox (sandbox.MemoryMeter), less what the arguments and the result take while they
        cross (`_crossing`, sized from what the test sends and what the reference returns).
        Student code cannot change that figure, nor reset the counter. A figure taken while
        the kernel took memory back from the sandbox (its limit reached, pages handed back
        lazily reclaimed) says nothing: the call is measured again once the kernel has taken
        back what it could, and if that figure is spoiled too, the test fails with what the
        meter saw. Without a cgroup, the notebook's own version runs beside the student's
        code (tracemalloc there), and the report says so."""
        if not isinstance(function, Remote):
            return _memory_here(function, args, kwargs)
        meter = self.channel.memory_meter
        if meter is not None:
            returned = self._reference_bytes(function, args, kwargs)  # here, before the figure is taken
            try:
                meter.start()
            except (OSError, ValueError):
                meter = None
        if meter is None:
            note = ("memory was measured by tracemalloc in the student's kernel (the sandbox has no memory "
                    "cgroup whose peak the grader can reset): that figure is the student's to forge")
            if note not in self.channel.over_limits:
                self.channel.over_limits.append(note)
            return self.kernel_memory(function, *args, **kwargs)
        for attempt in range(self.MEASUREMENTS):
            if attempt:
                meter.reclaim()
                meter.start()
            try:
                result = function._ask("call", args, kwargs)
            finally:
                used = meter.stop()
            if not meter.spoiled:
                break
        else:
            raise AssertionError(
                f"The memory this call allocates could not be measured: while it ran, {meter.spoiled}, twice "
                "(the second time after the grader had the kernel take back what it could). Memory handed back "
                "lazily (MADV_FREE), the page cache of files, or a kernel that holds nearly all its memory "
                "limit lets a call take memory without it showing: free memory for good, and keep the "
                "kernel well below its limit.")
        crossing = self._crossing(args, kwargs, min(returned, _array_bytes(result)))
        return max(0, used - crossing), result

    def _reference_bytes(self, function, args, kwargs):
        """The bytes of the arrays that the reference solution returns for these arguments (0
        for a function without one): what the grader allows for the result, whatever the
        student's code returns (a result in a wider dtype takes more memory, not less)."""
        name = object.__getattribute__(function, "_name")
        reference = self.channel.references.get(name) if type(name) is str else None
        if reference is None:
            return 0
        try:
            with quiet():
                return _array_bytes(reference(*_copied(args), **_copied(kwargs)))
        except Exception:
            return 0

    @staticmethod
    def _crossing(args, kwargs, returned):
        """What the arguments (`args`, `kwargs`) and a result of `returned` bytes may take in the
        kernel while they cross: each array exists for a moment as a message, its frame and an
        array there, three times its bytes (an upper bound, measured: book/for_instructors.md)."""
        return 3 * (_array_bytes(args) + _array_bytes(kwargs) + returned)

    @staticmethod
    def record_calls(function):
        """The grader's `record_calls(function) -> (recorded, calls)`: `recorded` is `function`,
        and `calls` lists the (args, kwargs) of each call of it, in order. A call from the
        student's code is written down by the Channel in this process, from the values the
        kernel sent, before the bounded child runs `function`: what the student's code fed a
        test's function is evidence the kernel cannot rewrite afterwards."""
        calls = []

        def recorded(*args, **kwargs):
            if not Channel.forked:  # the test's own call (the kernel's are written down by the Channel)
                calls.append((args, kwargs))
            return function(*args, **kwargs)

        setattr(recorded, RECORDED_CALLS, calls)
        return recorded, calls

    def run_test(self, source, key):
        """(passed, error type name, message, what the test printed)."""
        printed = io.StringIO()
        try:
            code = compile(source, f"<{key}>", "exec")
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(code, self.namespace)
        except GradingStopped:
            raise
        except (Exception, SystemExit) as error:
            name = getattr(error, "remote_type", None) or type(error).__name__
            try:
                message = str(error)
            except Exception:
                message = ""
            if isinstance(error, codec.RemoteError):  # it came from the student's code
                message = f"your code raised {name}" + (f": {message}" if message else "")
            return False, name, message[:5000], printed.getvalue()
        return True, "", "", printed.getvalue()
