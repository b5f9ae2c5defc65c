"""Start sandboxed kernels fast: fork each one from a process that imported PyTorch once.

A kernel that starts from nothing spends most of its start importing Python, ipykernel,
NumPy and PyTorch (about 2.5 s of CPU, more than the grading of a whole submission).
The factory is a fresh Python process that imports those once and then only forks:
started by the grader for all the workers of a batch (each connects to it over a unix
socket in a folder only root can enter), or by a worker for itself. It never runs student code and never holds anything of the
grader's (no reference solution, no test, no key): its memory is what a new kernel's
would be after its imports.

For each kernel the worker first builds the sandbox as before, with bubblewrap, around
a placeholder process (`sleep`): the same mounts, cgroups, namespaces and limits. Then
it asks the factory for a kernel in that sandbox. The factory forks; the child joins
the sandbox's cgroups, takes its limits and enters its namespaces (mount, pid, network,
ipc, uts, cgroup); it forks once more, so that the kernel is a member of the sandbox's
pid namespace; the kernel starts its own session, drops to the sandbox's unprivileged
uid (no capabilities, not even in its bounding set, and no_new_privs), takes the
sandbox's environment, closes every file descriptor it was not given, and runs
ipykernel. What the kernel sees is what a kernel started by bubblewrap sees; killing
the sandbox kills it with the placeholder's pid namespace.

Only a worker running as root uses the factory (entering the sandbox's namespaces needs
privileges the instructor's own uid does not have on the host); otherwise, and whenever
the factory fails, kernels start from nothing as before.

The worker and the factory talk over a unix socket (a socket pair, or the worker's
connection to the batch's factory): a length-prefixed JSON request with
file descriptors attached (the kernel's stderr and its end of the agent's socket); the
answer, from the factory's child, carries the kernel's pid and a pidfd that says when
the kernel has ended.
"""

import array
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile

# Namespaces to enter, from the sandbox's placeholder; mount last (it changes the root).
NAMESPACES = (("user", 0x10000000), ("ipc", 0x08000000), ("uts", 0x04000000), ("net", 0x40000000),
              ("cgroup", 0x02000000), ("pid", 0x20000000), ("mnt", 0x00020000))
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 24, 36, 38
MAX_FDS = 4
MAX_REQUEST = 1 << 20

# PyTorch loads its meta-device machinery on first use (about 0.9 s of CPU and 800
# modules of torch._inductor, which a linear layer with a bias on a batch needs), and the tests use the meta
# device to catch tensors made on the wrong device: load it before any test runs. The
# factory runs it once for all the kernels it forks; a kernel started from nothing runs
# it while it waits for its notebook (judging/kernel_start.py).
WARM_TORCH = """\
def __warm_torch():
    import os, torch
    before = set(os.environ)
    try:
        torch.nn.functional.linear(torch.empty(2, 3, 4, device="meta"),
                                   torch.empty(4, 4, device="meta", requires_grad=True),
                                   torch.empty(4, device="meta", requires_grad=True)).sum().backward()
    except Exception:
        pass
    for name in set(os.environ) - before:  # TORCHINDUCTOR_CACHE_DIR: not the kernel's to see
        del os.environ[name]
__warm_torch()
del __warm_torch
"""


# -- messages: 4-byte length, JSON, file descriptors ------------------------------------------

def send_message(sock, message, fds=()):
    data = json.dumps(message).encode()
    sock.sendmsg([struct.pack("!I", len(data)) + data],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else [])


def receive_message(sock):
    """(message, fds), or (None, []) when the other side has closed."""
    header, fds, _, _ = socket.recv_fds(sock, 4, MAX_FDS)
    if not header:
        return None, []
    while len(header) < 4:
        more = sock.recv(4 - len(header))
        if not more:
            raise ConnectionError("the message was cut short")
        header += more
    (size,) = struct.unpack("!I", header)
    if size > MAX_REQUEST:
        raise ConnectionError("message too long")
    data = b""
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            raise ConnectionError("the message was cut short")
        data += more
    return json.loads(data), list(fds)


# -- the factory's side ----------------------------------------------------------------------

def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        import ctypes

        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def serve(control_fd, preload, listen_fd=-1):
    """The factory's main loop: import, then fork one kernel per request, until the
    control socket closes. Requests come on the control socket, and, where the factory
    serves a batch's workers (`listen_fd`), on each connection a worker makes."""
    libc = _libc()
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(CHILD_SUBREAPER)")
    control = socket.socket(fileno=control_fd)
    listener = socket.socket(fileno=listen_fd) if listen_fd >= 0 else None
    for module in preload:
        try:
            __import__(module)
        except Exception:  # the kernel will say so when the instructor's cell imports it
            pass
    import ipykernel.kernelapp  # noqa: F401

    if "torch" in sys.modules:  # loaded here once, every kernel forked from us has it
        exec(WARM_TORCH, {})
    # Kernels whose first child has left are ours to reap (we are their subreaper).
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    send_message(control, {"ready": True})
    connections = []
    while True:
        ready, _, _ = select.select([control, *connections] + ([listener] if listener else []), [], [])
        for sock in ready:
            if sock is listener:
                connection, _ = listener.accept()
                connections.append(connection)
                send_message(connection, {"ready": True})
                continue
            request, fds = receive_message(sock)
            if request is None:
                if sock is control:
                    return
                connections.remove(sock)
                sock.close()
                continue
            _fork_kernel(sock, request, fds, libc)


def _fork_kernel(sock, request, fds, libc):
    """Fork a child that makes the requested kernel and answers on `sock`."""
    if os.fork() == 0:
        try:
            _enter_and_fork(sock, request, fds, libc)
        except BaseException as error:  # noqa: BLE001  (reported, then this child ends)
            try:
                send_message(sock, {"error": f"{type(error).__name__}: {error}"})
            finally:
                os._exit(1)
    for fd in fds:
        os.close(fd)


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _enter_and_fork(sock, request, fds, libc):
    """In the factory's child: join the sandbox, fork the kernel, report its pid."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the kernel is reaped by the factory, not here
    me = str(os.getpid()).encode()
    for group in request["cgroups"]:
        fd = os.open(os.path.join(group, "cgroup.procs"), os.O_WRONLY)
        try:
            os.write(fd, me)
        finally:
            os.close(fd)
    import resource

    for which, soft, hard in request["rlimits"]:
        resource.setrlimit(which, (soft, hard))
    holder = request["holder"]
    entering = []
    for name, flag in NAMESPACES:  # all opened first: /proc/HOLDER is gone once inside
        theirs, ours = os.stat(f"/proc/{holder}/ns/{name}"), os.stat(f"/proc/self/ns/{name}")
        if (theirs.st_dev, theirs.st_ino) != (ours.st_dev, ours.st_ino):
            entering.append((os.open(f"/proc/{holder}/ns/{name}", os.O_RDONLY), flag, name))
    if not any(name == "mnt" for _, _, name in entering) or not any(name == "pid" for _, _, name in entering):
        raise RuntimeError("the placeholder is not in a sandbox of its own")
    for fd, flag, name in entering:
        _check(libc.setns(fd, flag), f"setns({name})")
        os.close(fd)
    os.chdir("/")
    pid = os.fork()  # the kernel: the first of our children inside the sandbox's pid namespace
    if pid == 0:
        try:
            _become_kernel(request, fds, libc)
        finally:
            os._exit(70)
    pidfd = os.pidfd_open(pid)
    send_message(sock, {"pid": pid}, [pidfd])
    os._exit(0)


def _become_kernel(request, fds, libc):
    """In the sandbox: drop every privilege, keep only the given descriptors, run ipykernel."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    stderr, agent = fds
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(stderr, 2)
    agent_fd = request["agent_fd"]
    if agent != agent_fd:
        os.dup2(agent, agent_fd, inheritable=True)
    else:
        os.set_inheritable(agent_fd, True)
    limit = os.sysconf("SC_OPEN_MAX")
    os.closerange(3, agent_fd)
    os.closerange(agent_fd + 1, max(limit, agent_fd + 2))
    uid = request["uid"]
    for folder in request["own"]:
        os.chown(folder, uid, uid)
    cap = 0
    while libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != uid:
        raise RuntimeError("could not drop privileges")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    # A fresh process draws new seeds; so does a forked one.
    import random

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    # As `python -m ipykernel_launcher` would: no current folder on the path.
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    import importlib.util

    sys.argv = [importlib.util.find_spec("ipykernel_launcher").origin, *request["kernel_args"]]
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()
    os._exit(0)


# -- the worker's side -----------------------------------------------------------------------

class Forked:
    """A kernel forked by the factory: Popen's poll() and kill(), through a pidfd."""

    def __init__(self, pid, pidfd):
        self.pid, self.pidfd, self.returncode = pid, pidfd, None

    def poll(self):
        if self.returncode is None and self.pidfd is not None:
            if select.select([self.pidfd], [], [], 0)[0]:
                self.returncode = -1  # ended (its status goes to the factory, which reaps it)
        return self.returncode

    def kill(self):
        if self.pidfd is not None and self.poll() is None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self):
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class FactoryFailed(RuntimeError):
    pass


class KernelFactory:
    """One factory process for kernels that preload `preload`: started on first use, or,
    with `address`, the factory of the batch (autograder/grade.py), which this worker
    connects to. `serve_workers=True` makes a batch's factory: start() it, and give its
    `address` to the workers."""

    def __init__(self, preload, env, timeout=120, address=None, serve_workers=False):
        self.preload, self.env, self.timeout = tuple(preload), dict(env), timeout
        self.address, self.serve_workers = address, serve_workers
        self.process = self.sock = None
        self.home = None

    def start(self):
        if self.sock is not None:
            return
        if self.address and not self.serve_workers:  # the batch's factory: connect to it
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(self.address)
            except OSError as error:
                self.sock.close()
                self.sock = None
                raise FactoryFailed(f"cannot reach the batch's kernel factory: {error}") from None
            self._answer()  # {"ready": true}
            return
        ours, theirs = socket.socketpair()
        self.home = tempfile.mkdtemp(prefix="kernel-factory-")  # 0700, root's: only the grader reaches it
        env = {**self.env, "HOME": self.home, "TMPDIR": self.home, "PYTHONPATH": ""}
        listener = None
        if self.serve_workers:
            self.address = os.path.join(self.home, "factory.sock")
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(self.address)
            listener.listen(64)
        listen_fd = listener.fileno() if listener is not None else -1
        try:
            self.process = subprocess.Popen(
                [sys.executable, __file__, str(theirs.fileno()), str(listen_fd), *self.preload],
                pass_fds=[fd for fd in (theirs.fileno(), listen_fd) if fd >= 0], env=env, cwd=self.home,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        finally:
            theirs.close()
            if listener is not None:
                listener.close()
        self.sock = ours
        if not self.serve_workers:  # a batch's factory says it is ready to each worker that connects
            self._answer()  # {"ready": true}

    def _answer(self):
        if not select.select([self.sock], [], [], self.timeout)[0]:
            raise FactoryFailed(f"the kernel factory did not answer within {self.timeout:g} s")
        message, fds = receive_message(self.sock)
        if message is None:
            raise FactoryFailed("the kernel factory stopped")
        if "error" in message:
            for fd in fds:
                os.close(fd)
            raise FactoryFailed(message["error"])
        return message, fds

    def spawn(self, holder, request, stderr_fd, agent_fd):
        """Fork a kernel into the sandbox whose placeholder is `holder`; return a Forked."""
        if self.sock is None:
            self.start()
        send_message(self.sock, {**request, "holder": holder, "agent_fd": agent_fd}, [stderr_fd, agent_fd])
        message, fds = self._answer()
        if len(fds) != 1 or not isinstance(message.get("pid"), int):
            for fd in fds:
                os.close(fd)
            raise FactoryFailed(f"unexpected answer from the kernel factory: {message}")
        return Forked(message["pid"], fds[0])

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.process is not None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        if self.home is not None:
            import shutil

            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None


if __name__ == "__main__":
    del sys.path[0]  # this file's folder: the grader's code is nothing a kernel imports
    serve(int(sys.argv[1]), sys.argv[3:], listen_fd=int(sys.argv[2]))
