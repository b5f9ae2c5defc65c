"""What faces people: the student's feedback page and its summary, the student's own check (validate), and the instructor's class report."""
