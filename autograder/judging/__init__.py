"""What decides: the notebook assembled from trusted parts, executed cell by cell, each test run in the grader against the student's functions, and the known mistakes diagnosed."""
