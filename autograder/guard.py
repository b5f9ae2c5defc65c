# The grader's guard: runs once in a fresh kernel, before any student code, sent by
# autograder/executor.py. It is not imported by the grader; its text is executed in
# the kernel in a private namespace (see `bootstrap()` in executor.py).
#
# What it does, in the student's kernel:
#
# * reads its configuration (a secret key, the instructor's code and test cells) from
#   a pipe that it then closes; nothing of it reaches the student's namespace;
# * imports the libraries the instructor's cells import, and keeps a snapshot of them
#   (module namespaces, class dictionaries, builtins, signal handlers);
# * installs an audit hook (PEP 578), which Python offers no way to remove, that
#     - runs an instructor cell or a test cell when the grader asks for it, in a thread
#       of its own whose code is the instructor's, compiled here (before any student
#       code), in a fresh namespace that the student's code never sees: the student's
#       definitions, then the instructor's, then private copies of the libraries
#       (module proxies) and of builtins, so that monkeypatching numpy, torch or
#       builtins from the student's code does not reach the test;
#     - decides pass or fail itself: a test passes only if its own code object, run as
#       the base of that thread, reaches its last statement (`else:` of a try around
#       the whole cell), in that thread, with its namespace, proxies and libraries
#       intact; the verdict goes to the grader over the pipe, signed with the key;
#     - refuses what would let student code reach into the test or the guard: frames
#       of the running test or of the guard (sys._getframe, tracebacks, generator
#       frames), gc's object lists, ctypes, swapping a function's __code__, new audit
#       hooks, trace and profile functions, sub-interpreters, native extensions and
#       bytecode from writable folders.
#
# Student code runs in the same Python process, so this cannot be a complete
# sandbox: see "What the guard cannot promise" in book/for_instructors.md.
#
# Everything below runs in a private globals dict with a private copy of builtins,
# and calls only functions captured before any student code ran.


def _install(config_fd, verdict_fd, user_ns):
    import _hashlib
    import _json
    import _signal
    import _thread
    import ast
    import builtins
    import collections
    import contextvars
    import ctypes
    import enum
    import gc
    import importlib._bootstrap_external as bootstrap_external
    import json
    import operator
    import os
    import sys
    import time
    import types
    import typing

    # -- configuration, read once ----------------------------------------------------
    chunks = []
    while True:
        data = os.read(config_fd, 1 << 20)
        if not data:
            break
        chunks.append(data)
    os.close(config_fd)
    config = json.loads(b"".join(chunks).decode("utf-8"))
    key = bytes.fromhex(config.pop("key"))
    cell_timeout = float(config["cell_timeout"])
    trusted_prefixes = tuple(config["trusted_prefixes"])

    # Non-dumpable: no other process of this uid may ptrace this one or read its memory.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)

    # -- private references (every function the guard calls later is one of these) ----
    get_ident = _thread.get_ident
    start_thread = _thread.start_new_thread
    allocate_lock = _thread.allocate_lock
    getframe = sys._getframe
    monotonic = time.monotonic
    hmac_digest = _hashlib.hmac_digest
    encode_string = _json.encode_basestring_ascii
    write = os.write
    FunctionType, ModuleType, FrameType, TracebackType, CodeType = (
        types.FunctionType, types.ModuleType, types.FrameType, types.TracebackType, types.CodeType)
    copy_context = contextvars.copy_context
    set_signal = _signal.signal
    gc_set_debug = gc.set_debug
    set_recursion_limit = sys.setrecursionlimit
    real_audit = sys.audit
    type_name = type.__dict__["__name__"].__get__
    class_dict = type.__dict__["__dict__"].__get__
    module_dict = ModuleType.__dict__["__dict__"].__get__
    exception_traceback = BaseException.__dict__["__traceback__"].__get__
    set_class = object.__setattr__
    type_setattr, type_delattr = type.__setattr__, type.__delattr__
    is_ = operator.is_
    MISSING = object()
    MethodType = types.MethodType
    import functools
    partial_type = functools.partial
    sys_modules = sys.modules

    # -- the libraries the instructor's cells import ---------------------------------
    import_errors = []
    for name in config["modules"]:
        try:
            __import__(name)
        except BaseException as error:  # the cell that imports it reports it
            import_errors.append(f"{name}: {type(error).__name__}")
    # torch records the caller's stack (traceback.format_stack) each time a seed is set
    # before CUDA starts; that would hand the running test's frames to library code the
    # student may have replaced. The record only serves CUDA error messages.
    no_stack = types.SimpleNamespace(format_stack=lambda: [])
    for name, module in list(sys.modules.items()):
        if type(name) is str and name.startswith("torch.") and hasattr(module, "_lazy_call") and \
                getattr(module, "traceback", None) is not None:
            module.traceback = no_stack
    families = tuple(config["families"])
    family_prefixes = tuple(f + "." for f in families)

    def protected(name):
        return type(name) is str and (name in families or name.startswith(family_prefixes))

    # A snapshot of every module of those families, and of the classes they define.
    module_snapshot = {}  # name -> (module, its type, copy of its namespace)
    for name, module in list(sys.modules.items()):
        if type(module) is ModuleType and protected(name):
            module_snapshot[name] = (module, type(module), dict(module_dict(module)))
    for name in ("builtins", "math"):
        module = sys.modules[name]
        module_snapshot.setdefault(name, (module, type(module), dict(module_dict(module))))
    class_snapshot = []  # (class, its metaclass, copy of its namespace)
    seen = set()
    for name, (module, _, namespace) in module_snapshot.items():
        for value in namespace.values():
            if isinstance(value, type) and id(value) not in seen and protected(value.__dict__.get("__module__")):
                seen.add(id(value))
                if not value.__flags__ & (1 << 8):  # Py_TPFLAGS_IMMUTABLETYPE: nothing to guard
                    class_snapshot.append((value, type(value), dict(class_dict(value))))
    del seen
    real_modules = {id(entry[0]): name for name, entry in module_snapshot.items()}
    # Proxied modules: those the instructor imports, their parents and public submodules.
    proxied = set()
    pending = [n for n in config["modules"] if n in module_snapshot]
    for name in config["modules"]:
        parts = name.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in module_snapshot]
    while pending:
        name = pending.pop()
        if name in proxied:
            continue
        proxied.add(name)
        for attribute, value in module_snapshot[name][2].items():
            child = real_modules.get(id(value))
            if child is not None and not attribute.startswith("_") and child not in proxied:
                pending.append(child)

    builtins_snapshot = dict(builtins.__dict__)
    # names of builtins that the kernel itself rebinds for each request
    kernel_managed = frozenset({"input", "raw_input", "getpass", "_", "__", "___", "exit", "quit", "get_ipython"})
    builtin_names = frozenset(builtins_snapshot)
    signal_snapshot = {}
    for number in range(1, _signal.NSIG):
        try:
            signal_snapshot[number] = _signal.getsignal(number)
        except (OSError, ValueError):
            pass
    stdout, stderr = sys.stdout, sys.stderr
    recursion_limit = sys.getrecursionlimit()

    # Library functions that look at a caller's frame without handing it on.
    try:
        import typing_extensions
    except ImportError:
        typing_extensions = None
    allowed_callers = frozenset(
        getattr(f, "__func__", f).__code__
        for f in (collections.namedtuple, getattr(typing, "_caller", None), getattr(enum.EnumType, "_create_", None),
                  getattr(typing_extensions, "_caller", None),
                  getattr(typing_extensions, "_has_generic_or_protocol_as_origin", None))
        if hasattr(getattr(f, "__func__", f), "__code__"))
    compile_bytecode = bootstrap_external._compile_bytecode.__code__
    # The import system's own frames, to recognise a library module being imported.
    bootstrap = sys.modules["importlib._bootstrap"]
    call_with_frames_removed = bootstrap._call_with_frames_removed.__code__
    exec_module = bootstrap_external._LoaderBasics.exec_module.__code__
    load_unlocked = bootstrap._load_unlocked.__code__
    os_open, os_read, os_close, O_RDONLY = os.open, os.read, os.close, os.O_RDONLY

    # -- the instructor's cells, compiled now ----------------------------------------
    AUDIT = "__autograder_audit__"

    def wrap(source, filename):
        """The cell as one try statement whose `else:` reports that it ran to its end."""
        tree = ast.parse(source, filename, "exec")
        body = tree.body or [ast.Pass(lineno=1, col_offset=0, end_lineno=1, end_col_offset=0)]
        failed = ast.parse(f"{AUDIT}('autograder.failed', __autograder_error__)").body
        passed = ast.parse(f"{AUDIT}('autograder.passed')").body
        handler = ast.ExceptHandler(type=ast.Name("BaseException", ast.Load()),
                                    name="__autograder_error__", body=failed)
        statement = ast.Try(body=body, handlers=[handler], orelse=passed, finalbody=[])
        ast.copy_location(statement, body[0])
        ast.copy_location(handler, body[0])
        ast.copy_location(handler.type, body[0])
        tree.body = [statement]
        ast.fix_missing_locations(tree)
        return compile(tree, filename, "exec", dont_inherit=True, optimize=0)

    cells = {}  # key -> (code or None, is a test, source lines, problem)
    for cell_key, (source, is_test) in config["cells"].items():
        try:
            cells[cell_key] = (wrap(source, f"<{cell_key}>"), bool(is_test), source.splitlines(), "")
        except (SyntaxError, ValueError) as error:
            cells[cell_key] = (None, bool(is_test), source.splitlines(), f"{type(error).__name__}: {error}")
    del config

    # -- state -----------------------------------------------------------------------
    state = {"run": None, "notes": [], "seq": 0}
    used_nonces = set()
    busy = set()  # threads in which the guard itself reads a frame attribute right now
    shared = {}  # names the instructor's cells defined: private, given to each cell
    instructor_functions = {}  # id -> function defined by an instructor cell
    main_thread = get_ident()
    own_codes = set()

    def note(text):
        if len(state["notes"]) < 50:
            state["notes"].append(text[:300])

    # -- the channel to the grader ---------------------------------------------------
    def send(fields):
        state["seq"] += 1
        parts = ['"seq": ' + str(state["seq"])]
        for name, value in fields.items():
            if type(value) is str:
                text = encode_string(value[:20000])
            elif type(value) is bool:
                text = "true" if value else "false"
            elif type(value) is list:
                text = "[" + ", ".join(encode_string(v[:4000] if type(v) is str else "?") for v in value[:200]) + "]"
            else:
                text = encode_string("?")
            parts.append(encode_string(name) + ": " + text)
        body = ("{" + ", ".join(parts) + "}").encode("ascii")
        line = body + b"\t" + hmac_digest(key, body, "sha256").hex().encode("ascii") + b"\n"
        while line:
            line = line[write(verdict_fd, line):]

    # -- frames ------------------------------------------------------------------------
    def code_of(frame):
        ident = get_ident()
        busy.add(ident)
        try:
            return frame.f_code
        finally:
            busy.discard(ident)

    def caller(depth):
        """(code, frame) `depth` frames down from caller() itself (2 from the hook: who raised the event)."""
        ident = get_ident()
        busy.add(ident)
        try:
            frame = getframe(depth)
            return frame.f_code, frame
        finally:
            busy.discard(ident)

    def forbidden_chain(frame):
        """True if `frame` or a frame below it is the guard's or the running cell's."""
        run = state["run"]
        genuine = run["code"] if run is not None else None
        depth = 0
        while frame is not None:
            if depth > 5000:
                return True
            code = code_of(frame)
            if code in own_codes or code is genuine:
                return True
            frame = frame.f_back
            depth += 1
        return False

    def trusted(code):
        """Library code: its file is in a read-only folder. (Code objects claiming such a
        file name can only come from that file: see the "compile" and "marshal.loads"
        events below.)"""
        filename = code.co_filename
        return type(filename) is str and filename.startswith(trusted_prefixes)

    def importing_library(frame):
        """True if `frame` (and every frame down to the import) is library code that runs
        because a library module is being imported: a lazy import inside a test (PyTorch
        imports sympy on first use of some features) may look at its own frames."""
        depth = 0
        while frame is not None and depth < 200:
            code = code_of(frame)
            if code is call_with_frames_removed:
                after = frame.f_back
                if after is not None and code_of(after) is exec_module:
                    after = after.f_back
                    return after is not None and code_of(after) is load_unlocked
                return False
            if not trusted(code):
                return False
            frame = frame.f_back
            depth += 1
        return False

    def file_bytes(path):
        try:
            fd = os_open(path, O_RDONLY)
        except OSError:
            return None
        try:
            chunks = []
            while True:
                chunk = os_read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os_close(fd)

    class Refused(RuntimeError):
        pass

    def refuse(what):
        run = state["run"]
        note(f"refused {what}" + (f" while {run['key']} ran" if run is not None else ""))
        raise Refused(f"The grader does not allow {what} in graded code.")

    # -- the audit hook --------------------------------------------------------------
    def hook(event, args):
        if get_ident() in busy or type(event) is not str:
            return
        if event == "sys._getframe":
            code, frame = caller(2)
            if code in own_codes or code in allowed_callers:
                return
            if type(args[0]) is not FrameType or forbidden_chain(args[0]):
                if importing_library(frame):
                    return
                refuse(f"access to the frames of a running test (sys._getframe, from {code.co_name} "
                       f"in {code.co_filename})")
            return
        if event == "object.__getattr__":
            obj, name = args[0], args[1]
            if type(name) is not str:
                return
            if name == "tb_frame" and type(obj) is TracebackType:
                code, _ = caller(2)
                if code in own_codes:
                    return
                ident = get_ident()
                busy.add(ident)
                try:
                    frame = obj.tb_frame
                finally:
                    busy.discard(ident)
                if forbidden_chain(frame):
                    refuse("access to the frames of a running test or of the grader (tb_frame)")
                return
            if name in ("gi_frame", "cr_frame", "ag_frame"):
                code, _ = caller(2)
                if code not in own_codes:
                    refuse(f"access to generator frames ({name})")
            return
        if event == "object.__setattr__":
            if len(args) > 1 and type(args[1]) is str and args[1] == "__code__":
                refuse("replacing a function's __code__")
            return
        if event.startswith("ctypes."):
            code, _ = caller(2)
            if code not in own_codes:
                refuse("ctypes")
            return
        if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
                     "sys.addaudithook", "cpython.PyInterpreterState_New", "code.__new__"):
            refuse(event)
        if event in ("sys.settrace", "sys.setprofile"):
            if not args or args[0] is not None:
                refuse(f"{event} (trace and profile functions)")
            return
        if event == "compile":
            filename = args[1] if len(args) > 1 else None
            if type(filename) is str and filename.startswith(trusted_prefixes):
                source = args[0]
                if type(source) is str:
                    source = source.encode("utf-8")
                if type(source) is not bytes or file_bytes(filename) != source:
                    refuse("compiling code under the name of a library file")
            return
        if event == "marshal.loads":
            code, frame = caller(2)
            if code in own_codes:
                return
            if code is compile_bytecode:
                path = frame.f_locals.get("bytecode_path")
                data = args[0] if args else None
                if type(path) is str and path.startswith(trusted_prefixes) and type(data) in (bytes, memoryview):
                    content = file_bytes(path)
                    if content is not None and content[16:] == bytes(data):
                        return
            refuse("marshal.loads (building code objects from bytes)")
        if event == "import":
            if len(args) > 1 and args[1] is not None:  # a native extension module
                path = args[1]
                if type(path) is not str or not path.startswith(trusted_prefixes):
                    refuse("loading a native extension module from a writable folder")
            return
        if event == "open":
            path = args[0] if args else None
            if type(path) is str and path.endswith((".pyc", ".pyo")) and not path.startswith(trusted_prefixes):
                refuse("loading compiled bytecode from a writable folder")
            return
        if event == "autograder.run":
            run_cell(args)
            return
        if event == "autograder.passed" or event == "autograder.failed":
            verdict(event, args)
            return

    # -- libraries -----------------------------------------------------------------------
    def same(current, snapshot):
        return len(current) == len(snapshot) and all(map(is_, current.values(), snapshot.values())) \
            and all(map(is_, current, snapshot))

    def student_made(value, depth=0):
        """True if `value` comes from code outside the read-only library folders (the
        student's), as opposed to a library's own lazy loading, which also rebinds names."""
        if value is MISSING:
            return True
        kind = type(value)
        if kind is FunctionType:
            return not trusted(value.__code__)
        if depth > 3:
            return True
        if kind is MethodType:
            return student_made(value.__func__, depth + 1) or student_made(value.__self__, depth + 1)
        if kind is partial_type:
            return student_made(value.func, depth + 1)
        cls = value if isinstance(value, type) else kind
        if not cls.__flags__ & (1 << 9):  # not a heap type: defined in C, by Python or a library
            return False
        module_name = class_dict(cls).get("__module__")
        module = sys_modules.get(module_name) if type(module_name) is str else None
        filename = module_dict(module).get("__file__") if type(module) is ModuleType else None
        return not (type(filename) is str and filename.startswith(trusted_prefixes))

    def replaced(current, snapshot):
        """Names of `snapshot` that `current` lost or rebound to something of the student's.

        Added names do not count (an added name cannot change what the tests, which see
        the snapshot, call) and neither do names a library rebinds itself."""
        if len(current) >= len(snapshot) and all(map(is_, snapshot, current)) and \
                all(map(is_, snapshot.values(), current.values())):
            return []
        clean = {k: v for k, v in list(current.items()) if type(k) is str}
        return [k for k, v in snapshot.items() if clean.get(k, MISSING) is not v and student_made(clean.get(k, MISSING))]

    def class_changes(cls, snapshot):
        current = class_dict(cls)
        if same(current, snapshot):
            return [], []
        clean = {k: v for k, v in list(current.items()) if type(k) is str}
        return ([k for k, v in snapshot.items() if clean.get(k, MISSING) is not v and student_made(clean.get(k, MISSING))],
                [k for k, v in clean.items() if k not in snapshot and student_made(v)])

    def restore_libraries():
        """Put back every module and class attribute that student code changed; name them."""
        changed = []
        for name, (module, module_type, snapshot) in module_snapshot.items():
            if type(module) is not module_type:
                changed.append(f"{name}.__class__")
                set_class(module, "__class__", module_type)
            current = module_dict(module)
            for attribute in replaced(current, snapshot):
                if name == "builtins" and attribute in kernel_managed:
                    continue
                changed.append(f"{name}.{attribute}")
                current[attribute] = snapshot[attribute]
        for cls, metaclass, snapshot in class_snapshot:
            if type(cls) is not metaclass:
                changed.append(f"{type_name(cls)}.__class__")
                try:
                    set_class(cls, "__class__", metaclass)
                except (TypeError, AttributeError):
                    pass
            rebound, added = class_changes(cls, snapshot)
            for attribute in rebound:
                changed.append(f"{type_name(cls)}.{attribute}")
                try:
                    type_setattr(cls, attribute, snapshot[attribute])
                except (TypeError, AttributeError):
                    pass
            for attribute in added:
                changed.append(f"{type_name(cls)}.{attribute}")
                try:
                    type_delattr(cls, attribute)
                except (TypeError, AttributeError):
                    pass
        return changed

    def libraries_changed():
        changed = []
        for name, (module, module_type, snapshot) in module_snapshot.items():
            if type(module) is not module_type:
                changed.append(f"{name}.__class__")
            changed += [f"{name}.{a}" for a in replaced(module_dict(module), snapshot)
                        if name != "builtins" or a not in kernel_managed]
        for cls, metaclass, snapshot in class_snapshot:
            if type(cls) is not metaclass:
                changed.append(f"{type_name(cls)}.__class__")
            rebound, added = class_changes(cls, snapshot)
            changed += [f"{type_name(cls)}.{a}" for a in rebound + added]
        return changed

    # -- running an instructor cell ----------------------------------------------------
    def make_proxies():
        """Private copies of the proxied modules: name -> (proxy, module). Made once; each
        cell starts with them as made (restore_proxies) and must leave them so (intact)."""
        table = {name: (ModuleType(name), module_snapshot[name][0]) for name in proxied}
        for name, (proxy, module) in table.items():
            namespace = dict(module_snapshot[name][2])
            for attribute, value in namespace.items():
                child = real_modules.get(id(value))
                if child is not None and child in table:
                    namespace[attribute] = table[child][0]
            module_dict(proxy).update(namespace)
        return table

    def make_importer(table, real_import):
        by_name = {name: entry[0] for name, entry in table.items()}
        str_type = str

        def __import__(name, globals=None, locals=None, fromlist=(), level=0):
            if level == 0 and type(name) is str_type:
                if fromlist:
                    found = by_name.get(name)
                elif name in by_name:
                    found = by_name.get(name.partition(".")[0])
                else:
                    found = None
                if found is not None:
                    return found
            return real_import(name, globals, locals, fromlist, level)

        # Its only globals are empty: nothing of the guard is reachable from it.
        return FunctionType(__import__.__code__, {"__builtins__": {"type": type}}, "__import__",
                            __import__.__defaults__, __import__.__closure__)

    def rebind(function, namespace):
        rebuilt = FunctionType(function.__code__, namespace, function.__name__, function.__defaults__,
                               function.__closure__)
        rebuilt.__kwdefaults__ = function.__kwdefaults__
        rebuilt.__qualname__ = function.__qualname__
        rebuilt.__doc__ = function.__doc__
        return rebuilt

    def for_cell(value, ns, table):
        """A name of `shared` as the running cell sees it."""
        if type(value) is ModuleType:
            name = real_modules.get(id(value))
            return table[name][0] if name in table else value
        if type(value) is FunctionType and instructor_functions.get(id(value)) is value:
            return rebind(value, ns)
        return value

    def for_student(value, table):
        """A name an instructor cell defined, as the student's namespace gets it."""
        if type(value) is ModuleType:
            for proxy, module in table.values():
                if value is proxy:
                    return module
            return value
        if type(value) is FunctionType and instructor_functions.get(id(value)) is value:
            return rebind(value, user_ns)
        return value

    def restore_proxies():
        for name, (proxy, module) in table.items():
            current = module_dict(proxy)
            if not same(current, proxy_copies[name]):
                current.clear()
                current.update(proxy_copies[name])

    def intact(run):
        """The running cell's helpers, proxies and builtins are as the guard made them."""
        ns = run["ns"]
        for name, value in run["given"].items():
            current = ns.get(name, MISSING)
            if current is value or not (name == AUDIT or type(value) in (ModuleType, FunctionType)):
                continue
            if type(value) is ModuleType and id(current) in proxy_ids:  # the test imported it again
                continue
            if type(current) is FunctionType and current.__globals__ is ns and \
                    current.__code__ in run["nested_codes"]:  # the cell defined it again
                continue
            return f"the test's name {name!r} was replaced"
        if not same(run["builtins"], run["builtins_copy"]):
            return "the test's builtins were modified"
        for name, (proxy, module) in table.items():
            if not same(module_dict(proxy), proxy_copies[name]):
                return f"the test's copy of {name} was modified"
        return ""

    def nested_codes(code):
        found, pending = set(), [code]
        while pending:
            current = pending.pop()
            if current not in found:
                found.add(current)
                pending += [c for c in current.co_consts if type(c) is CodeType]
        return found

    def run_cell(args):
        if get_ident() != main_thread or state["run"] is not None or len(args) != 2:
            note("an instructor cell was requested from the wrong place")
            return
        cell_key, nonce = args
        if type(cell_key) is not str or type(nonce) is not str or nonce in used_nonces or cell_key not in cells:
            note("an instructor cell was requested with an unknown key or a used nonce")
            return
        used_nonces.add(nonce)
        code, is_test, lines, problem = cells[cell_key]
        started = monotonic()
        if code is None:
            result = {"status": "failed", "ename": "SyntaxError", "evalue": problem, "traceback": []}
        else:
            result = execute(cell_key, code, is_test, lines)
        result.update({"type": "verdict", "cell": cell_key, "nonce": nonce,
                       "seconds": str(round(monotonic() - started, 3)), "notes": state["notes"]})
        state["notes"] = []
        send(result)

    def execute(cell_key, code, is_test, lines):
        # A clean start: libraries, signal handlers, streams as the guard found them.
        changed = restore_libraries()
        if changed:
            note("student code had changed " + ", ".join(changed[:8]) + (" ..." if len(changed) > 8 else ""))
        for number, handler in signal_snapshot.items():
            try:
                set_signal(number, handler)
            except (OSError, ValueError, TypeError):
                pass
        gc_set_debug(0)
        set_recursion_limit(recursion_limit)
        sys.stdout, sys.stderr = stdout, stderr
        # The namespace: the student's definitions, then the instructor's (which win),
        # with private copies of the libraries and of builtins.
        restore_proxies()
        ns = {}
        for name, value in list(user_ns.items()):
            if type(name) is str and not name.startswith("__") and name not in builtin_names:
                ns[name] = value
        given = {AUDIT: real_audit}
        for name, value in shared.items():
            given[name] = for_cell(value, ns, table)
        ns.update(given)
        private_builtins = dict(builtins_snapshot)
        private_builtins["__import__"] = importer
        ns["__builtins__"] = private_builtins
        ns["__name__"] = "__main__"
        before = dict(ns)
        run = {"key": cell_key, "code": code, "ns": ns, "given": given, "builtins": private_builtins,
               "builtins_copy": dict(private_builtins),
               "nested_codes": nested_codes(code),
               "thread": None, "verdict": None, "done": allocate_lock(), "started": allocate_lock(),
               "lines": lines}
        run["done"].acquire()
        run["started"].acquire()
        state["run"] = run
        finished = interrupted = False
        try:
            try:
                run["thread"] = start_thread(copy_context().run, (exec, code, ns))
            finally:
                run["started"].release()
            finished = run["done"].acquire(True, cell_timeout)
            if not finished:
                interrupted = True
                set_async_exc(run["thread"], KeyboardInterrupt)
                finished = run["done"].acquire(True, 10.0)
        except KeyboardInterrupt:
            interrupted = True
            if run["thread"] is not None:
                set_async_exc(run["thread"], KeyboardInterrupt)
                finished = run["done"].acquire(True, 10.0)
        if not finished:
            return {"status": "timeout", "ename": "TimeoutError", "traceback": [],
                    "evalue": f"the cell did not finish within {cell_timeout:g} s and could not be interrupted"}
        state["run"] = None
        result = run["verdict"]
        if interrupted and result.get("status") != "passed":
            result = {"status": "failed", "ename": "TimeoutError", "traceback": result.get("traceback", []),
                      "evalue": f"the cell ran past its time limit ({cell_timeout:g} s) and was interrupted"}
        # Names the cell defined carry on to later cells; an instructor cell's (not a
        # test's) also reach the student's namespace, as in a notebook.
        for name, value in ns.items():
            if type(name) is str and not name.startswith("__") and before.get(name, MISSING) is not value:
                if type(value) is FunctionType and value.__globals__ is ns:
                    instructor_functions[id(value)] = value
                shared[name] = for_student(value, table) if type(value) is ModuleType else value
                if not is_test:
                    user_ns[name] = for_student(value, table)
        return result

    def verdict(event, args):
        run = state["run"]
        code, frame = caller(3)  # 0 caller, 1 verdict, 2 hook, 3 who raised the event
        if run is None:
            note(f"a forged {event} event was ignored")
            return
        run["started"].acquire()
        run["started"].release()
        if run["verdict"] is not None or get_ident() != run["thread"] or code is not run["code"]:
            note(f"a forged {event} event was ignored")
            return
        if frame.f_back is not None or frame.f_globals is not run["ns"]:
            note(f"{event} from a second run of the cell was ignored")
            return
        if event == "autograder.passed":
            problem = intact(run)
            if not problem:
                changed = libraries_changed()
                if changed:
                    problem = "libraries were modified while the test ran: " + ", ".join(changed[:5])
            if problem:
                note(problem)
                run["verdict"] = {"status": "failed", "ename": "TamperingError", "traceback": [],
                                  "evalue": f"The grader does not accept this result: {problem}."}
            else:
                run["verdict"] = {"status": "passed"}
        else:
            run["verdict"] = describe(args[0] if args else None, run)
        run["done"].release()

    def describe(error, run):
        """ename, evalue and a short traceback of an exception, computed defensively."""
        try:
            ename = type_name(type(error))
        except BaseException:
            ename = "Exception"
        try:
            evalue = str(error)
            evalue = evalue if type(evalue) is str else "<unprintable>"
        except BaseException:
            evalue = "<unprintable>"
        lines = []
        try:
            tb = exception_traceback(error)
            while type(tb) is TracebackType and len(lines) < 30:
                code = code_of(tb.tb_frame)
                number = tb.tb_lineno
                if code is run["code"]:
                    text = run["lines"][number - 1].strip() if 0 < number <= len(run["lines"]) else ""
                    lines.append(f"  In this cell, line {number}:\n    {text}")
                elif code not in own_codes:
                    lines.append(f"  File {code.co_filename}, line {number}, in {code.co_name}")
                tb = tb.tb_next
        except BaseException:
            pass
        return {"status": "failed", "ename": ename, "evalue": evalue[:5000],
                "traceback": ["Traceback (most recent call last):", *lines, f"{ename}: {evalue[:5000]}"]}

    functions = (hook, note, send, code_of, caller, forbidden_chain, trusted, importing_library, file_bytes,
                 refuse, same, student_made, replaced, class_changes,
                 restore_libraries,
                 libraries_changed, make_proxies, make_importer, rebind, for_cell, for_student, intact,
                 restore_proxies,
                 run_cell, execute, verdict, describe, wrap, protected, nested_codes)
    pending_codes = [f.__code__ for f in functions] + [_install.__code__]
    while pending_codes:
        code = pending_codes.pop()
        if code not in own_codes:
            own_codes.add(code)
            pending_codes += [c for c in code.co_consts if type(c) is CodeType]
    own_codes = frozenset(own_codes)

    table = make_proxies()
    proxy_copies = {name: dict(module_dict(proxy)) for name, (proxy, module) in table.items()}
    proxy_ids = frozenset(id(proxy) for proxy, module in table.values())
    importer = make_importer(table, builtins_snapshot["__import__"])

    sys.addaudithook(hook)
    send({"type": "ready", "import_errors": import_errors, "modules": str(len(module_snapshot)),
          "classes": str(len(class_snapshot)), "proxied": str(len(proxied))})
