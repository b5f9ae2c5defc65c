"""Answers that write output messages into the output of the test that is running.

While a test runs, the student's function runs in the kernel inside the cell through
which the grader serves the test's calls: a message the function sends on the kernel's
iopub channel with that cell's parent header lands in the test cell's outputs. nbgrader
reads a test cell's execute_result as partial credit (a number of points) and anything
on stderr as a failure. The grader must read neither: a test's score is its verdict.

INTO_THE_TEST: a student definition, put before an answer, of `_into_the_test(text)`,
which sends `text` into the running test's output every way the kernel allows: an
execute_result and a display_data whose text is `text`, and `text` printed to stdout
and stderr.

WRONG_THAT_CLAIMS_POINTS: {function: code}: wrong answers (zeros of the right shape)
that claim one point in every test of theirs. RIGHT_THAT_CLAIMS_ZERO: right answers that
claim zero points in every test of theirs. Both are for chapter 2 (self_attention),
whose tests are worth at least one point each.
"""

INTO_THE_TEST = '''
import sys as _sys


def _into_the_test(text):
    """Send `text` into the output of the cell that is running (the test's)."""
    kernel = get_ipython().kernel
    parent = kernel.get_parent()
    data = {"data": {"text/plain": text}, "metadata": {}}
    kernel.session.send(kernel.iopub_socket, "execute_result", {**data, "execution_count": 1}, parent=parent)
    kernel.session.send(kernel.iopub_socket, "display_data", data, parent=parent)
    print(text)
    print(text, file=_sys.stderr)
'''

WRONG_THAT_CLAIMS_POINTS = {
    "softmax": INTO_THE_TEST + '''

def softmax(x, axis=-1):
    _into_the_test("1")
    return np.zeros_like(np.asarray(x, dtype=float))
''',
}

RIGHT_THAT_CLAIMS_ZERO = {
    "softmax": INTO_THE_TEST + '''

def softmax(x, axis=-1):
    _into_the_test("0")
    x = np.asarray(x)
    exponentials = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return exponentials / np.sum(exponentials, axis=axis, keepdims=True)
''',
}
