"""Attacks on the tests of chapter 1 (soft_lookup): answers that must not gain points.

GARBAGE holds wrong answers of the right shapes and dtypes for every graded function (the
baseline). IN_PLACE holds the same answers, which also change every array they are
handed in place, in the way that would make a careless test pass: a test that computes
its expected values from its arrays after the call would expect what the garbage
returns (zero inputs give zero scores, and the uniform weights and zero context of the
garbage `attend`; centers moved far away give an empty window).
HELPERS is a student cell that redefines every helper of
the `test_helpers` cell in the kernel to say what would help the garbage most.
"""

from attacks._forged_checks import FORGED_CHECKS

GARBAGE = {
    "dot_score": """
def dot_score(q, K):
    q, K = np.asarray(q), np.asarray(K)
    return np.zeros(np.broadcast_shapes(q.shape[:-1], K.shape[:-2]) + K.shape[-2:-1])
""",
    "scaled_dot_score": """
def scaled_dot_score(q, K):
    q, K = np.asarray(q), np.asarray(K)
    return np.zeros(np.broadcast_shapes(q.shape[:-1], K.shape[:-2]) + K.shape[-2:-1])
""",
    "general_score": """
def general_score(q, K, W):
    q, K = np.asarray(q), np.asarray(K)
    return np.zeros(np.broadcast_shapes(q.shape[:-1], K.shape[:-2]) + K.shape[-2:-1])
""",
    "additive_score": """
def additive_score(q, K, W_q, W_k, v):
    q, K = np.asarray(q), np.asarray(K)
    return np.zeros(np.broadcast_shapes(q.shape[:-1], K.shape[:-2]) + K.shape[-2:-1])
""",
    "local_window_mask": """
def local_window_mask(n_q, n_k, centers, width):
    return np.zeros((n_q, n_k), dtype=bool)
""",
    "attend": """
def attend(q, K, V, score_fn, mask=None):
    # No scores at all: uniform weights over the allowed keys, and a zero context.
    q, K, V = np.asarray(q), np.asarray(K), np.asarray(V)
    batch = np.broadcast_shapes(q.shape[:-1], K.shape[:-2])
    allowed = np.ones(batch + K.shape[-2:-1]) if mask is None else np.broadcast_to(mask, batch + K.shape[-2:-1])
    weights = allowed / np.maximum(allowed.sum(axis=-1, keepdims=True), 1)
    return np.zeros(batch + V.shape[-1:]), weights
""",
}

IN_PLACE = {
    "dot_score": """
def dot_score(q, K):
    shape = np.broadcast_shapes(np.shape(q)[:-1], np.shape(K)[:-2]) + np.shape(K)[-2:-1]
    for array in (q, K):
        if isinstance(array, np.ndarray):
            array[...] = 0  # q . k_j of zero arrays is the zero this returns
    return np.zeros(shape)
""",
    "scaled_dot_score": """
def scaled_dot_score(q, K):
    shape = np.broadcast_shapes(np.shape(q)[:-1], np.shape(K)[:-2]) + np.shape(K)[-2:-1]
    for array in (q, K):
        if isinstance(array, np.ndarray):
            array[...] = 0
    return np.zeros(shape)
""",
    "general_score": """
def general_score(q, K, W):
    shape = np.broadcast_shapes(np.shape(q)[:-1], np.shape(K)[:-2]) + np.shape(K)[-2:-1]
    for array in (q, K, W):
        if isinstance(array, np.ndarray):
            array[...] = 0
    return np.zeros(shape)
""",
    "additive_score": """
def additive_score(q, K, W_q, W_k, v):
    shape = np.broadcast_shapes(np.shape(q)[:-1], np.shape(K)[:-2]) + np.shape(K)[-2:-1]
    for array in (q, K, W_q, W_k, v):
        if isinstance(array, np.ndarray):
            array[...] = 0  # v = 0 makes every score zero
    return np.zeros(shape)
""",
    "local_window_mask": """
def local_window_mask(n_q, n_k, centers, width):
    if isinstance(centers, np.ndarray):
        centers[...] = n_k + abs(int(width)) + 10  # every key outside every window: an all-False mask
    return np.zeros((n_q, n_k), dtype=bool)
""",
    "attend": """
def attend(q, K, V, score_fn, mask=None):
    batch = np.broadcast_shapes(np.shape(q)[:-1], np.shape(K)[:-2])
    allowed = np.ones(batch + np.shape(K)[-2:-1]) if mask is None else np.broadcast_to(mask, batch + np.shape(K)[-2:-1])
    weights = allowed / np.maximum(allowed.sum(axis=-1, keepdims=True), 1)
    for array in (q, K, V):
        if isinstance(array, np.ndarray):
            array[...] = 0  # zero scores give these uniform weights, and zero values a zero context
    return np.zeros(batch + np.shape(V)[-1:]), weights
""",
}

# No graded class in this chapter.
MODULES = {}

HELPERS = FORGED_CHECKS + """

def expect_float64(value, name):
    return None

def call(function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except Exception:
        return None

def call_watching(function, *args, **kwargs):
    return call(function, *args, **kwargs), []

def named(changed, names):
    return ""

def torch_scores(q, K, W=None):
    return np.zeros(np.broadcast_shapes(np.shape(q)[:-1], np.shape(K)[:-2]) + np.shape(K)[-2:-1])
"""
