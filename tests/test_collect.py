"""`python -m autograder collect`: nbgrader's exchange, read without trusting its students.

Each test builds the course's inbound folder as `nbgrader submit` leaves it
(STUDENT+ASSIGNMENT+TIME+RANDOM/ with the notebook, timestamp.txt and
submission_secret.txt), then plays a student who wrote something else there.
"""

import json
import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from autograder.records.collect import NBGRADER_FORMAT
from conftest import run_autograder

ASSIGNMENT = "soft_lookup"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"


def submit(inbound, student, recorded=None, notebook="{}", suffix="0"):
    """An inbound folder as `nbgrader submit` writes it; `recorded`: the time it claims."""
    recorded = recorded or datetime.now(timezone.utc)
    folder = inbound / f"{student}+{ASSIGNMENT}+{recorded.strftime(NBGRADER_FORMAT)}+{suffix}"
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_text(notebook)
    (folder / "submission_secret.txt").write_text("secret")
    (folder / "timestamp.txt").write_text(recorded.strftime(NBGRADER_FORMAT))
    return folder


@pytest.fixture
def exchange(tmp_path):
    inbound = tmp_path / "exchange" / "attention-course" / "inbound"
    inbound.mkdir(parents=True)
    return tmp_path / "exchange", inbound


def collect(exchange, to):
    code, lines, log = run_autograder("collect", ASSIGNMENT, "--exchange", exchange, "--to", to)
    assert code == 0, log
    return {line["student"]: line for line in lines}


def collected_time(to, student):
    return (to / student / ASSIGNMENT / "timestamp.txt").read_text()


def test_an_honest_submission_is_collected_with_its_own_time(exchange, tmp_path):
    root, inbound = exchange
    recorded = datetime.now(timezone.utc)
    submit(inbound, "alice", recorded, notebook='{"answer": 42}')
    reports = collect(root, tmp_path / "submitted")
    assert reports["alice"]["notes"] == [], reports
    mine = tmp_path / "submitted" / "alice" / ASSIGNMENT
    assert json.loads((mine / NOTEBOOK).read_text()) == {"answer": 42}
    assert (mine / "submission_secret.txt").read_text() == "secret", "release_feedback needs it"
    assert collected_time(tmp_path / "submitted", "alice") == recorded.strftime(NBGRADER_FORMAT)


def test_a_link_to_the_instructors_solutions_is_not_collected(exchange, tmp_path):
    """A student's notebook that is a symbolic link to a file only the instructor may read."""
    root, inbound = exchange
    solutions = tmp_path / "private" / NOTEBOOK
    solutions.parent.mkdir()
    solutions.write_text('{"the": "reference solution"}')
    folder = submit(inbound, "mallory")
    (folder / NOTEBOOK).unlink()
    (folder / NOTEBOOK).symlink_to(solutions)
    reports = collect(root, tmp_path / "submitted")
    assert any("symbolic link" in note for note in reports["mallory"]["notes"]), reports
    assert not (tmp_path / "submitted" / "mallory" / ASSIGNMENT / NOTEBOOK).exists()


def test_a_notebook_changed_after_its_recorded_time_takes_the_time_of_the_change(exchange, tmp_path):
    """Submitted 'on time', the notebook replaced in the student's own inbound folder later."""
    root, inbound = exchange
    claimed = datetime.now(timezone.utc) - timedelta(hours=3)
    submit(inbound, "eve", claimed)
    reports = collect(root, tmp_path / "submitted")
    when = datetime.fromisoformat(reports["eve"]["submitted"])
    assert when > claimed + timedelta(hours=2), reports
    assert any("after the time it recorded" in note for note in reports["eve"]["notes"]), reports
    assert collected_time(tmp_path / "submitted", "eve") == when.strftime(NBGRADER_FORMAT)


def test_the_latest_submission_is_the_one_collected(exchange, tmp_path):
    root, inbound = exchange
    submit(inbound, "bob", notebook='{"try": 1}', suffix="a")
    time.sleep(0.05)  # a later status-change time
    # A name claiming an earlier time does not make it the earlier one.
    submit(inbound, "bob", datetime.now(timezone.utc) - timedelta(days=1), notebook='{"try": 2}', suffix="b")
    collect(root, tmp_path / "submitted")
    assert json.loads((tmp_path / "submitted" / "bob" / ASSIGNMENT / NOTEBOOK).read_text()) == {"try": 2}


def test_a_folder_named_for_someone_else_is_refused(exchange, tmp_path):
    """Where student ids are accounts: a folder owned by `nobody` claiming to be `daemon`'s."""
    if os.geteuid() != 0:
        pytest.skip("making folders owned by other accounts needs root")
    root, inbound = exchange
    for student in ("nobody", "daemon"):
        folder = submit(inbound, student)
        for path in [folder, *folder.iterdir()]:
            os.lchown(path, 65534, 65534)
    reports = collect(root, tmp_path / "submitted")
    assert reports["nobody"]["collected"] and not reports["nobody"]["notes"], reports
    assert reports["daemon"]["collected"] is None, reports
    assert any("belongs to uid 65534" in note for note in reports["daemon"]["notes"]), reports
    assert not (tmp_path / "submitted" / "daemon").exists()


def test_a_name_that_is_not_a_student_id_is_refused(exchange, tmp_path):
    root, inbound = exchange
    submit(inbound, ".hidden")
    reports = collect(root, tmp_path / "submitted")
    assert reports[".hidden"]["collected"] is None and "refused" in reports[".hidden"]["notes"][0]
    assert not (tmp_path / "submitted" / ".hidden").exists()


def test_no_inbound_folder_is_a_clear_error(tmp_path):
    code, lines, log = run_autograder("collect", ASSIGNMENT, "--exchange", tmp_path, "--to", tmp_path / "s")
    assert code == 2 and not lines
    assert "no inbound folder" in log
