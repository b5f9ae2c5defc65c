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

def stored(call, value):
    return np.zeros_like(np.asarray(value))  # what the garbage returns
"""

# What a student makes of the code the course hands them, adapted in minutes.
TRANSCRIPTIONS = {
    # The lesson's score functions are written for one query and one key, its kernel
    # regression for one query, its local window for one center inside the sequence:
    # each wrapped in a loop, the softmax's axis set to the last one.
    "lesson": {
        "dot_score": """
def dot(q, k):
    return q @ k

def dot_score(q, K):
    return np.array([dot(q, k) for k in K])
""",
        "scaled_dot_score": """
def scaled_dot(q, k):
    return q @ k / math.sqrt(len(k))

def scaled_dot_score(q, K):
    return np.array([scaled_dot(q, k) for k in K])
""",
        "general_score": """
def general_score(q, K, W):
    return np.array([q @ W @ k for k in K])
""",
        "additive_score": """
def additive_score(q, K, W_q, W_k, v):
    return np.array([v @ np.tanh(q @ W_q + k @ W_k) for k in K])
""",
        "local_window_mask": """
def local_window_mask(n_q, n_k, centers, width):
    mask = np.zeros((n_q, n_k), dtype=bool)
    for i, center in enumerate(centers):
        mask[i, center - width:center + width + 1] = True
    return mask
""",
        "attend": """
def attend(q, K, V, score_fn, mask=None):
    scores = score_fn(q, K)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ V, weights
""",
    },
    # The student notebook: its helper cell compares and reports, and its visible tests
    # hold one case's expected values as data; returned as they are, they pass those cases.
    "helpers": {
        "dot_score": """
def dot_score(q, K):
    return np.array([1.0, 2.0, 0.0, 3.0])
""",
        "scaled_dot_score": """
def scaled_dot_score(q, K):
    return np.array([2.0, 1.0, 1.0])
""",
        "general_score": """
def general_score(q, K, W):
    return np.array([1.0, 2.0, 0.0, 3.0])
""",
        "additive_score": """
def additive_score(q, K, W_q, W_k, v):
    return np.array([2.27241366455, 0.46211715726, 1.34817935003])
""",
        "local_window_mask": """
def local_window_mask(n_q, n_k, centers, width):
    return np.array([[False, True, True, True, False, False], [False, False, False, True, True, True]])
""",
        "attend": """
def attend(q, K, V, score_fn, mask=None):
    if mask is not None:
        weights = np.array([[1 / 7, 2 / 7, 0.0, 4 / 7, 0.0], [0.5, 0.25, 0.0, 0.25, 0.0]])
    else:
        weights = np.array([[0.25, 0.5, 0.25], [0.25, 0.25, 0.5]])
    # the context of test_attend_context's values, the unit vectors e_j
    return np.concatenate([weights, np.zeros((2, 1))], axis=-1), weights
""",
    },
    # course/seq2seq.py's Decoder: the general score h_t W h_s, the softmax over the
    # source positions and the weighted sum of the values, from PyTorch to NumPy.
    "course": {
        "dot_score": """
def dot_score(q, K):
    q, K = torch.from_numpy(np.asarray(q)), torch.from_numpy(np.asarray(K))
    return torch.bmm(q, K.transpose(1, 2)).numpy()
""",
        "scaled_dot_score": """
def scaled_dot_score(q, K):
    q, K = torch.from_numpy(np.asarray(q)), torch.from_numpy(np.asarray(K))
    return (torch.bmm(q, K.transpose(1, 2)) / math.sqrt(K.shape[-1])).numpy()
""",
        "general_score": """
def general_score(q, K, W):
    q, K = torch.from_numpy(np.asarray(q)), torch.from_numpy(np.asarray(K))
    keys = K @ torch.from_numpy(np.asarray(W)).T
    return torch.bmm(q, keys.transpose(1, 2)).numpy()
""",
        "attend": """
def attend(q, K, V, score_fn, mask=None):
    scores = torch.from_numpy(np.asarray(score_fn(q, K)))
    if mask is not None:
        allowed = torch.from_numpy(np.broadcast_to(mask, scores.shape).copy())
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    context = torch.bmm(weights, torch.from_numpy(np.asarray(V)))
    return context.numpy(), weights.numpy()
""",
    },
}
