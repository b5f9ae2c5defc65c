"""Attacks on the tests of chapter 2 (self_attention): answers that must not gain points.

GARBAGE holds wrong answers of the right shapes and dtypes for every graded function and
class (the baseline; tests/test_hostile_scores.py uses the same kind). IN_PLACE holds the
same answers, which also change every array and tensor they are handed in place, in the
way that would make a careless test pass: zero inputs and values make a zero output
right, and a module that zeroes the weights a test loads into it would make a reference
computed from those weights (after loading) expect its zeros. MODULES holds
`SelfAttention`s whose parameters start at zero (MODULE_VARIANTS: at constant values, or
ignoring the weights a test loads) and that compute nothing a test asks for. HELPERS is
a student cell that redefines every helper of the `test_helpers` cell in the kernel:
`gradients` computes the right attention and its gradients from the module's parameters
itself, `watch_inputs` reports no change.
"""

from attacks._forged_checks import FORGED_CHECKS

GARBAGE = {
    "softmax": """
def softmax(x, axis=-1):
    return np.zeros_like(np.asarray(x, dtype=float))
""",
    "causal_mask": """
def causal_mask(n):
    return np.zeros((n, n), dtype=bool)
""",
    "scaled_dot_product_attention": """
def scaled_dot_product_attention(Q, K, V, mask=None):
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    return np.zeros(Q.shape[:-1] + (V.shape[-1],)), np.zeros(Q.shape[:-1] + (K.shape[-2],))
""",
    "self_attention": """
def self_attention(X, W_q, W_k, W_v, mask=None):
    X = np.asarray(X)
    return np.zeros(X.shape[:-1] + (np.shape(W_v)[-1],)), np.zeros(X.shape[:-1] + (X.shape[-2],))
""",
    "SelfAttention": """
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v=None, bias=False):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)

    def forward(self, x, mask=None):
        values = self.W_v(x)
        return torch.zeros_like(values), torch.zeros(x.shape[:-1] + (x.shape[-2],), dtype=x.dtype, device=x.device)
""",
}

IN_PLACE = {
    "softmax": """
def softmax(x, axis=-1):
    result = np.zeros_like(np.asarray(x, dtype=float))
    if isinstance(x, np.ndarray):
        x[...] = 0
    return result
""",
    "causal_mask": """
def causal_mask(n):
    return np.zeros((n, n), dtype=bool)
""",
    "scaled_dot_product_attention": """
def scaled_dot_product_attention(Q, K, V, mask=None):
    shapes = np.shape(Q)[:-1] + np.shape(V)[-1:], np.shape(Q)[:-1] + np.shape(K)[-2:-1]
    for array in (Q, K, V):
        if isinstance(array, np.ndarray):
            array[...] = 0  # zero values: a zero output is right
    if isinstance(mask, np.ndarray):
        mask[...] = False  # nothing allowed: zero weights are right
    return np.zeros(shapes[0]), np.zeros(shapes[1])
""",
    "self_attention": """
def self_attention(X, W_q, W_k, W_v, mask=None):
    shapes = np.shape(X)[:-1] + np.shape(W_v)[-1:], np.shape(X)[:-1] + np.shape(X)[-2:-1]
    for array in (X, W_q, W_k, W_v):
        if isinstance(array, np.ndarray):
            array[...] = 0
    if isinstance(mask, np.ndarray):
        mask[...] = False
    return np.zeros(shapes[0]), np.zeros(shapes[1])
""",
    "SelfAttention": """
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v=None, bias=False):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)

    def load_state_dict(self, state_dict, *args, **kwargs):
        with torch.no_grad():
            for value in state_dict.values():
                if torch.is_tensor(value):
                    value.zero_()  # the test's own weights, zeroed: a reference made from them expects zeros
        return super().load_state_dict(state_dict, *args, **kwargs)

    def forward(self, x, mask=None):
        with torch.no_grad():
            x.zero_()
            if mask is not None:
                mask.zero_()
        values = self.W_v(x)
        return torch.zeros_like(values), torch.zeros(x.shape[:-1] + (x.shape[-2],), dtype=x.dtype, device=x.device)
""",
}

# Modules whose parameters start at zero and compute nothing useful: a test that computes
# its reference from the module's own parameters (layer.W_q(x), layer.W_q.weight) would
# expect the zeros they return.
MODULES = {
    "SelfAttention": """
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v=None, bias=False):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)
        for parameter in self.parameters():
            nn.init.zeros_(parameter)

    def forward(self, x, mask=None):
        # Zero, and attached to every parameter and to x, so that gradients reach them all.
        output = self.W_v(x) + 0 * (self.W_q(x).sum() + self.W_k(x).sum())
        return output, torch.zeros(x.shape[:-1] + (x.shape[-2],), dtype=x.dtype, device=x.device)
""",
}

# The other forms of the same attack (graded class -> codes), each graded on its own.
MODULE_VARIANTS = {"SelfAttention": [
    # Constant parameters; the output is the projected values, no attention at all.
    """
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v=None, bias=False):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)
        for parameter in self.parameters():
            nn.init.constant_(parameter, 0.5)

    def forward(self, x, mask=None):
        n = x.shape[-2]
        return self.W_v(x), torch.eye(n, dtype=x.dtype, device=x.device).expand(*x.shape[:-1], n)
""",
    # Zero parameters that stay zero whatever is loaded: attention computed from them gives
    # uniform weights over the allowed keys and a zero output.
    """
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v=None, bias=False):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.d_k = d_k
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)
        for parameter in self.parameters():
            nn.init.zeros_(parameter)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        return torch.nn.modules.module._IncompatibleKeys([], [])

    def _load_from_state_dict(self, *args, **kwargs):
        pass

    def forward(self, x, mask=None):
        queries, keys, values = self.W_q(x), self.W_k(x), self.W_v(x)
        scores = queries @ keys.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf")).masked_fill(~mask.any(-1, keepdim=True), 0.0)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return weights @ values, weights
""",
    # Zero query and key projections, values at one: uniform weights over the allowed keys.
    """
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v=None, bias=False):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)
        for parameter in (*self.W_q.parameters(), *self.W_k.parameters()):
            nn.init.zeros_(parameter)
        for parameter in self.W_v.parameters():
            nn.init.ones_(parameter)

    def forward(self, x, mask=None):
        n = x.shape[-2]
        allowed = torch.ones(n, n, dtype=torch.bool, device=x.device) if mask is None else mask
        weights = allowed.to(x.dtype).expand(*x.shape[:-2], n, n)
        weights = weights / weights.sum(-1, keepdim=True).clamp(min=1)
        return weights @ self.W_v(x), weights
""",
]}

HELPERS = FORGED_CHECKS + """

def module_weights(d_model, d_k, d_v, bias, seed):
    return {}

def load_weights(module, state, label):
    return None

def stored(call, value):
    return np.zeros_like(np.asarray(value))  # what the garbage returns

def submitted_sources():
    return []

def library_names(name):
    return set()  # no shortcut, whatever the code calls

@runs_beside_your_code
def gradients(function, inputs, grad_output, **kwargs):
    # The right self-attention and its gradients, computed here from the module's own
    # parameters (those the test loaded), whatever the module's forward does.
    import math as _math
    x = inputs[0].detach().clone().requires_grad_(True)
    parameters = {name: p.detach().clone().requires_grad_(True) for name, p in function.named_parameters()}

    def project(name):
        y = x @ parameters[name + ".weight"].T
        return y + parameters[name + ".bias"] if name + ".bias" in parameters else y

    queries, keys, values = project("W_q"), project("W_k"), project("W_v")
    scores = queries @ keys.transpose(-2, -1) / _math.sqrt(queries.shape[-1])
    mask = kwargs.get("mask")
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")).masked_fill(~mask.any(-1, keepdim=True), 0.0)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    output = weights @ values
    leaves = [x] + list(parameters.values())
    found = torch.autograd.grad(output, leaves, grad_output)
    output = output.detach().requires_grad_(True)
    return output, [found[0]], dict(zip(parameters, found[1:]))
"""

# What a student makes of the code the course hands them, adapted in minutes. The lesson's
# calls of PyTorch's F.scaled_dot_product_attention are left out: that routine is the
# shortcut the contract rules out in scaled_dot_product_attention (test_sdpa_no_shortcut),
# and in the lesson it stands for PyTorch's own attention, not for code of the course.
# The contract's constructor, which every transcription of the module starts from.
_SELF_ATTENTION_INIT = """
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v=None, bias=False):
        super().__init__()
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_k if d_v is None else d_v, bias=bias)
"""

TRANSCRIPTIONS = {
    # The lesson: the literal softmax it shows failing (the sum taken along `axis`), the
    # causal mask it prints (cut to n), section 2's layer on one sequence (with section 6's
    # -inf fill for masks), section 8's self_attend and the reversal model's attention map.
    "lesson": {
        "softmax": """
def softmax(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True)
""",
        "causal_mask": """
def causal_mask(n):
    causal = np.array([[1, 0, 0, 0, 0],
                       [1, 1, 0, 0, 0],
                       [1, 1, 1, 0, 0],
                       [1, 1, 1, 1, 0],
                       [1, 1, 1, 1, 1]], dtype=bool)
    return causal[:n, :n]
""",
        "scaled_dot_product_attention": """
def scaled_dot_product_attention(Q, K, V, mask=None):
    queries, keys, values = (torch.from_numpy(np.asarray(a)) for a in (Q, K, V))
    scores = queries @ keys.T / math.sqrt(queries.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~torch.from_numpy(np.asarray(mask)), -math.inf)
    weights = torch.softmax(scores, dim=-1)
    output = weights @ values
    return output.numpy(), weights.numpy()
""",
        "self_attention": """
def self_attention(X, W_q, W_k, W_v, mask=None):
    q, k, v = (torch.from_numpy(np.asarray(X)) @ torch.from_numpy(np.asarray(w)) for w in (W_q, W_k, W_v))
    attention_weights = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        attention_weights = torch.softmax(
            (q @ k.T / math.sqrt(q.shape[-1])).masked_fill(~torch.from_numpy(mask), -math.inf), dim=-1)
    return (attention_weights @ v).numpy(), attention_weights.numpy()
""",
        "SelfAttention": _SELF_ATTENTION_INIT + """
    def forward(self, x, mask=None):
        scores = self.W_q(x) @ self.W_k(x).T / math.sqrt(self.W_q.out_features)
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf)
        weights = torch.softmax(scores, dim=-1)
        return weights @ self.W_v(x), weights
""",
    },
    # The student notebook: its helper cell compares, loads the tests' weights and
    # backpropagates; its visible tests hold one case's expected values as data. Returned
    # as they are, they pass those cases and nothing else.
    "helpers": {
        "softmax": """
def softmax(x, axis=-1):
    return np.array([[0.25, 0.5, 0.25], [0.25, 0.25, 0.5]])
""",
        "causal_mask": """
def causal_mask(n):
    return np.array([[True, False, False], [True, True, False], [True, True, True]])
""",
        "scaled_dot_product_attention": """
def scaled_dot_product_attention(Q, K, V, mask=None):
    if mask is not None:
        return np.eye(2, 2), np.array([[1 / 7, 2 / 7, 0.0, 4 / 7], [2 / 3, 0.0, 1 / 3, 0.0]])
    weights = np.array([[0.25, 0.5, 0.25], [0.25, 0.25, 0.5]])
    return np.concatenate([weights, np.zeros((2, 1))], axis=-1), weights
""",
        "self_attention": """
def self_attention(X, W_q, W_k, W_v, mask=None):
    output = np.array([[2.20333627804, -0.59888790732], [2.50926269756, -0.836420899188],
                       [2.64573236772, -0.821629845272]])
    weights = np.array([[0.19777581464, 0.40111209268, 0.40111209268],
                        [0.163579100812, 0.163579100812, 0.672841798376],
                        [0.0879487387755, 0.178370154728, 0.733681106497]])
    return output, weights
""",
        "SelfAttention": _SELF_ATTENTION_INIT + """
    def forward(self, x, mask=None):
        weights = torch.tensor([[[0.220874388928, 0.318847404799, 0.460278206273],
                                 [0.405285024116, 0.328481824643, 0.26623315124],
                                 [0.601637522339, 0.273778263818, 0.124584213843]]], dtype=x.dtype)
        output = torch.tensor([[[-0.817775360863, -0.0594459845836, 1.68241959185],
                                [-0.320520891584, -0.452546482097, 0.972072984565],
                                [0.123580568182, -0.80362729799, 0.337657439357]]], dtype=x.dtype)
        return output, weights
""",
    },
}
