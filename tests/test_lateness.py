"""Late submissions: the rule, and where a late penalty shows.

The rule (autograder/records/lateness.py) is tested on its own first. Then one batch of
`soft_lookup` reference solutions, each full marks (22 points), is graded with a due
date and 10% per day late. They differ only in their time of submission, nbgrader's
`timestamp.txt`, and in one student's extension; a zip carries no time at all, and one
folder's time cannot be read. The tests check the penalty in each place a person
looks: the JSON line and grades.csv (the instructor), the feedback page (the student)
and the class gradebook (nbgrader's own tools).
"""

import csv
import os
import shutil
import zipfile
from datetime import datetime, timedelta, timezone

import pytest
from nbgrader.api import Gradebook

from autograder.records import lateness
from autograder import paths
from autograder.records.gradebook import COURSE_ID
from conftest import by_student, run_autograder

ASSIGNMENT = "soft_lookup"
FULL_MARKS = 22.0
DUE = "2026-12-01T17:00+01:00"  # 16:00 UTC
UTC = timezone.utc


# -- the rule ---------------------------------------------------------------------------

@pytest.mark.parametrize("seconds_late, expected", [
    (0, 0.0),                    # on time
    (1, 2.0),                    # one second late starts a day
    (86_400, 2.0),               # exactly one day
    (86_401, 4.0),               # a second into the second day
    (9 * 86_400, 18.0),
    (30 * 86_400, 20.0),         # never more than the points earned
])
def test_penalty_is_a_percentage_of_the_points_earned_per_day_started(seconds_late, expected):
    assert lateness.penalty(20.0, seconds_late, 10) == pytest.approx(expected)


def test_penalty_edges():
    assert lateness.penalty(20.0, 3600, 0) == 0.0, "0 % reports lateness, takes nothing"
    assert lateness.penalty(20.0, 3600, 100) == 20.0, "100 % is zero for any late submission"
    assert lateness.penalty(0.0, 3600, 50) == 0.0, "nothing earned, nothing taken"


def test_due_dates_need_a_time_zone():
    assert lateness.due_date(DUE) == datetime(2026, 12, 1, 16, 0, tzinfo=UTC)
    assert lateness.due_date("2026-12-01T16:00Z") == datetime(2026, 12, 1, 16, 0, tzinfo=UTC)
    with pytest.raises(lateness.TimeRefused, match="no time zone"):
        lateness.due_date("2026-12-01T17:00")
    with pytest.raises(lateness.TimeRefused, match="ISO 8601"):
        lateness.due_date("next Tuesday")


def test_nbgrader_timestamps_are_read_in_utc():
    assert lateness.submission_time("2026-12-01 15:59:30.250000 UTC") == datetime(2026, 12, 1, 15, 59, 30, 250000,
                                                                                   tzinfo=UTC)
    assert lateness.submission_time("2026-12-01 17:59:30 +0200") == datetime(2026, 12, 1, 15, 59, 30, tzinfo=UTC)
    for bad in ("", "yesterday-ish", "x" * 500):
        with pytest.raises(lateness.TimeRefused):
            lateness.submission_time(bad)


def test_extensions_and_their_durations():
    assert lateness.extension("alice=2d") == ("alice", timedelta(days=2))
    assert lateness.extension("bob = 36h") == ("bob", timedelta(hours=36))
    assert lateness.extension("carol=90min") == ("carol", timedelta(minutes=90))
    assert lateness.extension("dan=0") == ("dan", timedelta(0))
    for bad in ("alice", "=2d", "alice=soon", "alice=2 days"):
        with pytest.raises(lateness.TimeRefused):
            lateness.extension(bad)


def test_lateness_as_people_say_it():
    assert lateness.how_late(59) == "1 min"
    assert lateness.how_late(3 * 3600) == "3 h"
    assert lateness.how_late(86_400 + 2 * 3600 + 5 * 60) == "1 day 2 h 5 min"
    assert lateness.how_late(2 * 86_400) == "2 days"


def test_the_nbgrader_plugin_applies_the_same_rule():
    plugin = lateness.PercentPerDay(percent_per_day=25)
    assert plugin.late_submission_penalty("alice", 8.0, 2 * 86_400) == 4.0
    assert plugin.late_submission_penalty("alice", 8.0, 0) is None


# -- one graded batch -------------------------------------------------------------------

SUBMITTED_AT = {  # nbgrader's timestamp.txt, as `nbgrader submit` writes it
    "on_time": "2026-12-01 15:59:59.000000 UTC",
    "late": "2026-12-03 04:00:00.000000 UTC",  # 1 day 12 h late: two days started, 20 %
    "extended": "2026-12-02 10:00:00.000000 UTC",  # late, but within a 1-day extension
    "unreadable": "around teatime",
}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (Debian package bubblewrap) is not installed: the grader refuses to run student code")
    folder = tmp_path_factory.mktemp("lateness")
    (source,) = paths.assignment_notebooks(ASSIGNMENT)
    submitted = folder / "submitted"
    for student, stamp in SUBMITTED_AT.items():
        mine = submitted / student / ASSIGNMENT
        mine.mkdir(parents=True)
        shutil.copy(source, mine / source.name)
        (mine / "timestamp.txt").write_text(stamp + "\n")
    with zipfile.ZipFile(folder / "from_lms.zip", "w") as archive:
        archive.writestr(source.name, source.read_bytes())
    out = folder / "grading"
    code, lines, log = run_autograder("grade", ASSIGNMENT, submitted, folder / "from_lms.zip", "--out", out,
                                      "--due", DUE, "--late-penalty", "10", "--extension", "extended=1d",
                                      "--no-progress")
    assert code == 0, log[-3000:]
    return {"folder": folder, "submitted": submitted, "out": out, "results": by_student(lines), "log": log}


def test_a_late_submission_loses_its_penalty_and_says_why(batch):
    late = batch["results"]["late"]
    assert late["status"] == "graded", late
    assert late["penalty"] == pytest.approx(0.2 * FULL_MARKS)
    assert late["score"] == pytest.approx(0.8 * FULL_MARKS)
    assert late["seconds_late"] == 36 * 3600
    assert late["submitted"] == "2026-12-03T04:00:00+00:00"
    assert "1 day 12 h after the due date" in late["message"] and "4.4 points taken off" in late["message"]
    assert all(score == top for score, top in late["tests"].values()), "the tests' own points are unchanged"


def test_on_time_and_extended_submissions_lose_nothing(batch):
    for student in ("on_time", "extended"):
        result = batch["results"][student]
        assert (result["score"], result["penalty"], result["seconds_late"]) == (FULL_MARKS, 0.0, 0.0), result
        assert "due date" not in result["message"]


def test_a_submission_without_a_time_is_graded_and_flagged(batch):
    zipped = batch["results"]["from_lms"]
    assert zipped["score"] == FULL_MARKS and zipped["penalty"] == 0.0
    assert any("lateness not judged" in flag for flag in zipped["flags"]), zipped


def test_an_unreadable_time_of_submission_is_an_error_not_on_time(batch):
    result = batch["results"]["unreadable"]
    assert result["status"] == "error" and result["score"] == 0.0
    assert "timestamp.txt" in result["message"] and "around teatime" in result["message"]


def test_grades_csv_has_the_penalty_and_the_lateness(batch):
    with open(batch["out"] / "grades.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert float(rows["late"]["score"]) == pytest.approx(0.8 * FULL_MARKS)
    assert float(rows["late"]["late_penalty"]) == pytest.approx(0.2 * FULL_MARKS)
    assert rows["late"]["late"] == "1 day 12 h"
    assert rows["on_time"]["late"] == "" and float(rows["on_time"]["late_penalty"]) == 0.0


def test_the_feedback_page_shows_the_penalty_and_how_late(batch):
    page = (batch["out"] / "feedback" / "late.html").read_text()
    assert "Late submission penalty (Score: -4.4)" in page
    assert "Submitted 1 day 12 h after the due date (2026-12-01 16:00 UTC)" in page
    assert f"Score: {0.8 * FULL_MARKS:.1f} / {FULL_MARKS:.1f}" in page
    on_time = (batch["out"] / "feedback" / "on_time.html").read_text()
    assert "Late submission penalty" not in on_time and "after the due date" not in on_time


def test_the_class_gradebook_holds_due_date_extension_and_penalty(batch):
    with Gradebook(f"sqlite:///{batch['out'] / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        assert gradebook.find_assignment(ASSIGNMENT).duedate == datetime(2026, 12, 1, 16, 0)
        late = gradebook.find_submission(ASSIGNMENT, "late")
        assert late.late_submission_penalty == pytest.approx(0.2 * FULL_MARKS)
        assert late.total_seconds_late == 36 * 3600
        extended = gradebook.find_submission(ASSIGNMENT, "extended")
        assert extended.extension == timedelta(days=1) and extended.total_seconds_late == 0
        assert gradebook.find_submission(ASSIGNMENT, "from_lms").timestamp is None


def test_a_later_run_keeps_the_due_date_and_a_new_rule_regrades(batch):
    """Run again without --due: the gradebook's due date and the extension hold, and
    unchanged submissions are not graded again. A different rule grades them again."""
    submitted, out = batch["submitted"], batch["out"]
    code, lines, log = run_autograder("grade", ASSIGNMENT, submitted / "late", submitted / "extended",
                                      "--out", out, "--late-penalty", "10", "--no-progress")
    assert code == 0, log[-3000:]
    again = by_student(lines)
    for student in ("late", "extended"):
        assert again[student]["seconds"] == batch["results"][student]["seconds"], "graded again instead of resumed"
        assert again[student]["score"] == batch["results"][student]["score"]

    code, lines, log = run_autograder("grade", ASSIGNMENT, submitted / "late", "--out", out, "--late-penalty",
                                      "100", "--no-progress")
    assert code == 0, log[-3000:]
    (late,) = lines
    assert (late["score"], late["penalty"]) == (0.0, FULL_MARKS), late
    assert "a late submission scores zero" in late["message"]


@pytest.mark.parametrize("option, words", [
    (("--due", "2026-12-01T17:00"), "no time zone"),
    (("--due", "soon"), "ISO 8601"),
    (("--late-penalty", "150"), "0 to 100"),
    (("--extension", "alice"), "STUDENT=DURATION"),
])
def test_bad_lateness_options_are_refused_before_anything_runs(tmp_path, option, words):
    code, lines, log = run_autograder("grade", ASSIGNMENT, tmp_path / "none.ipynb", "--out", tmp_path / "out",
                                      *option, "--no-progress")
    assert code == 2 and not lines, log
    assert words in log, log
    assert not (tmp_path / "out").exists(), "nothing is written for a refused command"


def test_a_timestamp_that_is_a_link_a_pipe_or_huge_is_refused_without_reading_it(tmp_path):
    """timestamp.txt comes from the student's side of the exchange: it is read only when
    it is a plain file, and then only its first KiB."""
    from autograder.records.submissions import collect

    (source,) = paths.assignment_notebooks(ASSIGNMENT)
    for student in ("link", "pipe", "huge", "fine"):
        (tmp_path / student / ASSIGNMENT).mkdir(parents=True)
        shutil.copy(source, tmp_path / student / ASSIGNMENT / source.name)
    stamps = {student: tmp_path / student / ASSIGNMENT / "timestamp.txt"
              for student in ("link", "pipe", "huge", "fine")}
    stamps["link"].symlink_to("/etc/hostname")
    os.mkfifo(stamps["pipe"])  # reading it would wait for ever
    stamps["huge"].write_bytes(b"1" * (8 * 1024 * 1024))
    stamps["fine"].write_text(SUBMITTED_AT["on_time"])
    found = {s.student: s for s in collect([tmp_path], ASSIGNMENT, [source.name])}
    assert "symbolic link" in found["link"].error
    assert "not a plain file" in found["pipe"].error
    assert "not a timestamp" in found["huge"].error
    assert not found["fine"].error and found["fine"].timestamp == datetime(2026, 12, 1, 15, 59, 59, tzinfo=UTC)
    assert all(not found[s].notebooks for s in ("link", "pipe", "huge")), "refused submissions are not graded"
