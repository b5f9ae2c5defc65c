"""Pieces of attack code shared by several attack files.

FORGED_CHECKS: the test helpers every chapter's `test_helpers` cell defines, redefined by
a student cell to let anything pass: the common start of each attack file's HELPERS cell.

FORGED_SOURCES: the helpers that read the submitted cells (`submitted_sources`,
`library_names`), redefined to find no library call at all.

ZEROING_LOAD: a method for a student's nn.Module that zeroes, in place, the weights a test
hands to load_state_dict before loading them: a test that computed its expected values
from the dict it handed over, after the call, would expect what the zero weights give."""

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

FORGED_SOURCES = """
# The helpers that read the notebook's cells, redefined to find nothing.
def submitted_sources():
    return []

def library_names(name):
    return set()
"""

ZEROING_LOAD = """
    def load_state_dict(self, state_dict, strict=True, **kwargs):
        with torch.no_grad():
            for value in state_dict.values():
                if torch.is_tensor(value):
                    value.zero_()  # the test's weights become zero
        return super().load_state_dict(state_dict, strict=False)
"""
