"""Late submissions: the due date, the time a submission was made, and the penalty.

The rule is the one most course syllabi state: a late submission loses a percentage of
the points it earned for each day, or part of a day, past its due date (a student's
extension moves their due date), and never more than those points:

    penalty = min(score, score * percent_per_day / 100 * ceil(seconds_late / 86400))

100 % per day gives zero for any late submission (nbgrader's own "zero" method); 0 %
reports the lateness and takes nothing off.

The time of a submission is the one nbgrader's exchange records (`timestamp.txt`, which
`nbgrader submit` writes and autograder/records/collect.py keeps); a notebook or a zip carries
none, so its lateness is the learning management system's to judge. Due dates and
timestamps are compared in UTC; the gradebook stores them as nbgrader does (naive UTC).

`PercentPerDay` is the rule as an nbgrader late-submission plugin: nbgrader's
AssignLatePenalties applies it during autograding, so that the gradebook, `nbgrader
export`, the formgrader and the feedback page all show the same penalty.
"""

import math
import re
from datetime import datetime, timedelta, timezone

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float

UTC = timezone.utc
DAY = 86400.0
UNITS = {"m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class TimeRefused(ValueError):
    """A due date, timestamp or extension that the grader will not guess at."""


def due_date(text):
    """The due date an instructor gives (ISO 8601 with its time zone), in UTC.

    A time without a zone is refused: read as UTC or as the grading machine's local
    time, it would be hours off for someone, with nobody told.
    """
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise TimeRefused(f"{text!r} is not a date and time; write it as 2026-12-01T17:00+01:00 "
                          "(ISO 8601, with the time zone)") from None
    if moment.tzinfo is None:
        raise TimeRefused(f"{text!r} has no time zone; add one, e.g. {text.strip()}+01:00, or {text.strip()}Z "
                          "for UTC")
    return moment.astimezone(timezone.utc)


def submission_time(text):
    """The time in an nbgrader timestamp.txt, in UTC.

    nbgrader writes "2026-11-24 14:02:11.512345 UTC" (its Exchange.timestamp_format, in
    its Exchange.timezone); ISO 8601 and a numeric offset ("... +0200") are read too. A
    time without a zone is UTC, as nbgrader reads it. (nbgrader's own parse_utc takes a
    numeric offset for seconds, so it is not used here.)
    """
    text = text.strip()
    if not text or len(text) > 100:
        raise TimeRefused("it is empty" if not text else "it is not a timestamp")
    stamp, _, zone = text.rpartition(" ")
    if not (stamp and re.fullmatch(r"[+-]\d{2}:?\d{2}|[A-Za-z][A-Za-z0-9_/+-]*", zone)):
        stamp, zone = text, ""  # no zone after a space: ISO 8601 with or without one
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        raise TimeRefused(f"{text!r} is not a time") from None
    offset = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", zone)
    if offset:
        sign = 1 if offset.group(1) == "+" else -1
        moment = moment.replace(tzinfo=timezone(sign * timedelta(hours=int(offset.group(2)),
                                                                  minutes=int(offset.group(3)))))
    elif zone:
        import dateutil.tz

        if dateutil.tz.gettz(zone) is None:
            raise TimeRefused(f"{text!r} names the time zone {zone!r}, which is not known here")
        moment = moment.replace(tzinfo=dateutil.tz.gettz(zone))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def as_utc(moment):
    """A datetime from the gradebook (naive, meaning UTC) or from here, as aware UTC."""
    if moment is None:
        return None
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def naive_utc(moment):
    """What nbgrader's gradebook stores: UTC without a zone."""
    return None if moment is None else as_utc(moment).replace(tzinfo=None)


def duration(text):
    """An extension such as 36h, 2d, 90min or 1w (0: none), as a timedelta."""
    if text.strip() == "0":
        return timedelta(0)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(min|m|h|d|w)\s*", text)
    if not match:
        raise TimeRefused(f"{text!r} is not a duration; write e.g. 90min, 36h, 2d or 1w")
    return timedelta(seconds=float(match.group(1)) * UNITS[match.group(2)])


def extension(text):
    """STUDENT=DURATION, as given on the command line: (student, timedelta)."""
    student, sep, length = text.partition("=")
    if not sep or not student.strip():
        raise TimeRefused(f"{text!r} is not STUDENT=DURATION (e.g. alice=2d)")
    return student.strip(), duration(length)


def days_started(seconds_late):
    """Days, or parts of a day, past the due date."""
    return math.ceil(seconds_late / DAY) if seconds_late > 0 else 0


def penalty(score, seconds_late, percent_per_day):
    """Points taken off `score` for a submission `seconds_late` past its due date."""
    if seconds_late <= 0 or percent_per_day <= 0 or score <= 0:
        return 0.0
    return min(float(score), float(score) * percent_per_day / 100.0 * days_started(seconds_late))


def how_late(seconds):
    """'1 day 2 h 5 min': the lateness as people say it (to the minute, rounded up)."""
    minutes = math.ceil(seconds / 60)
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    parts = ([f"{days} day" + ("s" if days != 1 else "")] if days else []) + \
            ([f"{hours} h"] if hours else []) + ([f"{minutes} min"] if minutes else [])
    return " ".join(parts) or "0 min"


def describe_rule(percent_per_day):
    if percent_per_day <= 0:
        return "no penalty is set for late submissions"
    if percent_per_day >= 100:
        return "a late submission scores zero"
    return f"{percent_per_day:g}% of the points earned per day, or part of a day, late"


def lateness_message(seconds_late, points, percent_per_day):
    """What the student and the instructor read about a late submission."""
    taken = f"{points:g} point" + ("s" if points != 1 else "") + " taken off" if points > 0 else "no points taken off"
    return f"submitted {how_late(seconds_late)} after the due date: {taken} ({describe_rule(percent_per_day)})"


def seconds_late(timestamp, due):
    """How far past `due` (aware, extension included) `timestamp` is; 0 if on time or unknown."""
    if timestamp is None or due is None:
        return 0.0
    return max(0.0, (as_utc(timestamp) - as_utc(due)).total_seconds())


def lateness_note(lateness):
    """The sentence a late submission's feedback page shows with its score, or ''.

    `lateness`: {"timestamp", "due" (ISO 8601, the student's extension included),
    "percent_per_day"}, as a grading task carries it.
    """
    if not lateness.get("timestamp") or not lateness.get("due"):
        return ""
    due = datetime.fromisoformat(lateness["due"])
    late = seconds_late(datetime.fromisoformat(lateness["timestamp"]), due)
    if late <= 0:
        return ""
    return (f"Submitted {how_late(late)} after the due date ({due:%Y-%m-%d %H:%M} UTC); "
            f"{describe_rule(lateness.get('percent_per_day', 0.0))}.")


class PercentPerDay(LateSubmissionPlugin):
    """nbgrader's late-submission plugin for the rule above (per notebook: nbgrader sums
    the notebooks' penalties into the assignment's)."""

    percent_per_day = Float(0.0, help="Percent of the points earned taken off per day, or part of "
                                      "a day, late (100: zero for any late submission)").tag(config=True)

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        points = penalty(score, total_seconds_late, self.percent_per_day)
        return points if points > 0 else None
