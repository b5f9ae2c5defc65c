"""`make test` first runs .ci/system-packages: the Debian packages of
.ci/debian-packages.txt, installed where it runs as root with apt-get, otherwise the
command to install them and a stop, unless SKIP_SYSTEM_PACKAGES=1. Its decisions are
checked here with fake `dpkg`, `apt-get` and `id` (the script uses nothing else but
bash), so nothing is installed."""

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / ".ci" / "system-packages"
PACKAGES = ["chromium", "bubblewrap", "postgresql"]

FAKE_DPKG = """#!/bin/bash
# dpkg -s NAME, from the files in $STATE/installed: empty (installed) or "config-files"
[ "$1" = -s ] || exit 2
if [ -e "$STATE/installed/$2" ]; then
  echo "Package: $2"
  if [ -s "$STATE/installed/$2" ]; then echo "Status: deinstall ok config-files"
  else echo "Status: install ok installed"; fi
  echo "Version: 1"
  exit 0
fi
echo "dpkg-query: package '$2' is not installed and no information is available" >&2
exit 1
"""

FAKE_APT = """#!/bin/bash
echo "DEBIAN_FRONTEND=$DEBIAN_FRONTEND $*" >> "$STATE/apt.log"
[ -e "$STATE/offline" ] && exit 100
if [ "$1" = install ]; then
  for word in "$@"; do
    case "$word" in install|-*) ;; *) [ -e "$STATE/broken" ] || : > "$STATE/installed/$word" ;; esac
  done
fi
exit 0
"""

FAKE_ID = """#!/bin/bash
[ "$1" = -u ] && echo "$FAKE_UID"
"""


class Machine:
    """A fake machine: which packages dpkg says are installed, whether apt-get exists."""

    def __init__(self, folder, installed=(), uid=0, apt=True, dpkg=True):
        self.state = folder / "state"
        (self.state / "installed").mkdir(parents=True)
        for package in installed:
            (self.state / "installed" / package).write_text("")
        self.bin = folder / "bin"
        self.bin.mkdir()
        tools = {"id": FAKE_ID, **({"dpkg": FAKE_DPKG} if dpkg else {}), **({"apt-get": FAKE_APT} if apt else {})}
        for name, text in tools.items():
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        self.uid = uid

    def run(self, **env):
        done = subprocess.run(["/bin/bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                              env={"PATH": str(self.bin), "STATE": str(self.state), "FAKE_UID": str(self.uid),
                                   **env})
        return done.returncode, done.stdout + done.stderr

    @property
    def apt_calls(self):
        log = self.state / "apt.log"
        return log.read_text().splitlines() if log.exists() else []

    def installed(self, package):
        return (self.state / "installed" / package).exists()


def test_the_list_is_the_three_packages():
    assert SCRIPT.stat().st_mode & 0o111, "executable"
    listed = [line.split("#")[0].strip() for line in (REPO / ".ci" / "debian-packages.txt").read_text().splitlines()]
    assert [p for p in listed if p] == PACKAGES


@pytest.mark.parametrize("uid", [0, 1000])
def test_all_installed_does_no_apt_at_all(tmp_path, uid):
    machine = Machine(tmp_path, installed=PACKAGES, uid=uid)
    code, output = machine.run()
    assert code == 0 and output == "", output
    assert machine.apt_calls == []  # an offline machine with the packages goes straight on


def test_as_root_the_missing_ones_are_installed(tmp_path):
    machine = Machine(tmp_path, installed=["chromium"])
    code, output = machine.run()
    assert code == 0, output
    assert machine.apt_calls == ["DEBIAN_FRONTEND= update -qq",
                                 "DEBIAN_FRONTEND=noninteractive install -y -qq --no-install-recommends "
                                 "bubblewrap postgresql"]
    assert machine.installed("bubblewrap") and machine.installed("postgresql")
    assert "installing bubblewrap postgresql" in output


def test_a_package_with_only_its_configuration_left_counts_as_missing(tmp_path):
    machine = Machine(tmp_path, installed=PACKAGES)
    (machine.state / "installed" / "postgresql").write_text("config-files")
    code, output = machine.run()
    assert code == 0, output
    assert machine.apt_calls[-1].endswith("--no-install-recommends postgresql")


@pytest.mark.parametrize("uid, apt", [(1000, True), (0, False)])
def test_otherwise_it_stops_with_the_command_to_run(tmp_path, uid, apt):
    machine = Machine(tmp_path, installed=["postgresql"], uid=uid, apt=apt)
    code, output = machine.run()
    assert code != 0
    assert "sudo apt-get install chromium bubblewrap\n" in output
    assert "make test SKIP_SYSTEM_PACKAGES=1" in output
    assert machine.apt_calls == []


@pytest.mark.parametrize("uid", [0, 1000])
def test_skip_goes_on_without_them_and_says_so(tmp_path, uid):
    machine = Machine(tmp_path, installed=["chromium"], uid=uid)
    code, output = machine.run(SKIP_SYSTEM_PACKAGES="1")
    assert code == 0, output
    assert "missing bubblewrap postgresql" in output and "will skip" in output
    assert machine.apt_calls == []


def test_apt_that_fails_stops_the_tests(tmp_path):
    machine = Machine(tmp_path, installed=["chromium", "bubblewrap"])
    (machine.state / "offline").write_text("")
    code, output = machine.run()
    assert code != 0 and "could not install postgresql" in output and "SKIP_SYSTEM_PACKAGES=1" in output
    machine = Machine(tmp_path / "broken", installed=["chromium", "bubblewrap"])
    (machine.state / "broken").write_text("")  # apt-get says yes, dpkg disagrees
    code, output = machine.run()
    assert code != 0 and "postgresql is still not installed" in output


def test_without_dpkg_it_stops_unless_told_to_skip(tmp_path):
    machine = Machine(tmp_path, dpkg=False)
    code, output = machine.run()
    assert code != 0 and "no dpkg" in output and "SKIP_SYSTEM_PACKAGES=1" in output
    assert machine.apt_calls == []
    code, output = machine.run(SKIP_SYSTEM_PACKAGES="1")
    assert code == 0 and "will skip" in output


def test_make_test_checks_them_before_anything_else():
    for extra, passed in (([], 'SKIP_SYSTEM_PACKAGES=""'), (["SKIP_SYSTEM_PACKAGES=1"], 'SKIP_SYSTEM_PACKAGES="1"')):
        plan = subprocess.run(["make", "-n", "test", *extra], cwd=REPO, capture_output=True, text=True,
                              timeout=60).stdout.splitlines()
        first = next(i for i, line in enumerate(plan) if ".ci/system-packages" in line)
        assert passed in plan[first]
        assert first < next(i for i, line in enumerate(plan) if "jupyter-book build" in line)
        assert first < next(i for i, line in enumerate(plan) if "-m pytest" in line)
    assert (REPO / ".ci" / "run").read_text().rstrip().endswith("make test")
