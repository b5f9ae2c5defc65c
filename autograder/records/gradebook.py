"""The class gradebook: a real nbgrader gradebook with every graded student's scores.

Each submission is graded in a throw-away course directory with a SQLite gradebook of
its own (so that parallel jobs share nothing). When a submission is graded, the parent
process copies that student's submission, every grade and comment, into the class
gradebook in one transaction that also removes the student's earlier submission: the
class gradebook holds either the old grade or the new one, never half of one.

The class gradebook is SQLite by default (OUT/gradebook.db) or any database nbgrader
supports, given as a URL (`--db postgresql://user@host/db`). nbgrader's own tools
(`nbgrader export`, formgrader) read it like any other.
"""

import functools
import warnings

import nbgrader.api
from nbgrader.api import (Assignment, Comment, Grade, Gradebook, MissingEntry, Student, SubmittedAssignment,
                          SubmittedNotebook)
from sqlalchemy.exc import SAWarning

from autograder.records.lateness import as_utc, naive_utc

COURSE_ID = "attention-course"


@functools.lru_cache(maxsize=None)
def _alembic_head():
    """nbgrader's schema version, as `alembic heads` (which nbgrader runs in a new
    process each time it creates a gradebook) prints it: computed once, in-process."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import _temp_alembic_ini

    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as alembic_ini:
        return ScriptDirectory.from_config(Config(alembic_ini)).get_current_head()


nbgrader.api.get_alembic_version = _alembic_head


class ClassGradebook:
    def __init__(self, url, assignment, template_url, due=None):
        """`due`: the assignment's due date (aware); None keeps the one the gradebook has."""
        self.url = url
        self.assignment = assignment
        self.gradebook = Gradebook(url, course_id=COURSE_ID)
        self._copy_structure(template_url)
        if due is not None:
            self.gradebook.update_or_create_assignment(self.assignment, duedate=naive_utc(due))

    @property
    def due(self):
        """The assignment's due date (aware UTC), or None."""
        try:
            return as_utc(self.gradebook.find_assignment(self.assignment).duedate)
        finally:
            self.gradebook.db.commit()  # end the read transaction

    def extensions(self):
        """Each student's extension of the due date: student -> timedelta."""
        try:
            return {s.student.id: s.extension for s in self.gradebook.find_assignment(self.assignment).submissions
                    if s.extension}
        finally:
            self.gradebook.db.commit()

    def close(self):
        self.gradebook.close()

    def _copy_structure(self, template_url):
        """Make the assignment, its notebooks and cells exist as in the template gradebook."""
        gb = self.gradebook
        with Gradebook(template_url, course_id=COURSE_ID) as template:
            source = template.find_assignment(self.assignment)
            gb.update_or_create_assignment(self.assignment)  # its due date, if it has one, stays
            for notebook in source.notebooks:
                gb.update_or_create_notebook(notebook.name, self.assignment)
                for cell in notebook.grade_cells:
                    gb.update_or_create_grade_cell(cell.name, notebook.name, self.assignment,
                                                   max_score=cell.max_score, cell_type=cell.cell_type)
                for cell in notebook.solution_cells:
                    gb.update_or_create_solution_cell(cell.name, notebook.name, self.assignment)
                for cell in notebook.task_cells:
                    gb.update_or_create_task_cell(cell.name, notebook.name, self.assignment,
                                                  max_score=cell.max_score, cell_type=cell.cell_type)
                for cell in notebook.source_cells:
                    gb.update_or_create_source_cell(cell.name, notebook.name, self.assignment,
                                                    cell_type=cell.cell_type, locked=cell.locked,
                                                    source=cell.source, checksum=cell.checksum)

    def record_ungraded(self, student, message, timestamp=None):
        """Replace the student's submission with one that could not be graded (refused for
        its size, unreadable, none of the assignment's answers, or a grading that failed):
        every test at 0 points, `message` the automatic comment of every answer cell, so
        that nbgrader's export and formgrader show the student, the 0 and why. The
        extension stays; `timestamp` (aware) is the time of submission, if known."""
        session = self.gradebook.db
        try:
            with session.no_autoflush:
                assignment = session.query(Assignment).filter(Assignment.name == self.assignment).one()
                grades, comments = {}, {}
                for notebook in assignment.notebooks:
                    for cell in list(notebook.grade_cells) + list(notebook.task_cells):
                        grades[(notebook.name, cell.name)] = (0.0, None, None, False)
                    for cell in list(notebook.solution_cells) + list(notebook.task_cells):
                        comments[(notebook.name, cell.name)] = (f"Not graded: {message}", None)
                self._replace(session, student, grades, comments, {}, naive_utc(timestamp))
            session.commit()
        except Exception:
            session.rollback()
            raise

    def recorded_score(self, student):
        """The student's total less any late penalty in the class gradebook, or None if not graded there."""
        try:
            submission = self.gradebook.find_submission(self.assignment, student)
            return float(submission.score) - float(submission.late_submission_penalty or 0)
        except MissingEntry:
            return None
        finally:
            self.gradebook.db.commit()  # end the read transaction

    def merge(self, student, job_url):
        """Replace the student's submission with the one graded in the job's gradebook
        (grades, comments, time of submission, late penalties); the extension stays."""
        grades, comments, penalties = {}, {}, {}
        with Gradebook(job_url, course_id=COURSE_ID) as job:
            submitted = job.find_submission(self.assignment, student)
            timestamp = submitted.timestamp
            for notebook in submitted.notebooks:
                penalties[notebook.name] = notebook.late_submission_penalty
                for grade in notebook.grades:
                    grades[(notebook.name, grade.name)] = (grade.auto_score, grade.manual_score,
                                                           grade.extra_credit, grade.needs_manual_grade)
                for comment in notebook.comments:
                    comments[(notebook.name, comment.name)] = (comment.auto_comment, comment.manual_comment)
        session = self.gradebook.db
        try:
            with session.no_autoflush:
                self._replace(session, student, grades, comments, penalties, timestamp)
            session.commit()
        except Exception:
            session.rollback()
            raise

    def _replace(self, session, student, grades, comments, penalties, timestamp):
        assignment = session.query(Assignment).filter(Assignment.name == self.assignment).one()
        person = session.get(Student, student)
        if person is None:
            person = Student(id=student)
            session.add(person)
        earlier = session.query(SubmittedAssignment).filter(
            SubmittedAssignment.assignment == assignment, SubmittedAssignment.student == person).one_or_none()
        extension = earlier.extension if earlier is not None else None
        if earlier is not None:
            for notebook in earlier.notebooks:
                for row in list(notebook.grades) + list(notebook.comments):
                    session.delete(row)
                session.delete(notebook)
            session.delete(earlier)
            session.flush()
        submission = SubmittedAssignment(assignment=assignment, student=person, extension=extension,
                                         timestamp=timestamp)  # None where no time was recorded
        session.add(submission)
        for notebook in assignment.notebooks:
            copy = SubmittedNotebook(notebook=notebook, assignment=submission,
                                     late_submission_penalty=penalties.get(notebook.name))
            session.add(copy)
            for cell in list(notebook.grade_cells) + list(notebook.task_cells):
                auto, manual, extra, needs = grades.get((notebook.name, cell.name), (None, None, None, True))
                session.add(Grade(cell_id=cell.id, notebook=copy, auto_score=auto, manual_score=manual,
                                  extra_credit=extra, needs_manual_grade=needs))
            for cell in list(notebook.solution_cells) + list(notebook.task_cells):
                auto, manual = comments.get((notebook.name, cell.name), (None, None))
                session.add(Comment(cell_id=cell.id, notebook=copy, auto_comment=auto, manual_comment=manual))

    def grant_extension(self, student, length):
        """Move `student`'s due date by `length` (a timedelta; zero removes it), as nbgrader
        keeps it: on the student's submission, made empty if there is none yet."""
        session = self.gradebook.db
        try:
            self.gradebook.update_or_create_student(student)
            try:
                submission = self.gradebook.find_submission(self.assignment, student)
            except MissingEntry:
                with warnings.catch_warnings():  # nbgrader's own session use, harmless
                    warnings.simplefilter("ignore", SAWarning)
                    submission = self.gradebook.add_submission(self.assignment, student)
            submission.extension = length or None
            session.commit()
        except Exception:
            session.rollback()
            raise


def forget_submission(url, assignment, student):
    """Remove `student`'s submission of `assignment` (notebooks, grades, comments and the
    extension kept on it) from the gradebook at `url`, and the student when they have no
    other submission there: one transaction, touching no other student's rows. Returns
    what was removed, in words ([] if the gradebook had neither)."""
    removed = []
    with Gradebook(url, course_id=COURSE_ID) as gradebook:
        session = gradebook.db
        try:
            person = session.get(Student, student)
            if person is None:
                return removed
            for submission in list(person.submissions):
                if submission.assignment.name != assignment:
                    continue
                score = float(submission.score)
                for notebook in submission.notebooks:
                    for row in list(notebook.grades) + list(notebook.comments):
                        session.delete(row)
                    session.delete(notebook)
                session.delete(submission)
                removed.append(f"{student}'s submission of {assignment} (score {score:g})")
            session.flush()
            session.expire(person)
            if not person.submissions:
                session.delete(person)
                removed.append(f"the student {student}")
            session.commit()
        except Exception:
            session.rollback()
            raise
    return removed
