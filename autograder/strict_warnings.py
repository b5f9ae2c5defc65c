"""Deprecated behaviour fails the course's test suite (a pytest plugin).

A call that PyTorch, NumPy or Python deprecate works today and breaks on a later
release; a test that relies on one breaks with it, and under plain `nbgrader autograde`
(which fails a cell that writes to stderr) the warning alone costs points. So the test
suite turns deprecation warnings into errors when they come from the course's own code:

* in the pytest process, from the modules of `course`, `autograder`, `benchmarks` and
  the test modules (`test_*`, `conftest`, `attacks`);
* in the kernels that nbval starts to execute the lessons and the reference solutions
  (every cell, hidden tests included), from the notebook's own cells (`__main__`) and
  from `course`.

A deprecation warning is a `DeprecationWarning`, `PendingDeprecationWarning` or
`FutureWarning`, or a `UserWarning` whose message announces a deprecation, which is how
PyTorch's C++ core warns (`x.T` on a 1-D tensor, say). Warnings raised by libraries on
their own account (a library calling its own deprecated code) stay warnings: the
filters match the module that made the call, which for a warning raised on the caller's
behalf is the caller.

Students are never concerned: the grader runs submissions in its own kernels, where
warnings never cost points. The plugin is enabled by `-p autograder.strict_warnings` in
the pytest options of `pyproject.toml`; `book/for_instructors.md` says how to comply.
"""

import warnings

import pytest

CATEGORIES = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
# The message of a UserWarning that announces a deprecation (case-insensitive). No colon:
# pytest's filter syntax splits on it.
DEPRECATION_MESSAGE = (r"(?s).*(deprecat|will be removed|will throw an error|will raise an error"
                       r"|no longer be supported|is no longer supported)")
# Modules of the pytest process whose warnings are the course's own.
COURSE_MODULES = r"(course|autograder|benchmarks|test_\w+|conftest|attacks)(\.|$)"
# Modules of a notebook's kernel whose warnings are the course's own: the cells, `course`.
NOTEBOOK_MODULES = r"(__main__|course)(\.|$)"


def filters(modules):
    """(action, message, category, module) of each filter, for `modules` (a regex)."""
    rules = [("error", "", category, modules) for category in CATEGORIES]
    rules.append(("error", DEPRECATION_MESSAGE, UserWarning, modules))
    return rules


def install(modules=NOTEBOOK_MODULES):
    """Turn the course's deprecation warnings into errors in this process."""
    for action, message, category, module in filters(modules):
        warnings.filterwarnings(action, message=message, category=category, module=module)


# Sent to each nbval kernel before the notebook's first cell: it leaves no name behind.
KERNEL_SETUP = f"""\
import warnings as _strict_warnings
for _category in ({", ".join(c.__name__ for c in CATEGORIES)}):
    _strict_warnings.filterwarnings("error", category=_category, module={NOTEBOOK_MODULES!r})
_strict_warnings.filterwarnings("error", message={DEPRECATION_MESSAGE!r}, category=UserWarning,
                                module={NOTEBOOK_MODULES!r})
del _strict_warnings, _category
"""


def pytest_configure(config):
    for action, message, category, module in filters(COURSE_MODULES):
        config.addinivalue_line("filterwarnings", f"{action}:{message}:{category.__name__}:{module}")


@pytest.hookimpl(trylast=True)
def pytest_runtest_setup(item):
    """Before the first cell of a notebook that nbval runs, install the filters in its kernel."""
    notebook = item.parent
    kernel = getattr(notebook, "kernel", None)
    if kernel is None or getattr(notebook, "strict_warnings", False) or \
            not hasattr(kernel, "execute_cell_input"):
        return
    notebook.strict_warnings = True
    msg_id = kernel.execute_cell_input(KERNEL_SETUP, allow_stdin=False)
    kernel.await_reply(msg_id, timeout=60)
    kernel.await_idle(msg_id, timeout=60)
