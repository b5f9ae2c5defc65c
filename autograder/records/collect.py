"""Collect submissions from nbgrader's exchange without trusting what students wrote there.

    python -m autograder collect ASSIGNMENT --exchange /srv/nbgrader/exchange

does what `nbgrader collect` does (each student's latest submission from the course's
inbound folder into submitted/STUDENT/ASSIGNMENT/), but on a shared exchange every
student can write the inbound folder, and `nbgrader collect`, run by the instructor,
trusts it:

* it follows symbolic links: a student who submits a link named like the notebook,
  pointing to the instructor's solutions, gets them collected as their own work;
* it believes the folder's name and timestamp.txt for the time of submission, both
  written by the student, who owns the folder and can change the notebook in it after
  the due date;
* it only warns when a folder claims to be another student's.

Here, only plain files are copied (read without following links, within size limits);
the time of submission is the one the student recorded only if the folder and its files
have not changed since (a file's status-change time, which its owner can push later but
never back); otherwise timestamp.txt is rewritten with the time of the last change (and
nbgrader's release_feedback, which is keyed by that file, cannot return that student's
page through the exchange). Where a student id is an account on this machine, a folder
owned by another account is refused. What was refused or changed is printed, one JSON
line per student.
"""

import os
import pwd
import re
import shutil
import stat
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

from autograder.records.lateness import TimeRefused, submission_time
from autograder.records.submissions import MAX_NOTEBOOK_BYTES, MAX_UNZIPPED_BYTES, read_timestamp

TOLERANCE = timedelta(seconds=60)  # nbgrader submit writes timestamp.txt, then copies the files
MAX_FILES = 1000
NBGRADER_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"
SAFE_STUDENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._@-]{0,63}")  # a folder name, never a path


def entries(inbound, assignment):
    """The inbound folders of `assignment`: (student, name), from STUDENT+ASSIGNMENT+TIME+RANDOM."""
    found = []
    for entry in os.scandir(inbound):
        parts = entry.name.rsplit("+", 3)
        if len(parts) == 4 and parts[1] == assignment and parts[0]:
            found.append((parts[0], entry.name))
    return found


def owner_problem(student, status):
    """Why a folder owned by `status.st_uid` cannot be `student`'s, or ''."""
    try:
        account = pwd.getpwnam(student)
    except KeyError:
        return ""  # not an account here (a hub's users, say): ownership says nothing
    if account.pw_uid != status.st_uid:
        return f"the folder belongs to uid {status.st_uid}, not to {student} (uid {account.pw_uid})"
    return ""


def changed_at(status):
    return datetime.fromtimestamp(status.st_ctime, timezone.utc)


def copy_plain_files(source, target):
    """Copy the plain files under `source` into `target` without following any link.
    Returns (the latest status-change time seen, notes on what was left out)."""
    latest, notes, total, count = changed_at(os.lstat(source)), [], 0, 0
    for folder, folders, files in os.walk(source):  # os.walk does not descend into links
        relative = Path(folder).relative_to(source)
        for name in sorted(folders + files):
            path = Path(folder) / name
            status = os.lstat(path)
            latest = max(latest, changed_at(status))
            if stat.S_ISDIR(status.st_mode):
                continue
            if not stat.S_ISREG(status.st_mode):
                kind = "a symbolic link" if stat.S_ISLNK(status.st_mode) else "not a plain file"
                notes.append(f"{relative / name} is {kind}: not collected")
                continue
            count += 1
            total += status.st_size
            if status.st_size > MAX_NOTEBOOK_BYTES or total > MAX_UNZIPPED_BYTES or count > MAX_FILES:
                notes.append(f"{relative / name} is past the size limits: not collected")
                continue
            (target / relative).mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as handle, open(target / relative / name, "wb") as copy:
                shutil.copyfileobj(handle, copy)
    return latest, notes


def time_of_submission(recorded, changed):
    """The student's recorded time, if nothing changed after it; else the last change."""
    if recorded is not None and recorded <= changed <= recorded + TOLERANCE:
        return recorded, ""
    if recorded is None:
        return changed, "no readable timestamp.txt: the time of the last change is used"
    return changed, (f"the submission changed at {changed:%Y-%m-%d %H:%M:%S} UTC, after the time it recorded "
                     f"({recorded:%Y-%m-%d %H:%M:%S} UTC): the later time is used")


def new_report(student, notes=()):
    """What collecting one student's submissions gave: which folder, its time, what was refused."""
    return {"student": student, "collected": None, "submitted": None, "notes": list(notes)}


def collect_one(inbound, student, names, assignment, submitted):
    """Collect the latest acceptable of `student`'s inbound folders; a report for them."""
    report = new_report(student)
    candidates = []
    for name in names:
        status = os.lstat(inbound / name)
        if not stat.S_ISDIR(status.st_mode):
            report["notes"].append(f"{name} is not a folder: refused")
            continue
        problem = owner_problem(student, status)
        if problem:
            report["notes"].append(f"{name}: {problem}: refused")
            continue
        candidates.append(name)
    # Latest first by the folder's own status-change time, which its owner cannot move back.
    candidates.sort(key=lambda name: os.lstat(inbound / name).st_ctime, reverse=True)
    if not candidates:
        return report
    name = candidates[0]
    target = submitted / student / assignment
    staging = submitted / student / f".{assignment}.collecting"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    changed, notes = copy_plain_files(inbound / name, staging)
    try:
        recorded = submission_time(read_timestamp(inbound / name / "timestamp.txt"))
    except TimeRefused:
        recorded = None
    when, note = time_of_submission(recorded, changed)
    if note:  # else the student's own file stays, word for word: nbgrader's feedback is keyed by it
        (staging / "timestamp.txt").write_text(when.strftime(NBGRADER_FORMAT))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
    report.update(collected=name, submitted=when.isoformat(), notes=report["notes"] + notes + ([note] if note else []))
    return report


def collect(assignment, exchange, course_id, submitted):
    """Collect every student's latest submission of `assignment`; one report per student."""
    inbound = Path(exchange) / course_id / "inbound"
    if not inbound.is_dir():
        raise FileNotFoundError(f"no inbound folder at {inbound}: is the exchange {exchange} and the course "
                                f"{course_id}?")
    by_student, refused = defaultdict(list), []
    for student, name in entries(inbound, assignment):
        if SAFE_STUDENT.fullmatch(student):
            by_student[student].append(name)
        else:
            refused.append(new_report(student, [f"{name}: not a student id this grader accepts: refused"]))
    return refused + [collect_one(inbound, student, names, assignment, Path(submitted))
                      for student, names in sorted(by_student.items())]
