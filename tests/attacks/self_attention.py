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

def reference_self_attention(x, state, mask=None, scale=None):
    return torch.zeros(1), torch.zeros(1)

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
