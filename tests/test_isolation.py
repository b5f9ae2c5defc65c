"""The sandbox itself (autograder/sandbox.py), with plain processes instead of a kernel.

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

from autograder import paths, sandbox
from conftest import REPO, processes_with

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
