"""The sandbox itself (autograder/isolation/sandbox.py), with plain processes instead of a kernel.

Small, bounded versions of what student code might do: look around the filesystem,
write outside its scratch folder, reach the network (loopback included), allocate too
much, start too many processes, leave daemons behind, spin. And the refusal to grade
without a sandbox unless the instructor says --no-isolation.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from autograder import paths
from autograder.isolation import sandbox
from conftest import REPO, opened_to_other_users, processes_with

# A file of the instructor's (the grader's user's) home: a shell history.
HOME_FILES = next((p for p in (Path.home() / ".bash_history", Path.home() / ".profile", Path.home()) if p.exists()),
                  Path.home())


@pytest.fixture(scope="module")
def isolation():
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed: no sandbox")
    return sandbox.probe()


def run(isolation, code, limits=None, files=None, timeout=120):
    """Run Python code in a fresh sandbox; return (completed process, the sandbox's usage)."""
    limits = limits or sandbox.Limits(memory=768 * sandbox.MiB, processes=64, cpu_seconds=60)
    with sandbox.Sandbox(isolation, limits, slot=7, name="test") as box:
        mounted = {f"{sandbox.HOME}/{name}": box.file(name, data) for name, data in (files or {}).items()}
        done = box.run([sys.executable, "-c", textwrap.dedent(code)], timeout=timeout, files=mounted)
        usage = box.usage()
    return done, usage


def test_sandbox_is_described(isolation):
    assert isolation.sandboxed
    assert "no network" in isolation.describe()


def test_filesystem_view_holds_no_course_files(isolation):
    done, _ = run(isolation, f"""
        import json, os
        checks = {{p: os.path.exists(p) for p in [{str(REPO)!r}, {str(paths.SOLUTIONS)!r}, {str(HOME_FILES)!r}, "/proc/1",
                                                 "/home/student/mine.ipynb"]}}
        checks["home"] = sorted(os.listdir("/home/student"))
        checks["repo"] = sorted(os.listdir({str(REPO)!r})) if os.path.isdir({str(REPO)!r}) else []
        checks["cwd"] = os.getcwd()
        print(json.dumps(checks))
        """, files={"mine.ipynb": b"{}"})
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # The repository is not there; where the virtual environment lives inside it, only that is.
    assert set(seen["repo"]) <= {".venv"} and seen[str(paths.SOLUTIONS)] is False, seen
    assert seen[str(HOME_FILES)] is False and seen["/proc/1"] is False
    assert seen["home"] == ["mine.ipynb"] and seen["cwd"] == sandbox.HOME


def test_writes_outside_scratch_never_reach_the_host(isolation, tmp_path):
    marker = f"sandbox-marker-{uuid.uuid4().hex}"
    targets = [tmp_path / marker, REPO / marker, paths.SOLUTIONS / marker, f"/tmp/{marker}"]
    done, _ = run(isolation, f"""
        import os
        for target in {[str(t) for t in targets]!r}:
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w") as handle:
                    handle.write("pwned")
                print("wrote", target)
            except OSError as error:
                print("refused", target, error.strerror)
        try:
            open("/usr/lib/" + {marker!r}, "w")
        except OSError as error:
            print("read-only", error.strerror)
        """)
    assert "read-only" in done.stdout, done.stdout + done.stderr
    for target in targets:
        assert not os.path.exists(target), f"{target} appeared on the host"


def test_runs_as_an_unprivileged_user(isolation):
    done, _ = run(isolation, """
        import os
        print(os.getuid(), os.geteuid())
        try:
            os.setuid(0)
            print("became root")
        except PermissionError:
            print("stays unprivileged")
        """)
    uid, euid = map(int, done.stdout.split()[:2])
    if isolation.as_root:
        assert uid == euid == sandbox.student_uid(7) and uid >= sandbox.UID_BASE
    assert "stays unprivileged" in done.stdout, done.stdout + done.stderr


def test_no_network_not_even_loopback(isolation):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted = []

    def serve():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    stop = threading.Event()
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        done, _ = run(isolation, f"""
            import socket
            for host in ("127.0.0.1", "10.0.0.1", "1.1.1.1"):
                try:
                    socket.create_connection((host, {port} if host == "127.0.0.1" else 53), timeout=3)
                    print("CONNECTED", host)
                except OSError as error:
                    print("no route", host, error)
            try:
                socket.getaddrinfo("pypi.org", 443)
                print("CONNECTED dns")
            except OSError as error:
                print("no dns", error)
            """)
    finally:
        stop.set()
        thread.join()
        server.close()
    assert "CONNECTED" not in done.stdout, done.stdout
    assert not accepted, "the sandbox reached a server on the host's loopback"


def test_memory_limit(isolation):
    limits = sandbox.Limits(memory=512 * sandbox.MiB, processes=64, cpu_seconds=60)
    done, usage = run(isolation, """
        blocks = []
        for i in range(32):
            blocks.append(b"x" * (128 * 1024 * 1024))
            print("allocated", (i + 1) * 128, "MiB", flush=True)
        print("ALL ALLOCATED")
        """, limits=limits)
    assert "ALL ALLOCATED" not in done.stdout
    assert done.returncode != 0
    if isolation.cgroup:
        assert usage.get("oom_kills", 0) >= 1, usage


def test_process_limit_and_nothing_left_running(isolation):
    marker = str(700000 + os.getpid() % 100000)
    limits = sandbox.Limits(memory=768 * sandbox.MiB, processes=40, cpu_seconds=60)
    done, usage = run(isolation, f"""
        import subprocess
        started = 0
        try:
            for _ in range(300):
                subprocess.Popen(["sleep", {marker!r}], start_new_session=True)
                started += 1
        except OSError as error:
            print("refused after", started, error.strerror)
        print("started", started)
        """, limits=limits)
    if isolation.cgroup or isolation.as_root:  # else nothing can limit processes (see sandbox.probe)
        assert "refused after" in done.stdout, done.stdout + done.stderr
        assert int(done.stdout.split("started")[-1]) < 40
    time.sleep(0.5)
    left = processes_with(marker)
    assert not left, f"processes left running after the sandbox closed: {left}"


def test_cpu_time_limit(isolation):
    limits = sandbox.Limits(memory=768 * sandbox.MiB, processes=64, cpu_seconds=2)
    done, _ = run(isolation, """
        while True:
            pass
        """, limits=limits, timeout=300)
    # Stopped inside the sandbox by the CPU limit (SIGXCPU, or SIGKILL if ignored), not by
    # run()'s own timeout (which kills bwrap itself: a negative return code).
    assert done.returncode in (128 + signal.SIGXCPU, 128 + signal.SIGKILL), done.returncode


def test_scratch_folder_is_size_limited(isolation):
    limits = sandbox.Limits(memory=1024 * sandbox.MiB, processes=64, cpu_seconds=60, scratch=64 * sandbox.MiB)
    done, _ = run(isolation, """
        written = 0
        try:
            with open("/home/student/big", "wb") as handle:
                for _ in range(200):
                    handle.write(b"x" * (1024 * 1024))
                    handle.flush()
                    written += 1
        except OSError as error:
            print("stopped", error.strerror)
        print("MiB", written)
        """, limits=limits)
    assert "stopped" in done.stdout, done.stdout + done.stderr
    assert int(done.stdout.split("MiB")[-1]) <= 64


# A grader that is not root, run by an ordinary user (nobody's uid): ARGV repo, limits
# (JSON), code, timeout. It prints the sandboxed command's outcome as JSON.
UNPRIVILEGED_GRADER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from autograder.isolation import sandbox
isolation = sandbox.probe()
with sandbox.Sandbox(isolation, sandbox.Limits(**json.loads(sys.argv[2])), slot=7, name="test") as box:
    done = box.run([sys.executable, "-c", sys.argv[3]], timeout=float(sys.argv[4]))
print(json.dumps({"as_root": isolation.as_root, "returncode": done.returncode, "stdout": done.stdout,
                  "stderr": done.stderr}))
"""
NOBODY = 65534


@pytest.fixture(scope="module")
def unprivileged(isolation):
    """How to run a grader as an ordinary user: a command prefix (setpriv, a Python)."""
    if os.geteuid() != 0:
        pytest.skip("the tests run as an ordinary user: the [grader] variant is the non-root sandbox")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is missing: no way to run the sandbox as an ordinary user")
    user = [shutil.which("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    userns = subprocess.run(user + [isolation.bwrap, "--unshare-user", "--ro-bind", "/", "/", "true"], cwd="/",
                            capture_output=True, text=True, timeout=60)
    if userns.returncode != 0:
        pytest.skip("an ordinary user cannot create a user namespace here, so a grader that is not root has "
                    f"no sandbox: {userns.stderr.strip()}")
    # This Python; where it lies in a folder that user cannot enter (a pyenv under /root),
    # this Python in a mount namespace that opens its folders; else the system's.
    opening = opened_to_other_users([sys.base_prefix, sys.prefix, os.path.dirname(sys.executable), REPO])
    tried = []
    for prefix, python in dict.fromkeys([((), sys.executable), (tuple(opening), sys.executable),
                                         ((), "/usr/bin/python3")]):
        command = [*prefix, *user, python, "-I"]
        check = subprocess.run(command + ["-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                                          "from autograder.isolation import sandbox; print(sandbox.probe().as_root)", str(REPO)],
                               cwd="/", capture_output=True, text=True, timeout=120)
        if check.stdout.strip() == "False":
            return {"command": command, "torch": python == sys.executable}
        tried.append(f"{' '.join(prefix[:1])} {python}: {(check.stdout + check.stderr).strip()[-300:]}")
    pytest.skip(f"no Python with which uid {NOBODY} can build a sandbox: {'; '.join(tried)}")


@pytest.fixture(params=["grader", "unprivileged"])
def grader(request, isolation):
    """A function(code, limits) that runs code in a sandbox built by this process (as root,
    most likely) or by a grader run as an ordinary user; .torch: whether its Python has PyTorch."""
    if request.param == "grader":
        def run_here(code, limits, timeout=120):
            return run(isolation, code, limits, timeout=timeout)[0]
        run_here.torch = True
        return run_here
    user = request.getfixturevalue("unprivileged")

    def run_unprivileged(code, limits, timeout=120):
        done = subprocess.run(user["command"] + ["-c", UNPRIVILEGED_GRADER, str(REPO), json.dumps(vars(limits)),
                                                 textwrap.dedent(code), str(timeout)],
                              cwd="/", capture_output=True, text=True, timeout=timeout + 60)
        assert done.returncode == 0, done.stdout + done.stderr
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
        assert outcome["as_root"] is False
        return subprocess.CompletedProcess(code, outcome["returncode"], outcome["stdout"], outcome["stderr"])
    run_unprivileged.torch = user["torch"]
    return run_unprivileged


def test_read_only_but_for_size_limited_scratch_mounts(grader):
    """Nothing is writable but /tmp, /home/student, /dev/shm and /run/ipc, each a small tmpfs."""
    scratch = 8 * sandbox.MiB
    limits = sandbox.Limits(memory=768 * sandbox.MiB, processes=64, cpu_seconds=60, scratch=scratch)
    done = grader(f"""
        import errno, json, os, sys
        seen = {{"refused": {{}}, "filled": {{}}}}
        for folder in ["/", "/home", "/run", "/usr", "/etc", "/dev", "/proc", "/sys", "/sys/devices/system/cpu",
                       os.path.dirname(sys.executable)]:
            try:
                with open(os.path.join(folder, "marker"), "w") as handle:
                    handle.write("x")
                seen["refused"][folder] = None
            except OSError as error:
                seen["refused"][folder] = errno.errorcode[error.errno]
        for folder in ["/tmp", "/home/student", "/dev/shm", "/run/ipc"]:
            with open(os.path.join(folder, "small"), "w") as handle:
                handle.write("fine")
            written, error = 0, None
            fd = os.open(os.path.join(folder, "big"), os.O_WRONLY | os.O_CREAT)
            try:
                while written < 64 * 1024 * 1024:
                    written += os.write(fd, b"x" * (1024 * 1024))
            except OSError as failure:
                error = errno.errorcode[failure.errno]
            os.close(fd)
            os.unlink(os.path.join(folder, "big"))
            seen["filled"][folder] = [written, error, open(os.path.join(folder, "small")).read()]
        with open("/dev/null", "w") as handle:
            handle.write("devices still work")
        seen["urandom"] = len(open("/dev/urandom", "rb").read(16))
        print(json.dumps(seen))
        """, limits)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    refused = seen["refused"]
    assert all(refused.values()), f"student code wrote outside its scratch mounts: {refused}"
    # Read-only, not merely someone else's: also as the instructor's uid in a user namespace.
    assert {refused[f] for f in ["/", "/home", "/run", "/usr", "/etc", "/dev"]} == {"EROFS"}, refused
    sizes = {"/tmp": scratch, "/home/student": scratch, "/dev/shm": scratch, sandbox.IPC: sandbox.IPC_SIZE}
    for folder, (written, error, small) in seen["filled"].items():
        assert small == "fine"
        assert error == "ENOSPC" and sizes[folder] // 2 < written <= sizes[folder], (folder, written, error)
    assert seen["urandom"] == 16


def test_pytorch_and_shared_memory_work_in_the_sandbox(grader):
    """/dev/shm is writable: multiprocessing's locks, shared memory, a DataLoader with workers."""
    if not grader.torch:
        pytest.skip(f"uid {NOBODY} cannot read the grader's Python (and PyTorch); the system's has no PyTorch")
    limits = sandbox.Limits(memory=2 * sandbox.GiB, processes=64, cpu_seconds=120, scratch=64 * sandbox.MiB)
    done = grader("""
        import multiprocessing
        from multiprocessing import shared_memory
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        lock = multiprocessing.Lock()
        memory = shared_memory.SharedMemory(create=True, size=1024 * 1024)
        memory.close()
        memory.unlink()
        shared = torch.zeros(1000).share_memory_()
        loader = DataLoader(TensorDataset(torch.arange(64.0)), batch_size=8, num_workers=2)
        print("TOTAL", sum(batch[0].sum().item() for batch in loader), shared.is_shared())
        """, limits, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "TOTAL 2016.0 True" in done.stdout, done.stdout + done.stderr[-3000:]


def test_grading_is_refused_without_a_sandbox(tmp_path):
    """No bwrap on PATH: a clear refusal, unless --no-isolation says otherwise."""
    notebook = tmp_path / "alice.ipynb"
    notebook.write_bytes(b"{}")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", "self_attention", str(notebook),
                           "--out", str(tmp_path / "out"), "--no-progress"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "refusing to run student code without a sandbox" in done.stderr
    assert "--no-isolation" in done.stderr
    assert not (tmp_path / "out" / "results").exists()


def test_no_isolation_grades_when_told_so_and_says_it_loudly(tmp_path):
    (source,) = paths.assignment_notebooks("self_attention")
    shutil.copyfile(source, tmp_path / "reference.ipynb")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable), "COURSE_FORCE_CPU": "1"}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", "self_attention",
                           str(tmp_path / "reference.ipynb"), "--out", str(tmp_path / "out"), "--no-progress",
                           "--no-isolation"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING: NO ISOLATION" in done.stderr
    (result,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert result["score"] == result["max_score"], result["message"]
