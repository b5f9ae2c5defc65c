"""The student's and the instructor's day, end to end, in a real JupyterLab.

One test walks the loop that a course on one machine (or a JupyterHub) runs:

1. the instructor releases `soft_lookup` through nbgrader's exchange (a folder made
   for the test, the course id of autograder/judging/course_directory.py);
2. a student, in a JupyterLab server started by the test on the loopback interface with
   a token and the student setup of autograder/student_jupyter/ (no formgrader, no
   Create Assignment), driven by playwright in headless Debian Chromium: opens the
   Assignments panel, fetches the assignment, opens the notebook, types two answers into
   their cells through the editor, runs all cells, presses Validate and reads the
   dialog, and submits;
3. the due date passes; a second student submits a broken notebook and a third submits
   one answer late, both with nbgrader's command line;
4. the instructor collects (`python -m autograder collect`), grades with `python -m
   autograder grade` (the sandboxed grader) with the due date and a late penalty, checks
   that the first student scored exactly the two answers typed, the second got a clear
   error and the third lost 10% of her points, releases the feedback pages, and the
   first student fetches hers and opens it in JupyterLab; the late student's page shows
   the penalty and how late she was.

A screenshot of each step goes to `_build/student_day/` (or `$STUDENT_DAY_SCREENSHOTS`).

A second test grades a submission from a private copy of `solutions/` kept outside the
repository, with hidden tests that differ from the public ones, through the zip path
that a learning management system gives (the student version downloaded from the book).

The browser test skips, with the reason, where playwright, Chromium (`/usr/bin/chromium`
or `$CHROMIUM`), JupyterLab, nbgrader's JupyterLab extension or bubblewrap is missing.
Run as root, the test starts each student's processes under a uid of their own
(`setpriv`), as a multi-user machine or a JupyterHub would, so that nbgrader's exchange
permissions are exercised between users: a student cannot list the exchange's inbound
submissions or feedback, nor read another student's home. Where this Python lies in a
folder those users cannot enter (a pyenv under /root), each student process runs in a
mount namespace (bubblewrap) where only that path is opened to them; where neither can
be done, the students run as the test's user and a warning says why.
"""

import csv
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from autograder import paths
from autograder.judging.course_directory import CourseDirectory
from tests.conftest import opened_to_other_users, run_autograder
from tests.test_book_in_browser import CHROMIUM, CHROMIUM_ARGS

REPO = Path(__file__).resolve().parent.parent
SCREENSHOTS = Path(os.environ.get("STUDENT_DAY_SCREENSHOTS", REPO / "_build" / "student_day"))
STUDENT_SETUP = REPO / "autograder" / "student_jupyter"
ASSIGNMENT = "soft_lookup"
BIN = Path(sys.executable).parent
# What the student types: two short, correct answers (3 + 2 points of 22).
ANSWERS = {
    "dot_score": '''def dot_score(q, K):
    """Scores q . k_j of a query q (..., d) against keys K (..., n, d); returns (..., n)."""
    return (q[..., None, :] * K).sum(axis=-1)
''',
    "scaled_dot_score": '''def scaled_dot_score(q, K):
    """Scores q . k_j / sqrt(d_k) of q (..., d_k) against K (..., n, d_k); returns (..., n)."""
    return (q[..., None, :] * K).sum(axis=-1) / np.sqrt(K.shape[-1])
''',
}
ANSWER_POINTS = 5.0
DOT_SCORE_POINTS = 3.0  # the late student answers dot_score alone
TIMEOUT_MS = 120_000  # generous: two shared cores, a kernel importing torch


def _missing():
    """Why the browser test cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -r requirements.txt)"
    if not CHROMIUM.is_file():
        return f"no Chromium at {CHROMIUM} (Debian package chromium; or set $CHROMIUM)"
    if not (BIN / "jupyter-lab").is_file():
        return "JupyterLab is not installed in this environment (pip install -r requirements.txt)"
    labextension = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader"
    if not labextension.is_dir():
        return f"nbgrader's JupyterLab extension is missing ({labextension})"
    if shutil.which("bwrap") is None:
        return "bubblewrap (Debian package bubblewrap) is not installed: the grader refuses to run student code"
    return None


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def instructor_course(root, exchange):
    """An nbgrader course directory whose exchange is `exchange`, with the assignment released."""
    course = CourseDirectory(root)
    with open(course.root / "nbgrader_config.py", "a") as handle:
        handle.write(f"c.Exchange.root = {str(exchange)!r}\n")
    course.add_source(ASSIGNMENT, paths.SOLUTIONS)
    course.nbgrader("generate_assignment", ASSIGNMENT, "--force", timeout=300)
    course.nbgrader("release_assignment", ASSIGNMENT, "--force", timeout=120)
    return course


def student_environment(home, exchange, student):
    """The environment of a student's Jupyter: the student setup, as a JupyterHub course sets it."""
    config = home / ".jupyter"
    shutil.copytree(STUDENT_SETUP, config)
    # No question about Jupyter news in the middle of the screenshots (a test setting).
    news = config / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    return {**os.environ, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
            "JUPYTER_RUNTIME_DIR": str(home / ".runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / ".jupyter" / "lab" / "user-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / ".jupyter" / "lab" / "workspaces"),
            "NBGRADER_EXCHANGE": str(exchange), "JUPYTERHUB_USER": student,
            "PATH": str(BIN) + os.pathsep + os.environ.get("PATH", ""), "COURSE_FORCE_CPU": "1",
            "OMP_NUM_THREADS": "1"}


# Each student's uid: numbers no account on the machine has, that own nothing of the
# instructor's (a JupyterHub gives each student a user of their own in the same way).
STUDENT_UIDS = {"alice": 42_001, "bob": 42_002, "carol": 42_003}


def student_prefixes(shared):
    """Each student's command prefix (their own uid; the folders this Python needs opened
    to them where it must be), with a sentence saying how; or {} and the reason where that
    cannot be done (then the students are this test's user)."""
    if os.geteuid() != 0:
        return {}, "the test does not run as root: the students are this test's user"
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return {}, "setpriv (util-linux) is missing: the students run as root"
    opening = opened_to_other_users([sys.base_prefix, sys.prefix, os.path.dirname(sys.executable), REPO, shared])
    prefixes = {student: [*opening, setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
                for student, uid in STUDENT_UIDS.items()}
    # The server starts kernels with this Python: it must run from a process of that user
    # too (setpriv alone may start it where a child of it cannot).
    child = f"import subprocess; subprocess.run([{sys.executable!r}, '-c', 'import ipykernel, nbgrader'], check=True)"
    probe = subprocess.run(prefixes["alice"] + ["/bin/sh", "-c", f"{sys.executable} -c \"{child}\""],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        return {}, (f"uid {STUDENT_UIDS['alice']} cannot run this environment's Python ({sys.executable}): "
                    f"{probe.stderr.strip()[-300:]}; the students run as root")
    how = "in a mount namespace that opens this Python's folders to them" if opening else "directly"
    return prefixes, f"each student runs under a uid of their own ({how}), the instructor as root"


def student_home(shared, student, exchange, prefixes):
    """A home only its student may enter (mode 0700), as on a multi-user machine, and the
    environment of the student's processes."""
    home = shared / student
    home.mkdir()
    home.chmod(0o700)
    env = student_environment(home, exchange, student)
    owned_by_student(home, student, prefixes)
    return home, env


def owned_by_student(path, student, prefixes):
    if prefixes:
        uid = STUDENT_UIDS[student]
        for folder, _, files in os.walk(path):
            for name in [folder] + [os.path.join(folder, f) for f in files]:
                os.chown(name, uid, uid)


class JupyterLab:
    """A student's JupyterLab server on loopback, with a token; stopped with its process group."""

    def __init__(self, home, env, log, prefix=()):
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        allow_root = [] if prefix or os.geteuid() != 0 else ["--allow-root"]
        self.process = subprocess.Popen(
            [*prefix, str(BIN / "jupyter-lab"), *allow_root, "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
             f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={home}",
             "--ServerApp.port_retries=0", "--LabApp.news_url=", "--LabApp.check_for_updates_class="
             "jupyterlab.NeverCheckForUpdate"],
            cwd=home, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self, timeout=180):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"JupyterLab stopped: {Path(self.log).read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.5)  # polling the server until it answers, not guessing
        raise AssertionError(f"JupyterLab did not answer in {timeout} s: {Path(self.log).read_text()[-3000:]}")

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait()


class Screenshots:
    def __init__(self, page):
        self.page, self.count = page, 0
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for old in SCREENSHOTS.glob("*.png"):
            old.unlink()

    def __call__(self, name):
        self.count += 1
        self.page.screenshot(path=str(SCREENSHOTS / f"{self.count:02d}_{name}.png"))


def open_nbgrader_menu(page):
    page.locator(".lm-MenuBar-item", has_text="Nbgrader").click()
    return page.locator(".lm-Menu").last


def type_answer(page, name, code):
    """Replace the stub of the answer cell defining `name` with `code`, through the editor."""
    cell = page.locator(".jp-CodeCell", has=page.locator(".cm-content", has_text=f"def {name}(")).first
    cell.scroll_into_view_if_needed()
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    # insert_text goes through the editor's input handling as a paste would, without the
    # editor's auto-indent and bracket closing turning typed keys into other text.
    page.keyboard.insert_text(code.rstrip("\n"))
    page.keyboard.press("Escape")
    return cell


def save(page):
    """Ctrl+S, then wait for the server's answer (the tab no longer marked dirty): a save
    still in flight when the next one starts makes JupyterLab report the file as "changed
    on disk" (seen on a busy machine)."""
    from playwright.sync_api import expect

    page.keyboard.press("Control+s")
    expect(page.locator(".lm-TabBar-tab.jp-mod-dirty")).to_have_count(0, timeout=60_000)


def notebook_cells(panel):
    """Each cell of the open notebook: the start of its source, its prompt, whether it shows an error."""
    return panel.locator(".jp-Notebook").evaluate("""notebook => [...notebook.querySelectorAll('.jp-Cell')].map(
        cell => ({source: (cell.querySelector('.cm-content') || {textContent: ''}).textContent.slice(0, 200),
                  prompt: (cell.querySelector('.jp-InputPrompt') || {textContent: ''}).textContent.trim(),
                  error: !!cell.querySelector('.jp-OutputArea-output[data-mime-type*="error"]')
                         || /Error/.test((cell.querySelector('.jp-OutputArea') || {textContent: ''}).textContent)}))""")


def nbgrader_as(student, home, env, prefixes, *args):
    """Run an nbgrader command as `student` would, in their home."""
    done = subprocess.run([*prefixes.get(student, []), sys.executable, "-m", "nbgrader", *args], cwd=home, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"nbgrader {args[0]} as {student}: {(done.stdout + done.stderr)[-2000:]}"


def can_list(student, folder, prefixes, env):
    """Whether `student` may list the files in `folder`."""
    done = subprocess.run([*prefixes.get(student, []), "/bin/ls", str(folder)], env=env, capture_output=True,
                          timeout=60)
    return done.returncode == 0


def submit_by_command_line(student, home, env, prefixes, edit):
    """A student fetches the assignment, `edit`s the notebook and submits, with nbgrader's command line."""
    nbgrader_as(student, home, env, prefixes, "fetch_assignment", ASSIGNMENT)
    edit(home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")  # the file keeps its owner, the student
    nbgrader_as(student, home, env, prefixes, "submit", ASSIGNMENT)


def not_json(path):
    path.write_text('{"cells": [{"cell_type": "code", "sou')


def answer_dot_score(path):
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "dot_score":
            cell.source = ANSWERS["dot_score"]
    nbformat.write(notebook, path)


def release_feedback(course, out, student):
    """Put the grader's feedback page where nbgrader's release_feedback looks for it."""
    feedback = course.root / "feedback" / student / ASSIGNMENT
    feedback.mkdir(parents=True)
    shutil.copy(out / "feedback" / f"{student}.html", feedback / f"{ASSIGNMENT}.html")
    for name in ("timestamp.txt", "submission_secret.txt"):
        shutil.copy(course.root / "submitted" / student / ASSIGNMENT / name, feedback / name)


@pytest.mark.xdist_group("browser")
def test_student_and_instructor_day(tmp_path):
    missing = _missing()
    if missing:
        pytest.skip(missing)
    from playwright.sync_api import expect, sync_playwright

    # Folders the students' users can reach (pytest's own tmp folders are private to root).
    shared = Path(tempfile.mkdtemp(prefix="student-day-"))
    shared.chmod(0o755)
    prefixes, who = student_prefixes(shared)
    if not prefixes:
        warnings.warn(f"exchange permissions between users not exercised: {who}")
    print(who)
    exchange = shared / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)  # nbgrader's exchange: each student writes its own inbound files
    course = instructor_course(tmp_path / "course", exchange)
    alice, env = student_home(shared, "alice", exchange, prefixes)
    lab = JupyterLab(alice, env, tmp_path / "jupyterlab.log", prefixes.get("alice", []))
    try:
        lab.wait()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            shot = Screenshots(page)
            page.goto(f"{lab.url}/lab?token={lab.token}")
            expect(page.locator(".jp-Launcher")).to_be_visible()

            # The Nbgrader menu: a student's tools only.
            menu = open_nbgrader_menu(page)
            expect(menu.get_by_text("Assignment List")).to_be_visible()
            shot("nbgrader_menu")
            items = menu.locator(".lm-Menu-itemLabel").all_inner_texts()
            assert not [i for i in items if "Formgrader" in i or "Course" in i], items
            menu.get_by_text("Assignment List").click()

            # Fetch the released assignment.
            released = page.locator("#released_assignments_list")
            fetch = released.locator(".list_item", has_text=ASSIGNMENT).get_by_role("button", name="Fetch")
            expect(fetch).to_be_visible()
            shot("assignments_released")
            fetch.click()
            fetched = page.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT).first
            expect(fetched).to_be_visible()
            assert (alice / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
            shot("assignments_fetched")

            # Open the notebook from the panel.
            fetched.locator("a", has_text=ASSIGNMENT).first.click()
            notebook_link = page.locator("#fetched_assignments_list a", has_text=f"{ASSIGNMENT}").last
            expect(notebook_link).to_be_visible()
            notebook_link.click()
            panel = page.locator(".jp-NotebookPanel:visible")
            expect(panel.locator(".cm-content", has_text="def dot_score(").first).to_be_visible()
            expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first).to_be_attached()
            shot("notebook_opened")

            for name, code in ANSWERS.items():
                type_answer(page, name, code)
            shot("answers_typed")
            save(page)

            # Run all: the cells run up to the first function still unfinished.
            page.locator(".lm-MenuBar-item", has_text="Run").click()
            page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
            error = panel.locator(".jp-OutputArea-output", has_text="NotImplementedError").first
            expect(error).to_be_visible()
            expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first).to_be_attached()
            error.scroll_into_view_if_needed()
            cells = notebook_cells(panel)
            ran = [c for c in cells if re.fullmatch(r"\[\d+\]:", c["prompt"])]
            failed = [c for c in cells if c["error"]]
            assert len(failed) == 1 and "general_score: a small case" in failed[0]["source"], failed
            for test in ("dot_score: one query against four keys", "scaled_dot_score: one query against three"):
                assert [c for c in ran if test in c["source"] and not c["error"]], (test, ran)
            assert not [c for c in ran if "additive_score" in c["source"]], "Run All went past the error"
            shot("run_all_stops_at_first_unfinished")
            save(page)

            # Validate: the toolbar's button and its dialog.
            panel.locator(".jp-Toolbar-item", has_text="Validate").first.click()
            dialog = page.locator(".jp-Dialog")
            expect(dialog).to_be_visible()
            expect(dialog.locator(".jp-Dialog-body")).to_contain_text("NotImplementedError")
            shot("validate_dialog")
            validation_text = dialog.inner_text()
            dialog.get_by_role("button").last.click()
            expect(dialog).to_have_count(0)

            # Submit from the Assignments panel.
            page.locator(".lm-TabBar-tab", has_text="Assignments").click()
            submit = page.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT).get_by_role(
                "button", name="Submit").first
            submit.click()
            submitted = page.locator("#submitted_assignments_list .list_item", has_text=ASSIGNMENT)
            expect(submitted.first).to_be_visible()
            shot("submitted")

            # The due date passes. A second student submits a broken notebook, a third one
            # answer, late; the instructor collects and grades, 10% off per day late.
            due = datetime.now(timezone.utc)
            time.sleep(0.01)
            bob, bob_env = student_home(shared, "bob", exchange, prefixes)
            submit_by_command_line("bob", bob, bob_env, prefixes, not_json)
            carol, carol_env = student_home(shared, "carol", exchange, prefixes)
            submit_by_command_line("carol", carol, carol_env, prefixes, answer_dot_score)
            submitted_dir = course.root / "submitted"
            code, collected, log = run_autograder("collect", ASSIGNMENT, "--exchange", exchange, "--to",
                                                  submitted_dir)
            assert code == 0 and all(not report["notes"] for report in collected), log
            assert sorted(p.name for p in submitted_dir.iterdir()) == ["alice", "bob", "carol"]
            out = tmp_path / "grading"
            code, lines, log = run_autograder("grade", ASSIGNMENT, submitted_dir, "--out", out, "--due",
                                              due.isoformat(), "--late-penalty", "10", "--no-progress")
            assert code == 0, log
            results = {line["student"]: line for line in lines}
            assert results["alice"]["status"] == "graded", results["alice"]
            assert (results["alice"]["score"], results["alice"]["penalty"]) == (ANSWER_POINTS, 0.0), results["alice"]
            assert results["bob"]["status"] == "error" and "bob" in results["bob"]["message"], results["bob"]
            carol_result = results["carol"]
            assert carol_result["penalty"] == pytest.approx(0.1 * DOT_SCORE_POINTS), carol_result
            assert carol_result["score"] == pytest.approx(0.9 * DOT_SCORE_POINTS), carol_result
            assert "after the due date" in carol_result["message"], carol_result
            with open(out / "grades.csv", newline="") as handle:
                rows = {row["student"]: row for row in csv.DictReader(handle)}
            assert float(rows["carol"]["late_penalty"]) == pytest.approx(0.1 * DOT_SCORE_POINTS), rows["carol"]
            assert rows["bob"]["status"] == "error" and "not a notebook" in rows["bob"]["message"], rows["bob"]

            # Feedback: the grader's pages, released through the exchange.
            for student in ("alice", "carol"):
                release_feedback(course, out, student)
            course.nbgrader("release_feedback", ASSIGNMENT, timeout=120)
            if prefixes:
                course_exchange = exchange / "attention-course"
                assert can_list("bob", course_exchange / "outbound", prefixes, bob_env), "bob cannot fetch"
                for private in (course_exchange / "inbound", course_exchange / "feedback", alice):
                    assert not can_list("bob", private, prefixes, bob_env), f"bob can list {private}"

            page.locator("#refresh_assignments_list").click()
            fetch_feedback = page.locator("#submitted_assignments_list").get_by_role("button",
                                                                                    name="Fetch Feedback")
            fetch_feedback.first.click()
            view = page.locator("#submitted_assignments_list a", has_text="view feedback").first
            expect(view).to_be_visible()
            shot("feedback_fetched")
            view.click()
            html_file = page.locator(".jp-DirListing-item", has_text=f"{ASSIGNMENT}.html").first
            expect(html_file).to_be_visible()
            html_file.dblclick()
            viewer = page.frame_locator("iframe").last
            expect(viewer.locator("body")).to_contain_text(f"{ASSIGNMENT} (Score: {ANSWER_POINTS:.1f} / 22.0)")
            shot("feedback_opened")

            # The late student's feedback page, fetched with the command line.
            nbgrader_as("carol", carol, carol_env, prefixes, "fetch_feedback", ASSIGNMENT)
            (late_page,) = (carol / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html")
            page.goto(late_page.as_uri())
            penalty_line = f"Late submission penalty (Score: -{0.1 * DOT_SCORE_POINTS:g})"
            expect(page.locator("body")).to_contain_text(penalty_line)
            expect(page.locator(".lateness")).to_contain_text("after the due date")
            page.locator(".lateness").scroll_into_view_if_needed()
            shot("late_feedback")
            browser.close()
    finally:
        lab.stop()
        shutil.rmtree(shared, ignore_errors=True)
    print("validate dialog said:", validation_text[:300])
    print("the broken submission got:", results["bob"]["message"])


def test_grading_from_a_private_copy_of_the_solutions(tmp_path):
    """An instructor keeps solutions/ (with hidden tests of their own) outside the public
    repository and grades the zip that a learning management system gives with it."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed: the grader refuses to run student code")
    private = tmp_path / "private-solutions"
    shutil.copytree(paths.SOLUTIONS / ASSIGNMENT, private / ASSIGNMENT)
    source = private / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    notebook = nbformat.read(source, as_version=4)
    # A hidden test of the instructor's own, that the public repository does not have:
    # it fails every answer, so that the grade shows which copy graded.
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_dot_score_batches":
            cell.source += ("\n### BEGIN HIDDEN TESTS\n"
                            "assert False, 'a hidden test kept in the private copy'\n### END HIDDEN TESTS\n")
    nbformat.write(notebook, source)

    # The student downloads the student version from the book and answers dot_score.
    student = nbformat.read(paths.student_version_folder(ASSIGNMENT) / f"{ASSIGNMENT}.ipynb", as_version=4)
    for cell in student.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "dot_score":
            cell.source = ANSWERS["dot_score"]
    submissions = tmp_path / "lms"
    submissions.mkdir()
    with zipfile.ZipFile(submissions / "carol.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{ASSIGNMENT}.ipynb", nbformat.writes(student))

    code, lines, log = run_autograder("grade", ASSIGNMENT, submissions / "carol.zip", "--solutions", private,
                                      "--out", tmp_path / "grading", "--no-progress")
    assert code == 0, log
    (result,) = lines
    assert result["status"] == "graded", result
    # dot_score's visible test and its inputs test (1 point each) pass; the private hidden
    # test fails the batches test.
    assert result["score"] == 2.0, result
    assert result["tests"]["test_dot_score_batches"][0] == 0, result
    assert "private copy" in json.dumps(result["messages"]), result
