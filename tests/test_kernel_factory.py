"""Kernels forked by the kernel factory (autograder/isolation/kernel_factory.py) are kernels like
any other: the same sandbox, user, environment and limits, and nothing of the factory's.

A grading worker forks its kernels from a process that has imported PyTorch once; these
tests start kernels both ways in this process and compare what student code sees.
"""

import json
import shutil

import pytest

from autograder.judging import executor, kernel_start
from autograder.isolation import kernel_factory, sandbox
from conftest import REPO

PROBE = f"""
import ctypes, json, os, random, socket, sys
libc = ctypes.CDLL(None)
fds = []
for fd in range(256):
    try:
        os.fstat(fd)
        fds.append(fd)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1)
    network = "open"
except OSError as error:
    network = type(error).__name__
print(json.dumps({{
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid()], "groups": os.getgroups(),
    "cwd": os.getcwd(), "env": dict(os.environ), "path": sys.path, "argv0": os.path.basename(sys.argv[0]),
    "capabilities": [c for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1],  # PR_CAPBSET_READ
    "no_new_privs": libc.prctl(39, 0, 0, 0, 0), "fds": fds, "root": sorted(os.listdir("/")),
    "network": network, "repository": os.path.exists({str(REPO / "README.md")!r}), "session_leader": os.getsid(0) == os.getpid(),
    "random": random.random(), "numpy_random": __import__("numpy").random.rand(),
}}))
"""
PRELOAD = ("numpy", "torch")


@pytest.fixture(scope="module")
def isolation():
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed: no sandbox")
    isolation = sandbox.probe()
    if not isolation.as_root:
        pytest.skip("the kernel factory serves graders that run as root")
    return isolation


@pytest.fixture
def factories(monkeypatch):
    factories = kernel_start.Factories()
    monkeypatch.setattr(kernel_start, "FACTORIES", factories)
    yield factories
    factories.close()


def probe(isolation, name):
    """What student code sees in a new kernel (started the way kernel_start.FACTORIES says)."""
    box, kernel = kernel_start.start_kernel(isolation, executor.Settings(), 3, name, preload=PRELOAD)
    try:
        printed = []
        reply = kernel.execute(PROBE, 60, lambda m: printed.append(m.get("content", {}).get("text", "")))
        assert reply["status"] == "ok", reply
        return type(kernel.process).__name__, json.loads("".join(printed))
    finally:
        kernel.close()
        box.close()


def test_a_forked_kernel_sees_what_a_started_one_sees(isolation, factories, monkeypatch):
    how, forked = probe(isolation, "forked")
    assert how == "Forked" and not factories.broken
    monkeypatch.setattr(kernel_start, "FACTORIES", None)
    how, started = probe(isolation, "started")
    assert how == "Popen"
    for key in ("groups", "cwd", "env", "path", "argv0", "root", "network", "repository"):
        assert forked[key] == started[key], key
    assert len(set(forked["ids"])) == 1 and forked["ids"][0] >= sandbox.UID_BASE
    assert forked["capabilities"] == [] and forked["no_new_privs"] == 1
    assert forked["network"] != "open" and not forked["repository"]
    assert forked["session_leader"]  # a session of its own, no terminal (bubblewrap's --new-session)
    # Nothing of the factory's stays open: the standard streams, the agent's socket, the kernel's own.
    assert len(forked["fds"]) <= len(started["fds"]), (forked["fds"], started["fds"])


def test_forked_kernels_draw_their_own_random_numbers(isolation, factories):
    _, first = probe(isolation, "first")
    _, second = probe(isolation, "second")
    assert first["random"] != second["random"]
    assert first["numpy_random"] != second["numpy_random"]


def test_killing_the_sandbox_ends_a_forked_kernel(isolation, factories):
    box, kernel = kernel_start.start_kernel(isolation, executor.Settings(), 3, "kill", preload=PRELOAD)
    try:
        assert isinstance(kernel.process, kernel_factory.Forked) and kernel.alive()
        box.kill()
        assert kernel.process.poll() is not None and not kernel.alive()
    finally:
        kernel.close()
        box.close()


def test_a_failing_factory_leaves_kernels_starting_from_nothing(isolation, factories, monkeypatch):
    def broken(*args, **kwargs):
        raise kernel_factory.FactoryFailed("setns(mnt): Operation not permitted")

    monkeypatch.setattr(kernel_factory.KernelFactory, "spawn", broken)
    how, seen = probe(isolation, "fallback")
    assert how == "Popen" and "setns" in factories.broken
    assert seen["network"] != "open"


def test_a_forked_kernel_that_dies_at_start_is_replaced_by_one_started_from_nothing(isolation, factories,
                                                                                    monkeypatch):
    spawn = kernel_factory.KernelFactory.spawn

    def spawn_and_kill(self, *args, **kwargs):
        forked = spawn(self, *args, **kwargs)
        forked.kill()
        return forked

    monkeypatch.setattr(kernel_factory.KernelFactory, "spawn", spawn_and_kill)
    how, seen = probe(isolation, "replaced")
    assert how == "Popen" and "did not start" in factories.broken
    assert seen["network"] != "open"


def test_the_workers_of_a_batch_fork_their_kernels_from_one_factory(isolation, monkeypatch):
    """Two workers (two Factories, as two processes would have) given the batch's factory
    by BATCH_FACTORIES: both kernels are children of that one process, and both run."""
    factories, shared = kernel_start.start_batch_factories([PRELOAD])
    assert len(factories) == 1 and shared
    monkeypatch.setenv(kernel_start.BATCH_FACTORIES, shared)
    try:
        parents = []
        for name in ("first-worker", "second-worker"):
            monkeypatch.setattr(kernel_start, "FACTORIES", kernel_start.Factories())
            try:
                box, kernel = kernel_start.start_kernel(isolation, executor.Settings(), 3, name, preload=PRELOAD)
                try:
                    assert isinstance(kernel.process, kernel_factory.Forked) and kernel.alive()
                    assert not kernel_start.FACTORIES.broken
                    status = open(f"/proc/{kernel.process.pid}/status").read()
                    parents.append(int(status.split("PPid:")[1].split()[0]))
                finally:
                    kernel.close()
                    box.close()
            finally:
                kernel_start.FACTORIES.close()
        assert parents == [factories[0].process.pid] * 2
    finally:
        for factory in factories:
            factory.close()


def test_the_batch_factory_preloads_what_the_executor_preloads():
    """grade.py computes each notebook's preload without importing the executor: it must
    be the executor's own, or the workers would not find the batch's factory."""
    import nbformat

    from autograder import paths

    for assignment in paths.assignments():
        for path in paths.assignment_notebooks(assignment):
            notebook = nbformat.read(path, as_version=4)
            expected = kernel_start.imported_modules(
                source for source, solution in executor.reference_cells(notebook) if not solution)
            assert kernel_start.instructor_preload(notebook) == expected, path
            assert "torch" in expected, path  # what makes the factory worth having
