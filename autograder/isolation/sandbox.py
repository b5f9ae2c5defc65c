"""Run student code in a sandbox: bubblewrap namespaces, an unprivileged user, limits.

What a sandboxed process sees and may do:

* its own filesystem view, read-only but for four private, size-limited tmpfs mounts:
  a scratch folder (/home/student, holding only the files the grader puts there), /tmp
  and /dev/shm (Limits.scratch each, 512 MiB by default), and /run/ipc for the kernel's
  sockets (16 MiB). The rest is read-only, whoever runs the grader: the system (/usr,
  /etc), this Python, and bubblewrap's own root and /dev (remounted read-only once
  everything is mounted; /dev keeps its device nodes). The repository, solutions/,
  gradebooks, other students' work and the instructor's home are not there at all;
  /proc and /sys are not mounted.
* no network: a network namespace of its own (its loopback reaches nothing outside);
* its own process tree (a pid namespace): killing the sandbox's first process kills
  every process started inside, daemons included;
* an unprivileged user: when the grader runs as root, student code runs under a
  numeric uid of its own (no capabilities, no_new_privs); otherwise under the
  instructor's uid inside a user namespace, seeing nothing but the view above;
* limits: memory and processes through a cgroup (v1 or v2, nested under the grader's
  own cgroup) when the grader may create one, else through setrlimit; CPU time, file
  size and open files through setrlimit; disk use through the sizes of the tmpfs mounts
  above (tmpfs lives in memory: when a cgroup limits memory, what is written there
  counts against it too).

`probe()` says which of these this machine provides. Without bubblewrap the grader
refuses to run student code unless the instructor passes --no-isolation.
"""

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

GiB = 1024 ** 3
MiB = 1024 ** 2

HOME = "/home/student"
IPC = "/run/ipc"
IPC_SIZE = 16 * MiB  # the size of /run/ipc
# The writable folders, which belong to the student's uid once the sandbox is set up.
STUDENT_FOLDERS = (HOME, IPC, "/tmp")
# Numeric uids for student code when the grader runs as root: one per parallel job and
# grading batch, far above any real account. They need no /etc/passwd entry.
UID_BASE = 1_900_000_000


def student_uid(slot):
    """The uid of slot `slot` of the batch run by this process's parent (the grader)."""
    return UID_BASE + (os.getppid() % 50_000) * 64 + int(slot) % 64


@dataclass
class Limits:
    """Per-submission limits. Sizes in bytes, times in seconds."""

    memory: int = 3 * GiB
    processes: int = 256  # processes and threads together (a kernel uses about 20)
    cpu_seconds: int = 1800  # CPU time per process
    file_size: int = 256 * MiB
    open_files: int = 1024
    scratch: int = 512 * MiB  # each of /home/student, /tmp and /dev/shm

    def describe(self):
        return (f"memory {self.memory / GiB:g} GiB, {self.processes} processes, "
                f"CPU {self.cpu_seconds} s, scratch {self.scratch // MiB} MiB")


@dataclass
class Isolation:
    """What this machine offers for running untrusted code."""

    sandboxed: bool
    bwrap: str = ""
    as_root: bool = False
    cgroup: str = ""  # "v1", "v2" or "" (then memory and processes fall back to setrlimit)
    reason: str = ""  # why there is no sandbox, when there is none
    notes: list = field(default_factory=list)

    def describe(self, limits=None):
        if not self.sandboxed:
            return "NO ISOLATION: student code runs with your rights, your files and your network."
        who = "a dedicated unprivileged uid" if self.as_root else "your uid in a user namespace"
        limiter = f"cgroup {self.cgroup}" if self.cgroup else "setrlimit (no writable cgroup)"
        text = (f"sandbox: bubblewrap; no network; private filesystem; {who}; "
                f"memory and process limits by {limiter}")
        if limits is not None:
            text += f"; {limits.describe()}"
        return text


class SandboxUnavailable(RuntimeError):
    pass


# -- what this machine offers ------------------------------------------------------------

def _own_cgroup_v1(controller):
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                return Path("/sys/fs/cgroup") / controller / path.lstrip("/")
    except OSError:
        pass
    return None


def _own_cgroup_v2():
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hierarchy, controllers, path = line.split(":", 2)
            if hierarchy == "0" and controllers == "":
                for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                    root = Path(mount)
                    if (root / "cgroup.controllers").exists():
                        return root / path.lstrip("/")
    except OSError:
        pass
    return None


def _try_child(parent, files):
    """True if a child cgroup of `parent` can be created with `files` written, then removed."""
    if parent is None:
        return False
    child = parent / f"autograder-{os.getpid()}-probe-{uuid.uuid4().hex[:8]}"
    try:
        child.mkdir()
    except OSError:
        return False
    try:
        for name, value in files.items():
            (child / name).write_text(value)
        return True
    except OSError:
        return False
    finally:
        try:
            child.rmdir()
        except OSError:
            pass


def _cgroup_flavour():
    """'v1' or 'v2' when this process may create child cgroups with memory and pids limits."""
    if _try_child(_own_cgroup_v1("memory"), {"memory.limit_in_bytes": str(GiB)}) and \
            _try_child(_own_cgroup_v1("pids"), {"pids.max": "100"}):
        return "v1"
    if _try_child(_own_cgroup_v2(), {"memory.max": str(GiB), "pids.max": "100"}):
        return "v2"
    return ""


_probed = {}


def probe(allow_unsandboxed=False):
    """The isolation this machine offers; raises SandboxUnavailable if none and not allowed."""
    key = allow_unsandboxed
    if key in _probed:
        return _probed[key]
    isolation = _probe()
    if not isolation.sandboxed and not allow_unsandboxed:
        raise SandboxUnavailable(isolation.reason)
    _probed[key] = isolation
    return isolation


def _probe():
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Isolation(False, reason=(
            "bubblewrap (bwrap) is not installed, so student code cannot be isolated. "
            "Install it (Debian/Ubuntu: apt-get install bubblewrap) or, knowingly, pass "
            "--no-isolation to run student code with your own rights."))
    isolation = Isolation(True, bwrap=bwrap, as_root=os.geteuid() == 0)
    isolation.cgroup = _cgroup_flavour() if isolation.as_root else ""
    try:
        with Sandbox(isolation, Limits(), slot=0, name="probe") as box:
            done = box.run(["/bin/sh", "-c", "echo sandbox-ok"], timeout=60)
        if done.returncode != 0 or "sandbox-ok" not in done.stdout:
            raise SandboxUnavailable((done.stdout + done.stderr).strip()[-500:])
    except (OSError, subprocess.SubprocessError, SandboxUnavailable) as error:
        return Isolation(False, bwrap=bwrap, reason=(
            f"bubblewrap is installed but cannot create a sandbox here ({str(error).strip()[:300]}). "
            "It needs user namespaces, or root. Fix that or, knowingly, pass --no-isolation."))
    if not isolation.cgroup:
        processes = ("the number of processes by setrlimit (each job has a uid of its own)" if isolation.as_root
                     else "the number of processes is not limited (as a non-root user, setrlimit would count "
                          "all your own processes); run the grader as root for both limits")
        isolation.notes.append(f"no writable cgroup: memory is limited by address space (setrlimit), {processes}")
    return isolation


# -- one sandbox -------------------------------------------------------------------------

def _python_roots():
    """Read-only folders this Python needs: its installation and its virtual environment."""
    roots = []
    prefixes = (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable)))
    # Both the real folders and the names they are reached by (a virtual environment
    # behind a symbolic link is started by the link's name).
    for path in [os.path.realpath(p) for p in prefixes] + [os.path.abspath(p) for p in prefixes]:
        if not path.startswith("/usr/") and path not in roots:
            roots.append(path)
    # a prefix inside another one is already there
    return [r for r in roots if not any(r != o and r.startswith(o + "/") for o in roots)]


def _system_binds():
    args = []
    for name in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{name}"]
    args += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    return args


def _parents(path):
    """--dir arguments (mode 0755) for every parent of `path` that is not already there."""
    args = []
    parts = Path(path).parts[1:-1]
    for i in range(len(parts)):
        parent = "/" + "/".join(parts[: i + 1])
        if parent in ("/usr", "/etc", "/tmp", "/run"):
            continue
        args += ["--perms", "0755", "--dir", parent]
    return args


class Sandbox:
    """One sandbox: its cgroups, its files, at most one process tree; `close()` removes all."""

    def __init__(self, isolation, limits, slot=0, name=None):
        self.isolation = isolation
        self.limits = limits
        self.uid = student_uid(slot)
        # The creator's pid in the name: stale cgroups are those whose creator is gone.
        self.name = f"autograder-{os.getpid()}-{name or 'job'}-{uuid.uuid4().hex[:8]}"
        self.process = None
        self.child_pid = None
        self.cgroups = []
        self._private = tempfile.mkdtemp(prefix="sandbox-")  # host side: files to copy in
        os.chmod(self._private, 0o700)
        if isolation.sandboxed and isolation.cgroup:
            self._make_cgroups()

    # -- cgroups ----------------------------------------------------------------------
    def _make_cgroups(self):
        if self.isolation.cgroup == "v1":
            memory = _own_cgroup_v1("memory") / self.name
            pids = _own_cgroup_v1("pids") / self.name
            memory.mkdir()
            self.cgroups.append(memory)
            pids.mkdir()
            self.cgroups.append(pids)
            (memory / "memory.limit_in_bytes").write_text(str(self.limits.memory))
            swap = memory / "memory.memsw.limit_in_bytes"
            if swap.exists():
                try:
                    swap.write_text(str(self.limits.memory))
                except OSError:
                    pass
            (pids / "pids.max").write_text(str(self.limits.processes))
        else:
            group = _own_cgroup_v2() / self.name
            group.mkdir()
            self.cgroups.append(group)
            (group / "memory.max").write_text(str(self.limits.memory))
            if (group / "memory.swap.max").exists():
                (group / "memory.swap.max").write_text("0")
            (group / "pids.max").write_text(str(self.limits.processes))

    def memory_meter(self):
        """A MemoryMeter on this sandbox's memory cgroup; None without one."""
        for group in self.cgroups:
            if (group / "memory.max_usage_in_bytes").exists() or (group / "memory.peak").exists():
                return MemoryMeter(group)
        return None

    def usage(self):
        """What the sandbox used: peak memory, out-of-memory kills, refused forks."""
        info = {}
        for group in self.cgroups:
            for name, key in (("memory.max_usage_in_bytes", "memory_peak"), ("memory.peak", "memory_peak")):
                try:
                    info[key] = int((group / name).read_text())
                except (OSError, ValueError):
                    pass
            for name in ("memory.oom_control", "memory.events"):
                try:
                    for line in (group / name).read_text().splitlines():
                        if line.startswith("oom_kill "):
                            info["oom_kills"] = int(line.split()[1])
                except (OSError, ValueError):
                    pass
            try:
                for line in (group / "pids.events").read_text().splitlines():
                    if line.startswith("max "):
                        info["forks_refused"] = int(line.split()[1])
            except (OSError, ValueError):
                pass
        return info

    def _procs(self):
        pids = set()
        for group in self.cgroups:
            try:
                pids |= {int(p) for p in (group / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return pids

    # -- processes --------------------------------------------------------------------
    def _preexec(self):
        """In the child, before bwrap starts: join the cgroups, set the limits."""
        for group in self.cgroups:
            fd = os.open(group / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)
        for which, soft, hard in self.rlimits():
            resource.setrlimit(which, (soft, hard))

    def rlimits(self):
        """[(resource, soft, hard)]: the setrlimit limits of every process in the sandbox."""
        limits = self.limits
        settings = [
            (resource.RLIMIT_CPU, limits.cpu_seconds),
            (resource.RLIMIT_FSIZE, limits.file_size),
            (resource.RLIMIT_NOFILE, limits.open_files),
            (resource.RLIMIT_CORE, 0),
        ]
        if not self.cgroups:
            # No cgroup: the address space stands in for memory. A PyTorch kernel maps
            # about 2 GiB it never touches, hence the allowance.
            settings.append((resource.RLIMIT_AS, limits.memory + 2 * GiB))
            if self.isolation.as_root:
                settings.append((resource.RLIMIT_NPROC, limits.processes))
        result = []
        for which, value in settings:
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            # CPU time: SIGXCPU at the limit, SIGKILL a little later if that is ignored.
            ceiling = value + 5 if which == resource.RLIMIT_CPU else value
            if hard != resource.RLIM_INFINITY:
                ceiling = min(ceiling, hard)
            result.append((which, value, ceiling))
        return result

    def command(self, argv, files=None, env=None, cwd=HOME):
        """The bwrap command line that runs argv; files: {path inside: host path}."""
        isolation = self.isolation
        args = [isolation.bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
        if not isolation.as_root:
            args += ["--unshare-user", "--disable-userns"]
        args += _system_binds()
        size = str(self.limits.scratch)
        # Every place student code may write is a size-limited tmpfs (/tmp, /home/student,
        # /dev/shm, /run/ipc); the rest is made read-only once every mount is in place.
        args += ["--dev", "/dev",
                 "--size", size, "--perms", "1777", "--tmpfs", "/dev/shm",
                 "--size", size, "--perms", "1777", "--tmpfs", "/tmp",
                 "--perms", "0755", "--dir", "/home",
                 "--size", size, "--perms", "0700", "--tmpfs", HOME,
                 "--perms", "0755", "--dir", "/run",
                 "--size", str(IPC_SIZE), "--perms", "0700", "--tmpfs", IPC]
        # After the private /tmp and /home: a virtual environment may live under either
        # (a clone in /tmp, say), and a later mount would hide it.
        for root in _python_roots():
            args += _parents(root) + ["--ro-bind", root, root]
        # PyTorch reads the processor's description; without /proc it complains on stderr.
        args += ["--perms", "0755", "--dir", "/proc"]
        if os.path.exists("/proc/cpuinfo"):
            args += ["--ro-bind", self.file("cpuinfo", Path("/proc/cpuinfo").read_bytes()), "/proc/cpuinfo"]
        cpu = Path("/sys/devices/system/cpu")
        for name in ("possible", "present", "online"):
            if (cpu / name).exists():
                args += ["--ro-bind", str(cpu / name), f"/sys/devices/system/cpu/{name}"]
        for inside, host in (files or {}).items():
            args += ["--ro-bind", str(host), inside]
        # Last of the mounts: bwrap's root and /dev are tmpfs of unlimited size, writable by
        # student code when it runs under the instructor's uid. Read-only, each of them
        # alone (the mounts on them keep their own flags).
        args += ["--remount-ro", "/dev", "--remount-ro", "/"]
        args += ["--chdir", cwd, "--clearenv"]
        for key, value in (env or {}).items():
            args += ["--setenv", key, value]
        args += ["--setenv", "HOME", HOME]
        if isolation.as_root:
            # bwrap runs as root (it builds the mounts); the command itself runs under
            # an unprivileged uid of its own, with no capabilities and no way back.
            args += ["--chmod", "0700", HOME, "--cap-drop", "ALL", "--cap-add", "CAP_SETUID",
                     "--cap-add", "CAP_SETGID", "--cap-add", "CAP_CHOWN"]
            args += [sys.executable, "-I", "-S", "-c", _DROP, str(self.uid), *STUDENT_FOLDERS, "--"]
        args += ["--"] if not isolation.as_root else []
        return args + list(argv)

    def joining(self, env, cwd=HOME):
        """What a process forked into this sandbox from outside (autograder/isolation/kernel_factory.py)
        takes on, to match one that bubblewrap started with `command(env=env)`: the cgroups,
        the limits, the uid and its folders, the environment and the working folder."""
        return {"cgroups": [str(group) for group in self.cgroups], "rlimits": self.rlimits(), "uid": self.uid,
                "own": list(STUDENT_FOLDERS), "env": {**env, "HOME": HOME, "PWD": cwd}, "cwd": cwd}

    def file(self, name, data):
        """A host file to bind read-only into the sandbox (see `command(files=...)`)."""
        path = Path(self._private) / "files" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, 0o444)
        return path

    def inside(self, path):
        """How the sandboxed process names `path` (HOME, IPC or below)."""
        return path if self.isolation.sandboxed else self.root_path(path)

    def popen(self, argv, files=None, env=None, pass_fds=(), stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL):
        """Start argv in the sandbox (or, without isolation, as a plain process)."""
        if self.process is not None:
            raise RuntimeError("one process tree per sandbox")
        if not self.isolation.sandboxed:
            for folder in STUDENT_FOLDERS:
                Path(self.root_path(folder)).mkdir(parents=True, exist_ok=True)
            for inside, host in (files or {}).items():
                shutil.copyfile(host, self.root_path(inside))
            env = {**(env or {}), "HOME": self.root_path(HOME), "TMPDIR": self.root_path("/tmp")}
            self.process = subprocess.Popen(argv, env=env, pass_fds=pass_fds, stdout=stdout, stderr=stderr,
                                            stdin=stdin, cwd=self.root_path(HOME), start_new_session=True,
                                            preexec_fn=self._preexec)
            self.child_pid = self.process.pid
            return self.process
        info_read, info_write = os.pipe()
        try:
            command = self.command(argv, files, env)
            command[1:1] = ["--info-fd", str(info_write)]
            self.process = subprocess.Popen(command, pass_fds=(info_write, *pass_fds), stdout=stdout,
                                            stderr=stderr, stdin=stdin, preexec_fn=self._preexec)
        finally:
            os.close(info_write)
        with os.fdopen(info_read) as handle:
            text = handle.read()
        try:
            self.child_pid = int(json.loads(text)["child-pid"])
        except (ValueError, KeyError, TypeError):
            self.child_pid = None
        return self.process

    def root_path(self, inside):
        """The host path of a path inside the sandbox (through /proc/PID/root)."""
        if not self.isolation.sandboxed:
            return str(Path(self._private) / "root" / inside.lstrip("/"))
        return f"/proc/{self.child_pid}/root{inside}"

    def run(self, argv, timeout=60, **kwargs):
        """Run argv to completion in the sandbox; capture its output (bounded)."""
        process = self.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
        out, err = _bounded_communicate(process, timeout, 1 * MiB)
        return subprocess.CompletedProcess(argv, process.returncode, out, err)

    def kill(self):
        """Kill every process of this sandbox and wait until none is left."""
        if self.process is not None and self.process.poll() is None:
            try:
                if self.isolation.sandboxed:
                    self.process.kill()
                else:
                    os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.process is not None:
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 30
        while self._procs() and time.monotonic() < deadline:
            for pid in self._procs():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.05)

    def close(self):
        self.kill()
        for group in reversed(self.cgroups):
            for _ in range(100):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        self.cgroups = []
        shutil.rmtree(self._private, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class MemoryMeter:
    """The peak memory of a sandbox over one interval, read by the grader from its cgroup.

    The counter lives outside the sandbox (no /sys there, and no rights on it): code in the
    sandbox can neither reset it nor hide from it what any of its processes touches.
    `start()` resets the peak to the current usage and returns that usage; `stop()` returns
    how far the peak rose above it, in bytes. Raises OSError where the kernel cannot reset
    the peak (cgroup v2 before Linux 6.12).

    The peak counts what the call takes only while the kernel takes nothing back from the
    group. Pages the kernel may take back without a process freeing them (memory handed
    back lazily with MADV_FREE, the page cache of files read or written) are reclaimed
    when the group reaches its limit or the machine runs short, and what the
    call allocates then takes their place instead of raising the peak: a notebook that
    fills its group with them before the tests hides any allocation. So `start()` first
    has the kernel reclaim what it can when the group is near its limit (`reclaim()`), and
    `stop()` sets `spoiled` to what it saw, "" when nothing, if during the interval the
    group came within `margin` of its limit, its reclaimable pages shrank, or the kernel
    counted a charge over the limit or pages reclaimed. A spoiled figure says nothing about
    the call: measure again after `reclaim()`, or give no figure."""

    def __init__(self, group):
        self.group = Path(group)
        self.v1 = (self.group / "memory.max_usage_in_bytes").exists()
        self.before, self.fd, self.spoiled, self.signs = 0, None, "", {}
        try:
            limit = self._read("memory.limit_in_bytes" if self.v1 else "memory.max").strip()
            self.limit = int(limit) if limit.isdigit() and int(limit) < 2 ** 60 else None
        except OSError:
            self.limit = None
        # Within `margin` of its limit the group may be reclaiming: a sixteenth of the limit.
        self.margin = self.limit // 16 if self.limit else 0
        # The group's statistics lag by up to a batch of 64 pages per processor.
        self.tolerance = max(4 * MiB, 2 * 64 * resource.getpagesize() * (os.cpu_count() or 1))

    def _read(self, name):
        return (self.group / name).read_text()

    def usage(self):
        """The group's memory now, in bytes."""
        return int(self._read("memory.usage_in_bytes" if self.v1 else "memory.current"))

    def _counts(self, name):
        counts = {}
        for line in self._read(name).splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                counts[key] = int(value)
        return counts

    def _signs(self):
        """What moves when the kernel takes pages back from the group: the counters of charges
        over the limit and of pages reclaimed, and the bytes of pages it could reclaim."""
        stat = self._counts("memory.stat")
        signs = {"reclaimable": stat.get("active_file", 0) + stat.get("inactive_file", 0)}
        if self.v1:
            signs["charges over its limit"] = int(self._read("memory.failcnt"))
        else:
            signs["charges over its limit"] = self._counts("memory.events").get("max", 0)
            signs["pages scanned or reclaimed"] = stat.get("pgscan", 0) + stat.get("pgsteal", 0)
        return signs

    def reclaim(self):
        """Have the kernel take back what it can of the group's memory (page cache, pages
        handed back lazily); what the processes hold stays. Errors are ignored: the next
        measurement tells whether it was enough."""
        try:
            if self.v1:
                self.group.joinpath("memory.force_empty").write_text("0")
            else:
                self.group.joinpath("memory.reclaim").write_text(str(self.usage()))
        except OSError:
            pass

    def start(self):
        self.close()
        if self.limit and self.usage() >= self.limit - self.margin:
            self.reclaim()
        self.spoiled, self.signs = "", self._signs()
        if self.v1:
            # Writing to max_usage_in_bytes sets the peak to the current usage.
            (self.group / "memory.max_usage_in_bytes").write_text("0")
            self.before = int((self.group / "memory.usage_in_bytes").read_text())
        else:
            # cgroup v2: a write resets the peak seen through this descriptor only.
            self.fd = os.open(self.group / "memory.peak", os.O_RDWR)
            os.write(self.fd, b"reset\n")
            self.before = int((self.group / "memory.current").read_text())
        return self.before

    def stop(self):
        try:
            if self.v1:
                peak = int((self.group / "memory.max_usage_in_bytes").read_text())
            else:
                peak = int(os.pread(self.fd, 64, 0))
            signs = self._signs()
        finally:
            self.close()
        seen = []
        if self.limit and peak >= self.limit - self.margin:
            seen.append(f"the sandbox's memory reached {peak / MiB:.0f} MiB of its {self.limit / MiB:.0f} MiB limit")
        if signs["reclaimable"] < self.signs["reclaimable"] - self.tolerance:
            seen.append(f"{(self.signs['reclaimable'] - signs['reclaimable']) / MiB:.0f} MiB of page cache or of "
                        "memory handed back lazily was taken back")
        for name in ("charges over its limit", "pages scanned or reclaimed"):
            if signs.get(name, 0) > self.signs.get(name, 0):
                seen.append(f"the kernel counted {signs[name] - self.signs[name]} {name}")
        self.spoiled = "; ".join(seen)
        return max(0, peak - self.before)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# Runs first inside the sandbox when the grader is root: make the private folders the
# student's, then become that student for good (setgid, setgroups, setuid, no_new_privs)
# and exec the command. It uses only os and the C library; nothing of the student's
# exists yet.
_DROP = r"""
import ctypes, os, sys
uid = int(sys.argv[1]); folders = sys.argv[2:sys.argv.index("--")]; argv = sys.argv[sys.argv.index("--") + 1:]
for folder in folders:
    os.chown(folder, uid, uid)
os.setgroups([]); os.setgid(uid); os.setuid(uid)
if os.getuid() != uid or os.geteuid() != uid:
    sys.exit("could not drop privileges")
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
    sys.exit("could not set no_new_privs")
os.execvp(argv[0], argv)
"""


def _bounded_communicate(process, timeout, cap):
    """communicate() that keeps at most `cap` bytes of each stream and kills on timeout."""
    chunks = {"out": bytearray(), "err": bytearray()}

    def drain(stream, key):
        while True:
            data = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not data:
                break
            room = cap - len(chunks[key])
            if room > 0:
                chunks[key] += data[:room]

    threads = [threading.Thread(target=drain, args=(process.stdout, "out"), daemon=True),
               threading.Thread(target=drain, args=(process.stderr, "err"), daemon=True)]
    for thread in threads:
        thread.start()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for thread in threads:
        thread.join(timeout=5)
    return (chunks["out"].decode("utf-8", "replace"), chunks["err"].decode("utf-8", "replace"))


def _remove_orphan(group, seconds=10):
    """A cgroup whose grader is gone: kill what is left in it (a sandbox that was dying as
    its grader was killed), then remove it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


def remove_stale_cgroups():
    """Remove empty cgroups left behind by sandboxes whose grader process is gone (killed)."""
    parents = [_own_cgroup_v1("memory"), _own_cgroup_v1("pids"), _own_cgroup_v2()]
    for parent in parents:
        if parent is None or not parent.is_dir():
            continue
        try:
            children = list(parent.glob("autograder-*"))
        except OSError:
            continue
        for child in children:
            creator = child.name.split("-")[1]
            if not creator.isdigit():
                continue
            try:
                os.kill(int(creator), 0)
                continue  # its grader still runs (perhaps another batch): not ours to remove
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            _remove_orphan(child)
