"""Turn what an instructor hands the grader into submissions: (student, notebooks).

Accepted, for an assignment ASSIGNMENT:
  alice.ipynb                        a notebook; the student is the file name
  alice/  or  alice/ASSIGNMENT/      nbgrader's layout STUDENT/ASSIGNMENT/*.ipynb
  alice.zip                          a zip (from an LMS) holding the notebook(s)
  submissions/                       a folder of any of these: notebooks and zips (what an
                                     LMS download gives, one per student, each named by its
                                     file) and student folders (nbgrader's submitted/, with
                                     the time of submission in ASSIGNMENT/timestamp.txt)

Nothing here runs student code. A student's submission that cannot be read becomes a
Submission with an `error`, so that it is reported (and recorded as that student's
error) and the rest of the batch goes on. An input that is no student's submission is
`refused`: a path that does not exist, a folder with nothing to grade, a file in a
folder that is neither a notebook nor a zip, and every submission of a batch that
shares its student id with another; a refused input is reported and never recorded.
Inside a folder, hidden entries (.name), __MACOSX/ and folders that hold neither
ASSIGNMENT/ nor a notebook (a student's other assignments, in nbgrader's submitted/)
are passed over; a folder of notebooks without ASSIGNMENT/ is refused.

Student ids name files (results/STUDENT.json) and gradebook rows, so they are safe in
paths and one-to-one: two different names never share an id, and two submissions that
resolve to one id are both refused rather than one recorded over the other.
"""

import hashlib
import json
import os
import re
import stat
import unicodedata
import warnings
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

import nbformat

from autograder.records.lateness import TimeRefused, submission_time

MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024
# Checked before nbformat reads a notebook: the course's notebooks have 30 to 60 cells and
# about 1 500 JSON values; at these limits reading, checking and assembling one takes a
# few seconds at most (book/for_instructors.md).
MAX_CELLS = 2_000
MAX_NOTEBOOK_VALUES = 200_000  # JSON values outside the cells' outputs
MAX_ATTACHMENTS = 1_000  # images pasted into markdown cells: kept in the graded notebook and its feedback
MAX_ZIP_BYTES = 100 * 1024 * 1024
MAX_UNZIPPED_BYTES = 100 * 1024 * 1024  # notebooks inflated from one zip, all members together
MAX_ZIP_MEMBERS = 10_000
MAX_TIMESTAMP_BYTES = 1024
CHUNK_BYTES = 1024 * 1024

SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
HASH_DIGITS = 12
MADE_ID = re.compile(rf"-[0-9a-f]{{{HASH_DIGITS}}}\Z")  # how the ids student_id makes end


@dataclass
class Submission:
    student: str
    source: str  # the path the instructor gave, for messages
    notebooks: dict = field(default_factory=dict)  # expected file name -> notebook bytes
    error: str = ""
    duplicate: bool = False  # another submission of the batch has this id: refused
    refused: bool = False  # no student's submission (or a duplicate): reported, never recorded
    timestamp: datetime = None  # when it was submitted (UTC), where nbgrader's exchange recorded it

    @property
    def submitted_at(self):
        """The time of submission as ISO 8601, or '' where none was recorded."""
        return self.timestamp.isoformat() if self.timestamp is not None else ""

    def digest(self):
        """A fingerprint of the submitted notebooks and their time, to recognise an unchanged resubmission."""
        h = hashlib.sha256()
        for name in sorted(self.notebooks):
            h.update(name.encode() + b"\0" + self.notebooks[name] + b"\0")
        if self.submitted_at:
            h.update(b"timestamp\0" + self.submitted_at.encode())
        return h.hexdigest()


def student_id(name):
    """The student id of a file or folder name: safe in paths, and one-to-one.

    A name that is already a safe id (letters, digits, '.', '_', '-'; at most 64
    characters; not starting with '.' or '-', so neither hidden nor an option nor a
    spreadsheet formula) stays as it is. Any other name gets a cleaned form plus a hash
    of the name itself, so that "a b" and "a_b" or two long names sharing their first
    64 characters stay two students. A safe name that ends like such a hash is hashed
    too: otherwise a file named after another student's id would share it.
    """
    if SAFE_ID.fullmatch(name) and not MADE_ID.search(name):
        return name
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", ascii_name).strip("._-")
    cleaned = cleaned[:64 - HASH_DIGITS - 1].rstrip("._-") or "student"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_DIGITS]
    return f"{cleaned}-{digest}"


def check_notebook(data, label):
    """Return '' if `data` is a readable nbformat-4 notebook within the limits, else a
    message for the student.

    The limits are checked on a plain JSON parse, before nbformat's validation (whose
    cost grows with every cell and output, and on some shapes faster than their size).
    The outputs a notebook was saved with are neither read nor checked: the grader runs
    the notebook again and shows only the outputs of that run."""
    if not data.strip():
        return f"{label} is empty."
    if len(data) > MAX_NOTEBOOK_BYTES:
        return f"{label} is larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB."
    try:
        notebook = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return f"{label} is not a text file; a notebook is JSON text."
    except (ValueError, RecursionError) as error:
        what = str(error).splitlines()[0][:200] if isinstance(error, ValueError) else "nested too deeply"
        return f"{label} is not a notebook (invalid JSON: {what})."
    if not isinstance(notebook, dict) or "nbformat" not in notebook:
        return f"{label} is not a notebook (its JSON has no nbformat version)."
    if notebook["nbformat"] != 4:
        return f"{label} has nbformat {notebook['nbformat']!r}; save it from Jupyter as a version 4 notebook."
    cells = notebook.get("cells") if isinstance(notebook.get("cells"), list) else []  # not a list: validate() says so
    if len(cells) > MAX_CELLS:
        return (f"{label} has {len(cells)} cells; the grader reads notebooks of at most {MAX_CELLS} cells. "
                "Delete the cells you do not need (scratch work) and submit again.")
    skeleton = without_outputs(notebook)
    if count_values(skeleton, MAX_NOTEBOOK_VALUES) > MAX_NOTEBOOK_VALUES:
        return (f"{label} holds more than {MAX_NOTEBOOK_VALUES} JSON values outside its outputs (lines, "
                "metadata, attachments); the grader does not read it. Save it again from Jupyter.")
    attachments = sum(len(cell["attachments"]) for cell in cells
                      if isinstance(cell, dict) and isinstance(cell.get("attachments"), dict))
    if attachments > MAX_ATTACHMENTS:
        return (f"{label} has {attachments} attachments (images pasted into markdown cells); the grader reads "
                f"notebooks of at most {MAX_ATTACHMENTS}. Delete the ones you do not need and submit again.")
    for index, cell in enumerate(cells):
        metadata = cell.get("metadata") if isinstance(cell, dict) else None
        tags = metadata.get("tags", []) if isinstance(metadata, dict) else []
        # nbformat's schema wants unique tags: checked pairwise, in quadratic time, unless all are text.
        if not (isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)):
            return f"{label} is not a valid notebook: the tags of cell {index + 1} are not a list of text."
    try:
        with warnings.catch_warnings():  # cells without ids (older Jupyter): the grader needs none
            warnings.simplefilter("ignore")
            nbformat.validate(skeleton)
    except Exception as error:
        return f"{label} is not a valid notebook: {str(error).splitlines()[0][:200]}"
    return ""


def without_outputs(notebook):
    """A shallow copy of a notebook's JSON whose code cells have no outputs."""
    cells = notebook.get("cells")
    if not isinstance(cells, list):
        return notebook
    return {**notebook, "cells": [{**cell, "outputs": []} if isinstance(cell, dict) and "outputs" in cell else cell
                                  for cell in cells]}


def count_values(document, limit):
    """How many JSON values `document` holds (itself, every item and member), counting
    no further than limit + 1."""
    count, stack = 0, [document]
    while stack and count <= limit:
        value = stack.pop()
        count += 1
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count


def read_notebook(data):
    """The notebook that check_notebook accepted, as nbformat's NotebookNode, without its
    outputs (which the grader never uses), read without validating it again."""
    return nbformat.v4.nbjson.JSONReader().to_notebook(without_outputs(json.loads(data.decode("utf-8"))))


def match_notebooks(found, expected, label):
    """Map expected notebook names to found (name -> bytes); return (mapping, error)."""
    found = {name: data for name, data in found.items() if not name.startswith(".")}
    if not found:
        return {}, f"{label} holds no notebook (.ipynb file)."
    if set(expected) <= set(found):
        chosen = {name: found[name] for name in expected}
    elif len(expected) == 1 and len(found) == 1:
        # One notebook expected, one given under another name (alice.ipynb): take it.
        chosen = {expected[0]: next(iter(found.values()))}
    else:
        missing = sorted(set(expected) - set(found))
        return {}, f"{label} lacks {', '.join(missing)} (found {', '.join(sorted(found))})."
    for name, data in chosen.items():
        problem = check_notebook(data, f"{label}: {name}" if len(expected) > 1 else label)
        if problem:
            return {}, problem
    return chosen, ""


class ZipRefused(Exception):
    """A zip the grader will not read; the message says why, for the student."""


def from_zip(path, expected):
    """A zip from a learning management system: its notebooks, read within fixed limits."""
    label, student = path.name, student_id(path.stem)
    try:
        found = read_zip(path, label)
    except ZipRefused as refusal:
        return Submission(student, str(path), error=str(refusal))
    except Exception as error:  # zipfile and zlib raise many kinds for a broken archive
        return Submission(student, str(path), error=f"{label} is not a readable zip file ({error}).")
    notebooks, error = match_notebooks(found, expected, label)
    return Submission(student, str(path), notebooks, error)


def read_zip(path, label):
    """The notebooks in a zip, name -> bytes, inflating at most MAX_UNZIPPED_BYTES in all.

    The sizes a zip declares are the sender's to forge, so the limits count the bytes
    that actually come out, a chunk at a time: a zip bomb costs at most the limit.
    """
    if path.stat().st_size > MAX_ZIP_BYTES:
        raise ZipRefused(f"{label} is larger than {MAX_ZIP_BYTES // 2**20} MiB.")
    found, budget = {}, MAX_UNZIPPED_BYTES
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        if len(members) > MAX_ZIP_MEMBERS:
            raise ZipRefused(f"{label} holds more than {MAX_ZIP_MEMBERS} files; nothing was read.")
        for info in members:
            member = PurePosixPath(info.filename.replace("\\", "/"))
            if member.is_absolute() or ".." in member.parts:
                raise ZipRefused(f"{label} contains the path {info.filename!r}, which climbs out of the zip's "
                                 "folder; nothing was extracted.")
            if info.is_dir() or member.suffix != ".ipynb" or {"__MACOSX", ".ipynb_checkpoints"} & set(member.parts):
                continue
            check_member(info, f"{label}: {member.name}")
            data = read_member(archive, info, min(MAX_NOTEBOOK_BYTES, budget))
            if data is None and budget < MAX_NOTEBOOK_BYTES:
                raise ZipRefused(f"{label} unzips to more than {MAX_UNZIPPED_BYTES // 2**20} MiB of notebooks; "
                                 "nothing was graded.")
            if data is None:
                raise ZipRefused(f"{label}: {member.name} unzips to more than {MAX_NOTEBOOK_BYTES // 2**20} MiB.")
            budget -= len(data)
            found[member.name] = data
    return found


def check_member(info, label):
    """Refuse a member that cannot be read within bounds: encrypted, or not deflate or stored.

    zipfile inflates bzip2 and lzma members without an output bound in one read, where
    a few KiB can become GiB; every common zip tool writes deflate.
    """
    if info.flag_bits & 0x1:
        raise ZipRefused(f"{label} is encrypted; zip it again without a password.")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ZipRefused(f"{label} is compressed with method {info.compress_type}, which the grader does not "
                         "read; zip it again with the usual (deflate) compression.")


def read_member(archive, info, limit):
    """The member's bytes, read a chunk at a time; None as soon as more than `limit` come out."""
    data = bytearray()
    with archive.open(info) as handle:
        while chunk := handle.read(CHUNK_BYTES):
            data += chunk
            if len(data) > limit:
                return None
    return bytes(data)


def from_folder(folder, assignment, expected):
    """STUDENT/ or STUDENT/ASSIGNMENT/: one student's nbgrader folder."""
    if folder.name == assignment:
        student, notebook_folder = folder.parent.name, folder
    else:
        student, notebook_folder = folder.name, folder / assignment
    found = {p.name: p.read_bytes() for p in sorted(notebook_folder.glob("*.ipynb")) if p.is_file()}
    notebooks, error = match_notebooks(found, expected, f"{student}/{assignment}")
    submission = Submission(student_id(student), str(folder), notebooks, error)
    stamp = notebook_folder / "timestamp.txt"
    if (stamp.exists() or stamp.is_symlink()) and not error:
        try:
            submission.timestamp = submission_time(read_timestamp(stamp))
        except TimeRefused as refusal:
            # Graded as on time, it would dodge a late penalty: the instructor decides.
            submission.error = (f"{student}/{assignment}/timestamp.txt, the time of submission, cannot be read "
                                f"({refusal}); correct it or remove it, then grade again.")
            submission.notebooks = {}
    return submission


def read_timestamp(path):
    """The text of a timestamp.txt: a plain file (no link, no device), its first KiB."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise TimeRefused(f"it cannot be opened: {error.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TimeRefused("it is not a plain file")
        return handle.read(MAX_TIMESTAMP_BYTES).decode("utf-8", "replace")


def refusal(source, message):
    """An input that is no student's submission: reported, never recorded."""
    return Submission("", str(source), error=message, refused=True)


def holds_one_student(folder, expected):
    """Whether a folder named like the assignment is one student's ASSIGNMENT/ folder
    (nbgrader's layout) rather than a folder of the class's notebooks: it holds the
    assignment's notebooks, a timestamp.txt, or a single notebook."""
    names = {p.name for p in folder.glob("*.ipynb")}
    return set(expected) <= names or (folder / "timestamp.txt").exists() or len(names) <= 1


def from_file(given, expected):
    """One notebook or zip given as itself; the student is the file name."""
    if given.suffix == ".zip":
        return from_zip(given, expected)
    data = given.read_bytes()
    notebooks, error = match_notebooks({given.name: data}, expected, given.name)
    return Submission(student_id(given.stem), str(given), notebooks, error)


def from_class_folder(given, assignment, expected):
    """A folder of submissions: notebooks and zips (one per student, named by the file)
    and nbgrader student folders STUDENT/ASSIGNMENT/."""
    found = []
    for entry in sorted(given.iterdir()):
        if entry.name.startswith(".") or entry.name == "__MACOSX":
            continue
        if entry.is_dir():
            if (entry / assignment).is_dir():
                found.append(from_folder(entry, assignment, expected))
            elif any(entry.glob("*.ipynb")):  # not nbgrader's layout: whose, and which, is a guess
                found.append(refusal(entry, f"{entry} holds notebooks but no {assignment}/ folder: not graded, "
                                            f"nothing recorded; give the student's notebook as STUDENT.ipynb."))
        elif entry.is_file() and entry.suffix in (".ipynb", ".zip"):
            found.append(from_file(entry, expected))
        else:  # a link to a folder, a pipe: refused like a stray file
            found.append(refusal(entry, f"{entry} is neither a notebook (.ipynb) nor a zip: not graded, "
                                        "nothing recorded."))
    if not any(not s.refused for s in found):
        found.append(refusal(given, f"{given} holds no notebook (STUDENT.ipynb), zip (STUDENT.zip) or "
                                    f"STUDENT/{assignment}/ folder: nothing to grade, nothing recorded."))
    return found


def collect(paths, assignment, expected):
    """All submissions named by `paths`, in order; unreadable ones carry an error, and
    inputs that are no student's submission, or any two that resolve to one student id,
    are refused."""
    submissions = []
    for given in map(Path, paths):
        if given.is_dir():
            if (given.name == assignment and holds_one_student(given, expected)) or (given / assignment).is_dir():
                submissions.append(from_folder(given, assignment, expected))
            else:
                submissions += from_class_folder(given, assignment, expected)
        elif given.is_file() and given.suffix in (".ipynb", ".zip"):
            submissions.append(from_file(given, expected))
        elif given.exists():
            submissions.append(refusal(given, f"{given} is neither a notebook (.ipynb) nor a zip: not graded, "
                                              "nothing recorded."))
        else:
            submissions.append(refusal(given, f"{given} does not exist: nothing recorded."))
    refuse_collisions(submissions)
    return submissions


def refuse_collisions(submissions):
    """Make every submission that shares its student id with another an error.

    Neither is graded nor recorded (they are marked `duplicate` and `refused`): which
    one is the student's is the instructor's call, and any grade recorded earlier stays
    as it was.
    """
    by_student = defaultdict(list)
    for submission in submissions:
        if not submission.refused:
            by_student[submission.student].append(submission)
    for student, sharing in by_student.items():
        if len(sharing) < 2:
            continue
        sources = ", ".join(s.source for s in sharing)
        for submission in sharing:
            submission.error = (f"{len(sharing)} submissions resolve to student {student!r} ({sources}); none "
                                "was graded or recorded: give the grader only one of them.")
            submission.notebooks = {}
            submission.duplicate = submission.refused = True
