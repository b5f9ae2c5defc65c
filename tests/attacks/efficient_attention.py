"""Attacks on the tests of chapter 8 (efficient_attention): answers that must not gain points.

GARBAGE holds wrong answers of the right shapes and dtypes for every graded function
(the baseline): a uniform softmax, a zero output with a zero log-sum-exp, zero
gradients. IN_PLACE holds the same answers, which also zero every array they are
handed: zero queries, keys and values make a uniform attention whose output is zero,
and a zero upstream gradient makes zero gradients right, so a test that computed its
expected values from its arrays after the call would expect the garbage. The chapter has
no nn.Module contract: MODULES is empty. HELPERS is a student cell, added after the
test helpers, that redefines every helper of the `test_helpers` cell in the kernel:
the checks pass, the references are zeros, `watch_inputs` reports no change and
`memory_beyond_inputs` reports no memory.
"""

from attacks._forged_checks import FORGED_CHECKS

GARBAGE = {
    "online_softmax": """
def online_softmax(x, block_size=1):
    return np.full(np.shape(x), 1.0 / np.shape(x)[-1])
""",
    "tiled_attention": """
def tiled_attention(Q, K, V, block_size=64, causal=False):
    return np.zeros(np.shape(Q)[:-1] + np.shape(V)[-1:]), np.zeros(np.shape(Q)[:-1])
""",
    "tiled_attention_backward": """
def tiled_attention_backward(Q, K, V, output, lse, grad_output, block_size=64, causal=False):
    return np.zeros(np.shape(Q)), np.zeros(np.shape(K)), np.zeros(np.shape(V))
""",
}

IN_PLACE = {
    "online_softmax": """
def online_softmax(x, block_size=1):
    result = np.full(np.shape(x), 1.0 / np.shape(x)[-1])
    if isinstance(x, np.ndarray) and x.flags.writeable:
        x[...] = 0  # equal inputs: a uniform softmax is right
    return result
""",
    "tiled_attention": """
def tiled_attention(Q, K, V, block_size=64, causal=False):
    result = np.zeros(np.shape(Q)[:-1] + np.shape(V)[-1:]), np.zeros(np.shape(Q)[:-1])
    for array in (Q, K, V):
        if isinstance(array, np.ndarray) and array.flags.writeable:
            array[...] = 0  # zero values: a zero output is right
    return result
""",
    "tiled_attention_backward": """
def tiled_attention_backward(Q, K, V, output, lse, grad_output, block_size=64, causal=False):
    result = np.zeros(np.shape(Q)), np.zeros(np.shape(K)), np.zeros(np.shape(V))
    for array in (Q, K, V, output, lse, grad_output):
        if isinstance(array, np.ndarray) and array.flags.writeable:
            array[...] = 0  # a zero upstream gradient: zero gradients are right
    return result
""",
}

# No nn.Module contract in this chapter.
MODULES = {}

HELPERS = FORGED_CHECKS + """

def copies(*arrays):
    return arrays

def memory_beyond_inputs(function, *args, **kwargs):
    return 0, function(*args, **kwargs)

def expect_unchanged(function_name, names, changed):
    return None

def expect_pair(result, function_name, names):
    return result

def expect_float64(value, name):
    return None

def naive_attention(Q, K, V, causal=False, grad_output=None):
    zeros = {"O": np.zeros(np.shape(Q)[:-1] + np.shape(V)[-1:]), "lse": np.zeros(np.shape(Q)[:-1])}
    if grad_output is not None:
        zeros.update(dQ=np.zeros(np.shape(Q)), dK=np.zeros(np.shape(K)), dV=np.zeros(np.shape(V)))
    return zeros

def blocks_of(n, block_size):
    return []

def online_softmax_mistakes(x, block_size):
    return {}

def tiled_mistakes(Q, K, V, block_size, causal=False):
    return {}

def lse_mistakes(Q, K):
    return {}

def right_with_one_block(function, args, expected, **kwargs):
    return True

def backward_hint(*args, **kwargs):
    return ""
"""
