"""Attacks on the tests of chapter 8 (efficient_attention): answers that must not gain points.

GARBAGE holds wrong answers of the right shapes and dtypes for every graded function
(the baseline): a uniform softmax, a zero output with a zero log-sum-exp, zero
gradients. IN_PLACE holds the same answers, which also zero every array they are
handed: zero queries, keys and values make a uniform attention whose output is zero,
and a zero upstream gradient makes zero gradients right, so a test that computed its
expected values from its arrays after the call would expect the garbage. The chapter has
no nn.Module contract: MODULES is empty. HELPERS is a student cell, added after the
test helpers, that redefines every helper of the `test_helpers` cell in the kernel:
the checks pass, the stored values are zeros (what the garbage returns), `watch_inputs`
and `changes_in_place` report no change, `memory_beyond_inputs` reports no memory,
`reads_of` reports reads that pass (every row or column in blocks, half as many with
causal=True), `ReadCounter` records nothing, and `library_names` finds nothing; the
references and hints that the hidden tests define on the grader's side are redefined
too, as zeros or nothing.

TRANSCRIPTIONS are what a student makes in a few minutes of the code the course hands
them: this chapter's lesson, `course/efficient.py` (which the lesson imports), and the
student notebook's helper and visible-test cells. The adapting allowed is a wrapper
(NumPy to PyTorch and back, leading dimensions reshaped to what the code takes, the
contract's signature), returning what the code already computes, a flipped flag, sign
or constant, and a call of a helper; a loop over queries or batch elements that the code
does not have is added once, to the lesson's one-query loop. The code is read from the
files as they are now (`_definitions`, `_stored`), so that the attacks follow the
material: `course_tiled` and `course_naive` stand for the PyTorch passes that
`course/efficient.py` once held, and catch them if they come back.

MEMORY_ATTACKS are answers with right values that break the memory rule and attack the
grader's meter (graded in tests/test_memory_meter.py, each beside the reference; each
must lose its function's memory test and nothing else). `lazily-freed-forward` and
`lazily-freed-backward`: the catalogued full-matrix answers in a cell whose top-level
code touches memory and hands it back with MADV_FREE until the kernel starts taking it
back, so that the sandbox's cgroup sits at its limit and an allocation takes those
pages instead of raising the peak (and again after each call at the memory tests'
sizes). `float32-forward` and `float32-backward`: one and a half times the budget at
n = 2048 in float32 (the allowance for what crosses hid it when those tests used
d = 64). `float32-wide-forward` and `float32-wide-backward`: the same, returning
complex128, twice the bytes that the allowance was once sized from.
"""

import ast
from pathlib import Path

import nbformat

from attacks._forged_checks import FORGED_CHECKS, FORGED_SOURCES

REPO = Path(__file__).resolve().parents[2]

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

def stored(call, value):
    return np.zeros_like(np.asarray(value, dtype=float))  # what the garbage returns

def changes_in_place(function, function_name, names, calls):
    return None

def blocks_hint(*args, **kwargs):
    return ""

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

class ReadCounter:
    def __init__(self, data, axis):
        self._data, self.reads = np.array(data), []  # records nothing

    def __getattr__(self, name):
        return getattr(self._data, name)

    def __getitem__(self, key):
        return self._data[key]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._data, dtype=dtype)

def reads_of(function, args, counted, axis, **kwargs):
    # Reads that pass, as far as it says: every index once by blocks, twice without causal.
    block = kwargs.get("block_size", 1)
    reads = {}
    for i in counted:
        n = np.shape(args[i])[axis]
        once = [list(range(a, min(a + block, n))) for a in range(0, n, block)]
        reads[i] = once * (1 if kwargs.get("causal") else 2)
    return function(*args, **kwargs), reads

def expect_row_reads(reads, function_name, names, rows, block_size):
    return None

def expect_causal_skip(causal_reads, open_reads, function_name, names, n, block_size):
    return None

# The references and hints that the hidden tests define on the grader's side.
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

def backward_mistakes(Q, K, V, grad_output, block_size, causal=False):
    return {}

def first_match_all(found, known):
    return ""
""" + FORGED_SOURCES


def _definitions(path, names):
    """The source of the functions and classes `names` as `path` (a module or a notebook)
    defines them now; those it no longer defines are left out."""
    path = REPO / path
    if path.suffix == ".ipynb":
        sources = [cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    else:
        sources = [path.read_text()]
    found = {}
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
                found[node.name] = ast.get_source_segment(source, node)
    return "\n\n".join(found[name] for name in names if name in found) + "\n"


def _stored(call):
    """The value the student version stores for `call` (its visible test's case), as text."""
    path = REPO / "book/08_efficient_attention/assignment/efficient_attention.ipynb"
    for cell in nbformat.read(path, as_version=4).cells:
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "stored" and \
                    ast.literal_eval(node.args[0]) == call:
                return ast.get_source_segment(cell.source, node.args[1])
    return "0.0"


LESSON = "book/08_efficient_attention/lesson.ipynb"
COURSE = "course/efficient.py"
BACKWARD_CALL = "tiled_attention_backward(Q, K, V, O, lse, dO, block_size=2)"

# What a student makes of the code the course hands them, adapted in minutes.
TRANSCRIPTIONS = {
    # The helper cell's references and hint candidates, called from the answers.
    "helpers": {
        "online_softmax": """
def online_softmax(x, block_size=1):
    x = np.asarray(x, dtype=np.float64)
    known = online_softmax_mistakes(x, x.shape[-1])  # one block: no rescaling to miss
    return next(value for hint, value in known.items() if "not rescaled" in hint)
""",
        "tiled_attention": """
def tiled_attention(Q, K, V, block_size=64, causal=False):
    found = naive_attention(Q, K, V, causal=causal)
    return found["O"], found["lse"]
""",
        "tiled_attention_backward": """
def tiled_attention_backward(Q, K, V, output, lse, grad_output, block_size=64, causal=False):
    found = naive_attention(Q, K, V, causal=causal, grad_output=grad_output)
    return found["dQ"], found["dK"], found["dV"]
""",
    },
    # Near-answers of the hint helpers, with a flag set so that the mistake vanishes.
    "mistakes": {
        "tiled_attention": """
def tiled_attention(Q, K, V, block_size=64, causal=False):
    # One block of keys normalized on its own is the whole softmax; the unscaled lse of
    # Q / sqrt(d) is the lse.
    known = tiled_mistakes(Q, K, V, np.shape(K)[-2], causal)
    output = next(value for hint, value in known.items() if "normalized on its own" in hint)
    lse = next(value for hint, value in lse_mistakes(np.asarray(Q) / math.sqrt(np.shape(Q)[-1]), K).items()
               if "unscaled" in hint)
    return output, lse
""",
    },
    # The visible tests' stored values, returned for their cases.
    "visible_tests": {
        "online_softmax": f"""
def online_softmax(x, block_size=1):
    if np.shape(x) == (1, 5):
        return np.array({_stored("online_softmax(x, block_size=2)")})
    return np.full(np.shape(x), 1.0 / np.shape(x)[-1])
""",
        "tiled_attention": f"""
def tiled_attention(Q, K, V, block_size=64, causal=False):
    if (np.shape(Q), np.shape(K), np.shape(V)) == ((4, 3), (5, 3), (5, 2)):
        return (np.array({_stored("tiled_attention(Q, K, V, block_size=2)[0]")}),
                np.array({_stored("tiled_attention(Q, K, V, block_size=2)[1]")}))
    return np.zeros(np.shape(Q)[:-1] + np.shape(V)[-1:]), np.zeros(np.shape(Q)[:-1])
""",
        "tiled_attention_backward": f"""
def tiled_attention_backward(Q, K, V, output, lse, grad_output, block_size=64, causal=False):
    if (np.shape(Q), np.shape(K), np.shape(V)) == ((4, 3), (5, 3), (5, 2)):
        return (np.array({_stored(BACKWARD_CALL + "[0]")}),
                np.array({_stored(BACKWARD_CALL + "[1]")}),
                np.array({_stored(BACKWARD_CALL + "[2]")}))
    return np.zeros(np.shape(Q)), np.zeros(np.shape(K)), np.zeros(np.shape(V))
""",
    },
    # The lesson: its softmax for the online softmax; its loop for one query, run for
    # every query of every batch element (the one loop this file adds).
    "lesson": {
        "online_softmax": _definitions(LESSON, ["softmax_rows"]) + """
def online_softmax(x, block_size=1):
    return softmax_rows(np.asarray(x, dtype=np.float64))
""",
        "tiled_attention": """
def one_query(q, keys, values, block):
    n, d = keys.shape
    d_v = values.shape[-1]
    m, s, o = -np.inf, 0.0, np.zeros(d_v)
    for k_blk, v_blk in zip(keys.reshape(n // block, block, d), values.reshape(n // block, block, d_v)):
        scores = k_blk @ q / math.sqrt(d)
        new_m = max(m, scores.max())
        p = np.exp(scores - new_m)
        factor = math.exp(m - new_m)
        s = factor * s + p.sum()
        o = factor * o + p @ v_blk
        m = new_m
    return o / s, m + math.log(s)

def tiled_attention(Q, K, V, block_size=64, causal=False):
    Q, K, V = (np.asarray(x, dtype=np.float64) for x in (Q, K, V))
    output, lse = np.empty(Q.shape[:-1] + V.shape[-1:]), np.empty(Q.shape[:-1])
    for index in np.ndindex(Q.shape[:-2]):
        for i in range(Q.shape[-2]):
            stop = i + 1 if causal else K.shape[-2]
            output[index + (i,)], lse[index + (i,)] = one_query(Q[index + (i,)], K[index][:stop], V[index][:stop],
                                                                 block_size)
    return output, lse
""",
    },
    # The lesson's sliding window: with a window of n it is causal attention (the lesson
    # checks that); it has no lse.
    "lesson_window": {
        "tiled_attention": _definitions(LESSON, ["sliding_window_attention", "linear_attention"]) + """
def tiled_attention(Q, K, V, block_size=64, causal=False):
    Q, K, V = (np.asarray(x, dtype=np.float64) for x in (Q, K, V))
    if causal:
        output = sliding_window_attention(Q, K, V, K.shape[-2])
    else:
        output = linear_attention(Q, K, V)
    return output, np.zeros(Q.shape[:-1])
""",
    },
    # course/efficient.py's direct computation (2-D, no lse).
    "course": {
        "tiled_attention": _definitions(COURSE, ["naive_attention_numpy"]) + """
def tiled_attention(Q, K, V, block_size=64, causal=False):
    Q, K, V = (np.asarray(x, dtype=np.float64) for x in (Q, K, V))
    return naive_attention_numpy(Q, K, V), np.zeros(Q.shape[:-1])
""",
    },
    # A tiled PyTorch autograd Function (forward and backward, 4-D), called through a
    # stand-in for its context; course/efficient.py once held one.
    "course_tiled": {
        "tiled_attention": _definitions(COURSE, ["TiledAttention"]) + """
import types

def _as_heads(x):
    x = np.asarray(x, dtype=np.float64)
    return torch.from_numpy(x.reshape((-1, 1) + x.shape[-2:]).copy())

def tiled_attention(Q, K, V, block_size=64, causal=False):
    ctx = types.SimpleNamespace()
    ctx.save_for_backward = lambda *saved: setattr(ctx, "saved_tensors", saved)
    out = TiledAttention.forward(ctx, _as_heads(Q), _as_heads(K), _as_heads(V), block_size)
    return (out.numpy().reshape(np.shape(Q)[:-1] + np.shape(V)[-1:]),
            ctx.saved_tensors[4].numpy().reshape(np.shape(Q)[:-1]))
""",
        "tiled_attention_backward": _definitions(COURSE, ["TiledAttention"]) + """
import types

def _as_heads(x):
    x = np.asarray(x, dtype=np.float64)
    return torch.from_numpy(x.reshape((-1, 1) + x.shape[-2:]).copy())

def tiled_attention_backward(Q, K, V, output, lse, grad_output, block_size=64, causal=False):
    saved = tuple(_as_heads(x) for x in (Q, K, V, output)) + (_as_heads(np.asarray(lse)[..., None])[..., 0],)
    ctx = types.SimpleNamespace(saved_tensors=saved, block=block_size, scale=1.0 / math.sqrt(np.shape(Q)[-1]))
    dq, dk, dv, _ = TiledAttention.backward(ctx, _as_heads(grad_output))
    return tuple(g.numpy().reshape(np.shape(x)) for g, x in zip((dq, dk, dv), (Q, K, V)))
""",
    },
    # A direct computation in PyTorch, differentiated by autograd; course/efficient.py
    # once held one.
    "course_naive": {
        "tiled_attention_backward": _definitions(COURSE, ["naive_attention_torch"]) + """
def tiled_attention_backward(Q, K, V, output, lse, grad_output, block_size=64, causal=False):
    q, k, v = (torch.tensor(np.array(x, dtype=np.float64), requires_grad=True) for x in (Q, K, V))
    out = naive_attention_torch(q, k, v)
    upstream = torch.from_numpy(np.array(grad_output, dtype=np.float64))
    return tuple(g.numpy() for g in torch.autograd.grad(out, (q, k, v), upstream))
""",
    },
}


# -- attacks on the memory meter ------------------------------------------------------------

def _catalogued(identifier):
    """The code of a catalogued answer (autograder/catalogues/efficient_attention.yml)."""
    import yaml

    entries = yaml.safe_load((REPO / "autograder/catalogues/efficient_attention.yml").read_text())["answers"]
    return next(entry["code"] for entry in entries if entry.get("id") == identifier)


# Memory touched and handed back lazily (MADV_FREE), chunk by chunk, until the kernel starts
# taking it back (mincore sees the first chunk gone): the sandbox's memory group is then
# at its limit, and what a later call allocates is taken from these pages instead of
# raising the group's peak. Top-level code of the answer's cell, run once before its
# tests; `_AT_THE_LIMIT_AGAIN` (after the answer) does it again at the end of each call
# at the memory tests' sizes (n_q * n_k >= 2**20), for the next one.
_HAND_BACK_LAZILY = """
import ctypes
import mmap

def _hand_back_lazily(area=None, span=8 << 30, chunk=32 << 20):
    if area is None:
        area = mmap.mmap(-1, span, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)  # MAP_NORESERVE
    pages = np.frombuffer(area, dtype=np.uint8)
    libc = ctypes.CDLL(None)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    resident = ctypes.c_ubyte()
    for start in range(0, span, chunk):
        pages[start:start + chunk:4096] = 1
        area.madvise(mmap.MADV_FREE, start, chunk)
        libc.mincore(pages.ctypes.data, 4096, ctypes.byref(resident))
        if not resident.value & 1:  # the kernel took the first chunk back: the group is at its limit
            break
    return area

_handed_back = _hand_back_lazily()
"""

_AT_THE_LIMIT_AGAIN = """

_answer = {name}

def {name}(Q, K, *args, **kwargs):
    result = _answer(Q, K, *args, **kwargs)
    if np.shape(Q)[-2] * np.shape(K)[-2] >= 2 ** 20:
        _hand_back_lazily(_handed_back)
    return result
"""

# More than the rule allows at n = 2048, in float32: 1536 queries against all the keys in
# the forward pass (12 MiB, one and a half times the budget of 8), 768 in the backward pass
# (two matrices, weights and dS: 12 MiB); and less than the rule allows with 16384 keys
# (16 queries against all the keys, 1 MiB, or 8 for the two matrices of the backward pass;
# the budget is 2 MiB). The catalogued float64 full matrix below the memory tests' sizes
# (n_q * n_k < 2**20), so that every other test passes. WIDE is the dtype of the result
# at those sizes: float64, or complex128, which doubles the bytes of what is returned.
_FLOAT32_FORWARD = """
def tiled_attention(Q, K, V, block_size=64, causal=False):
    n_q, n_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / math.sqrt(Q.shape[-1])
    if n_q * n_k < 2 ** 20:
        Q, K, V = (np.concatenate([X[..., a:a + block_size, :] for a in range(0, X.shape[-2], block_size)],
                                  axis=-2) for X in (Q, K, V))
        scores = Q @ np.swapaxes(K, -1, -2) * scale
        if causal:
            scores = np.where(np.tri(*scores.shape[-2:], dtype=bool), scores, -np.inf)
        top = scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores - top)
        total = weights.sum(axis=-1, keepdims=True)
        return (weights / total) @ V, (top + np.log(total))[..., 0]
    rows = n_q * 3 // 4 if n_k <= 4096 else 16
    keys, values = K.astype(np.float32), V.astype(np.float32)
    output, lse = np.empty(Q.shape[:-1] + V.shape[-1:], dtype=WIDE), np.empty(Q.shape[:-1], dtype=WIDE)
    for qs in range(0, n_q, rows):
        s = Q[..., qs:qs + rows, :].astype(np.float32) @ np.swapaxes(keys, -1, -2)
        s *= np.float32(scale)
        if causal:
            s[..., ~np.tri(s.shape[-2], n_k, qs, dtype=bool)] = -np.inf
        top = s.max(axis=-1, keepdims=True)
        s -= top
        np.exp(s, out=s)
        total = s.sum(axis=-1, keepdims=True)
        s /= total
        output[..., qs:qs + rows, :] = s @ values
        lse[..., qs:qs + rows] = (top + np.log(total))[..., 0]
    return output, lse
"""

_FLOAT32_BACKWARD = """
def tiled_attention_backward(Q, K, V, output, lse, grad_output, block_size=64, causal=False):
    n_q, n_k = Q.shape[-2], K.shape[-2]
    scale = 1.0 / math.sqrt(Q.shape[-1])
    if n_q * n_k < 2 ** 20:
        Q, K, V = (np.concatenate([X[..., a:a + block_size, :] for a in range(0, X.shape[-2], block_size)],
                                  axis=-2) for X in (Q, K, V))
        scores = Q @ np.swapaxes(K, -1, -2) * scale
        if causal:
            scores = np.where(np.tri(*scores.shape[-2:], dtype=bool), scores, -np.inf)
        a = np.exp(scores - lse[..., None])
        ds = a * (grad_output @ np.swapaxes(V, -1, -2) - np.sum(grad_output * output, axis=-1)[..., None])
        return scale * ds @ K, scale * np.swapaxes(ds, -1, -2) @ Q, np.swapaxes(a, -1, -2) @ grad_output
    rows = n_q * 3 // 8 if n_k <= 4096 else 8
    keys, values = K.astype(np.float32), V.astype(np.float32)
    D = np.sum(grad_output * output, axis=-1).astype(np.float32)
    dQ, dK, dV = np.zeros(Q.shape, dtype=WIDE), np.zeros(K.shape, dtype=WIDE), np.zeros(V.shape, dtype=WIDE)
    for qs in range(0, n_q, rows):
        q = Q[..., qs:qs + rows, :].astype(np.float32)
        do = grad_output[..., qs:qs + rows, :].astype(np.float32)
        a = q @ np.swapaxes(keys, -1, -2)
        a *= np.float32(scale)
        a -= lse[..., qs:qs + rows, None].astype(np.float32)
        if causal:
            a[..., ~np.tri(a.shape[-2], n_k, qs, dtype=bool)] = -np.inf
        np.exp(a, out=a)
        dV += np.swapaxes(a, -1, -2) @ do
        ds = do @ np.swapaxes(values, -1, -2)
        ds -= D[..., qs:qs + rows, None]
        ds *= a
        dQ[..., qs:qs + rows, :] = scale * (ds @ keys)
        dK += scale * (np.swapaxes(ds, -1, -2) @ q)
    return dQ, dK, dV
"""

# {attack: ({graded name: the code of its cell}, the one test it must lose)}: answers that
# break the memory rule, each of which must lose its memory test and nothing else.
MEMORY_ATTACKS = {
    # The catalogued full-matrix answers, with memory handed back lazily before each call.
    "lazily-freed-forward": (
        {"tiled_attention": _HAND_BACK_LAZILY + _catalogued("tiled-full-matrix")
         + _AT_THE_LIMIT_AGAIN.format(name="tiled_attention")}, "test_tiled_attention_memory"),
    "lazily-freed-backward": (
        {"tiled_attention_backward": _HAND_BACK_LAZILY + _catalogued("backward-full-matrix")
         + _AT_THE_LIMIT_AGAIN.format(name="tiled_attention_backward")}, "test_tiled_attention_backward_memory"),
    # Over the budget in float32, with the result in float64 (what the contract asks)...
    "float32-forward": ({"tiled_attention": "WIDE = np.float64\n" + _FLOAT32_FORWARD},
                        "test_tiled_attention_memory"),
    "float32-backward": ({"tiled_attention_backward": "WIDE = np.float64\n" + _FLOAT32_BACKWARD},
                         "test_tiled_attention_backward_memory"),
    # ... and in complex128, twice the bytes of what is returned.
    "float32-wide-forward": ({"tiled_attention": "WIDE = np.complex128\n" + _FLOAT32_FORWARD},
                             "test_tiled_attention_memory"),
    "float32-wide-backward": ({"tiled_attention_backward": "WIDE = np.complex128\n" + _FLOAT32_BACKWARD},
                              "test_tiled_attention_backward_memory"),
}
