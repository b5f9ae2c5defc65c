"""What keeps records: submissions read and collected, their times and late penalties, and the class gradebook."""
