# The grader's agent in a student's kernel: calls the student's code on the grader's
# behalf and answers with values. Sent by autograder/judging/kernel_start.py, which executes this
# file's text (after autograder/isolation/codec.py's) in the kernel before any student code; it
# is never imported by the grader.
#
# The agent is a convenience, not a guard. Student code runs in the same process and may
# read or replace anything here; that changes only the values the agent sends back,
# which are the student's answers anyway. Tests, expected values and verdicts stay in
# the grader's process (autograder/judging/referee.py).
#
# Protocol (frames of autograder/isolation/codec.py on one socket): while a test cell is graded
# the kernel runs `__autograder__.serve(token)`, which answers requests
#     {"op": "call" | "getattr" | "setattr" | "method" | "iterate" | "len" | "helper",
#      "id", "token", "name" (a global of the notebook) or "target" (a handle),
#      "attribute", "args", "kwargs", "value", "references", "watch",
#      "helper" and "definitions" (op "helper")}
# with {"op": "result", "id", "token", "value"} or {..., "error"}, until {"op": "end"}.
# With "watch", the result also carries the array and tensor arguments as the call left
# them ("arguments", "keywords"), for the grader to compare with what it sent.
# Op "helper" calls a test helper of the instructor's (marked @runs_beside_your_code)
# whose source comes with the request ("definitions": the instructor's imports and
# definitions), run in a copy of the notebook's namespace where the instructor's names
# are bound again: a student cell that redefines a helper does not change what runs.
# While a request runs, each name in its "references" is bound to a stand-in that asks
# the grader for the reference answer ({"op": "callback", ...}), so that a function is
# graded with correct versions of the graded functions it calls.

import signal as _signal
import socket as _socket
import struct as _struct

_MISSING = object()


class Agent:
    def __init__(self, fd, user_ns):
        self.sock = _socket.socket(fileno=fd)
        self.sock.setblocking(True)
        self.user_ns = user_ns
        self.handles = {}  # handle id -> object kept for the grader
        self.ids = {}  # id(object) -> handle id
        self.token = None
        self.sequence = 0
        self.compiled = {}  # definitions text -> code, for op "helper"

    # -- frames, never cut in half by an interrupt ----------------------------------------
    def _blocked(self):
        return _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT})

    def send(self, message):
        try:
            frame = pack(message, self.handle_of)
        except Exception as error:
            frame = pack({"op": message.get("op"), "id": message.get("id"), "token": message.get("token"),
                          "error": error})
        previous = self._blocked()
        try:
            self.sock.sendall(frame)
        finally:
            _signal.pthread_sigmask(_signal.SIG_SETMASK, previous)

    def receive(self):
        previous = self._blocked()
        try:
            (size,) = _struct.unpack("<Q", self._read(8))
            if size > MAX_FRAME:
                raise CodecError("a message beyond the size limit")
            body = self._read(size)
        finally:
            _signal.pthread_sigmask(_signal.SIG_SETMASK, previous)
        return unpack(body, on_ref=lambda number: self.handles.get(number, _Undefined(f"object {number}")),
                      on_name=lambda name: self.user_ns.get(name, _Undefined(name)),
                      on_callable=self.grader_function)

    def _read(self, size):
        data = bytearray(size)
        view, got = memoryview(data), 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if not n:
                raise EOFError("the grader closed the connection")
            got += n
        return data

    def handle_of(self, value):
        """Keep an object that is not a plain value here; the grader gets a handle to it."""
        number = self.ids.get(id(value))
        if number is None or self.handles[number] is not value:
            number = len(self.handles) + 1
            self.handles[number] = value
            self.ids[id(value)] = number
        kind = type(value)
        path = f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', '?')}"
        try:
            text = repr(value)[:300]
        except BaseException:
            text = f"<{path} object>"
        return {"handle": [number, path, text]}

    # -- serving the grader -----------------------------------------------------------
    def serve(self, token):
        """Answer the grader's requests for one test cell, until it says "end"."""
        outer, self.token = self.token, token
        try:
            while True:
                message = self.receive()
                if message.get("token") != token:
                    continue  # left over from a test cell that was stopped
                if message.get("op") == "end":
                    return
                self.send(self.answer(message))
        finally:
            self.token = outer

    def answer(self, message):
        reply = {"op": "result", "id": message.get("id"), "token": message.get("token")}
        saved = self.bind_references(message.get("references") or [])
        try:
            reply["value"] = self.perform(message)
        except BaseException as error:  # KeyboardInterrupt too: the grader's time limit
            reply["error"] = RemoteError.make(type(error).__name__, _message(error))  # plain: its type and text
        finally:
            if message.get("watch"):  # the arguments as the call left them, for the grader to compare
                reply["arguments"] = [a if _is_array(a) else None for a in message.get("args") or ()]
                reply["keywords"] = {k: v for k, v in (message.get("kwargs") or {}).items() if _is_array(v)}
            for name, value in saved.items():
                if value is _MISSING:
                    self.user_ns.pop(name, None)
                else:
                    self.user_ns[name] = value
        return reply

    def perform(self, message):
        op = message.get("op")
        target = message.get("target")
        args, kwargs = tuple(message.get("args") or ()), dict(message.get("kwargs") or {})
        if op == "call":
            return target(*args, **kwargs)
        if op == "getattr":
            return getattr(target, message["attribute"])
        if op == "setattr":
            setattr(target, message["attribute"], message.get("value"))
            return None
        if op == "method":
            return getattr(target, message["attribute"])(*args, **kwargs)
        if op == "iterate":
            items = []
            for item in target:
                items.append(item)
                if len(items) > 100_000:
                    raise ValueError("more than 100000 items")
            return items
        if op == "len":
            return len(target)
        if op == "helper":
            return self.helper(message.get("helper"), message.get("definitions"))(*args, **kwargs)
        raise ValueError(f"unknown request {op!r}")

    def helper(self, name, definitions):
        """The instructor's helper `name`, defined anew from `definitions` in a copy of the
        notebook's namespace: the student's answers are there, the instructor's names win."""
        if type(name) is not str or type(definitions) is not str:
            raise ValueError("a malformed helper request")
        code = self.compiled.get(definitions)
        if code is None:
            code = self.compiled[definitions] = compile(definitions, "<the grader's test helpers>", "exec")
        namespace = dict(self.user_ns)
        exec(code, namespace)
        return namespace[name]

    # -- the reference versions of other graded functions --------------------------------
    def bind_references(self, names):
        saved = {}
        for name in names:
            if type(name) is str and name not in saved:
                saved[name] = self.user_ns.get(name, _MISSING)
                self.user_ns[name] = self.reference(name)
        return saved

    def reference(self, name):
        agent = self

        def reference(*args, **kwargs):
            tracked = [i for i, a in enumerate(args) if _is_array(a) and getattr(a, "requires_grad", False)]
            if tracked:
                return agent.differentiable(name, args, kwargs, tracked)
            return agent.callback(name, args, kwargs)

        reference.__name__ = reference.__qualname__ = name
        reference.__doc__ = (f"The reference {name}: while another function is graded, the grader answers "
                             f"its calls to {name} with correct results.")
        return reference

    def differentiable(self, name, args, kwargs, tracked):
        """The reference answer as a node of the student's autograd graph: its value from
        the grader, and in the backward pass the gradients of its tensor arguments, also
        from the grader ("vjp:NAME": the reference's vector-Jacobian product), so that
        gradients flow through a reference as through the student's own function."""
        import torch

        agent = self
        plain = [a.detach() if i in tracked else a for i, a in enumerate(args)]

        class Reference(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *tensors):
                value = agent.callback(name, plain, kwargs)
                ctx.single = torch.is_tensor(value)
                if not ctx.single and not (type(value) in (tuple, list) and all(torch.is_tensor(v) for v in value)):
                    raise TypeError(f"the reference {name} returned no tensors to differentiate")
                return value if ctx.single else tuple(value)

            @staticmethod
            def backward(ctx, *grads):
                found = agent.callback("vjp:" + name, [plain, kwargs, tracked, list(grads)], {})
                return tuple(found)

        return Reference.apply(*[args[i] for i in tracked])

    def grader_function(self, number):
        """A function the test passed to the student's code (the f of a numerical gradient,
        say): it runs in the grader, on the values it is called with."""
        agent = self

        def function(*args, **kwargs):
            return agent.callback(number, args, kwargs)

        function.__name__ = function.__qualname__ = "test_function"
        return function

    def callback(self, name, args, kwargs):
        """Ask the grader to run a reference function (by name) or a test's function (by number)."""
        if self.token is None:
            raise RuntimeError(f"the grader's function {name} answers only while your code is graded")
        self.sequence += 1
        number, token = f"k{self.sequence}", self.token
        self.send({"op": "callback", "id": number, "token": token, "name": name, "args": list(args),
                   "kwargs": kwargs})
        while True:
            message = self.receive()
            if message.get("token") != token:
                continue
            if message.get("op") == "result" and message.get("id") == number:
                if "error" in message:
                    raise message["error"]
                return message.get("value")
            self.send(self.answer(message))  # the grader asks something meanwhile


def _is_array(value):
    return type(value).__name__ in ("ndarray", "Tensor", "Parameter") and \
        type(value).__module__.split(".")[0] in ("numpy", "torch")


class _Undefined:
    """A name the notebook does not define (its cell failed, or it was deleted)."""

    def __init__(self, name):
        self.name = name

    def fail(self, *args, **kwargs):
        raise NameError(f"name {self.name!r} is not defined: did its cell run without an error?")

    __call__ = fail

    def __getattr__(self, attribute):
        self.fail()


def _message(error):
    try:
        return str(error)[:20000]
    except BaseException:
        return "(the exception's message could not be read)"


def start(fd, user_ns):
    user_ns["__autograder__"] = Agent(fd, user_ns)
