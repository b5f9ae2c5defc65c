"""The test helpers every chapter's `test_helpers` cell defines, redefined by a student
cell to let anything pass: the common start of each attack file's HELPERS cell."""

FORGED_CHECKS = """
# Every checking helper of the test_helpers cell, redefined to let anything pass.
def as_numpy(value):
    return np.zeros(1)

def expect_shape(*args, **kwargs):
    return None

def expect_close(*args, **kwargs):
    return None

def first_match(*args, **kwargs):
    return ""

def runs_beside_your_code(helper):
    helper.runs_beside_your_code = True
    return helper

def watch_inputs(function, *args, **kwargs):
    return function(*args, **kwargs), []
"""
