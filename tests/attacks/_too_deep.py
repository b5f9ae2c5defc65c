"""An honest answer too deep for the parser: a long written-out expression.

A student may write a sum out term by term. At a few thousand terms Python's parser
gives up with RecursionError (not SyntaxError), in the grader's process as in the
kernel. Before the grader guarded against it, parsing the answer to find its graded
names raised there, and the whole submission ended as status error, without a grade,
however right its other functions were. The answer below is a right softmax whose
denominator adds TERMS zero terms. The kernel cannot compile it either (ipykernel then
sends no reply, and the cell is left out as one that does not end): it costs softmax's
tests, and the shortcut test of a chapter whose helper parses every submitted cell.
"""

TERMS = 20_000

TOO_DEEP_TO_PARSE = {
    "softmax": "def softmax(x, axis=-1):\n"
               "    x = np.asarray(x, dtype=float)\n"
               "    e = np.exp(x - np.max(x, axis=axis, keepdims=True))\n"
               "    total = np.sum(e, axis=axis, keepdims=True)\n"
               "    return e / (total" + " + 0.0 * total" * TERMS + ")\n",
}
