"""Attacks on the tests of chapter 4 (multi_head_attention): answers that must not gain points.

GARBAGE holds wrong answers of the right shapes and dtypes for every graded name (the
baseline): zeros from the reshapes; a MultiHeadAttention with the four nn.Linear
attributes and the ValueError of the contract whose output is zero and whose weights are
uniform over the keys; a from_torch that copies nothing.

IN_PLACE holds the same answers, which also change every tensor they are handed in place,
in the way that would make a careless test pass: zero inputs (a reshape of zeros is the
zero it returns; attention over zero inputs without biases gives a zero output and
uniform weights), a mask set to True everywhere, the upstream gradient zeroed by a hook
while it is backpropagated (the gradient of zero is zero), the weights handed to
load_state_dict zeroed, and mha's weights zeroed by from_torch.

MODULES holds a MultiHeadAttention whose parameters start at zero and that computes
nothing useful: what attention with all-zero weights returns (a zero output, uniform
weights over the allowed keys), whatever weights it is given. A test that reads the
module's own parameters to compute its expected values expects exactly that.
MODULE_VARIANTS holds the same idea with parameters at constant values.

HELPERS is a student cell, added after the last answer, that redefines every helper of
the `test_helpers` cell in the kernel to say what would help the garbage most: no input
changed, the expected output and gradients (computed from what the helper is handed),
and the state_dict the from_torch tests expect.
"""

from attacks._forged_checks import FORGED_CHECKS, FORGED_SOURCES

_MHA_SKELETON = """
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("n_heads must divide d_model")
        self.d_model, self.n_heads = d_model, n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
"""

GARBAGE = {
    "split_heads": """
def split_heads(x, n_heads):
    batch, n, d_model = x.shape
    return torch.zeros(batch, n_heads, n, d_model // n_heads, dtype=x.dtype, device=x.device)
""",
    "merge_heads": """
def merge_heads(x):
    batch, n_heads, n, d_head = x.shape
    return torch.zeros(batch, n, n_heads * d_head, dtype=x.dtype, device=x.device)
""",
    "MultiHeadAttention": _MHA_SKELETON + """
    def forward(self, query, key, value, mask=None):
        batch, n_q, _ = query.shape
        n_k = key.shape[1]
        weights = torch.full((batch, self.n_heads, n_q, n_k), 1.0 / n_k, dtype=query.dtype, device=query.device)
        return torch.zeros_like(query), weights
""",
    "from_torch": """
def from_torch(mha):
    reference = mha.out_proj.weight
    module = MultiHeadAttention(mha.embed_dim, mha.num_heads, bias=mha.in_proj_bias is not None)
    return module.to(device=reference.device, dtype=reference.dtype)
""",
}

IN_PLACE = {
    "split_heads": """
def split_heads(x, n_heads):
    batch, n, d_model = x.shape
    with torch.no_grad():
        x.zero_()  # the test's x, split, is the zero this returns
    heads = (x * 0).reshape(batch, n_heads, n, d_model // n_heads)
    if heads.requires_grad:
        heads.register_hook(lambda grad: grad.zero_())  # the upstream gradient becomes zero
    return heads
""",
    "merge_heads": """
def merge_heads(x):
    batch, n_heads, n, d_head = x.shape
    with torch.no_grad():
        x.zero_()
    merged = (x * 0).reshape(batch, n, n_heads * d_head)
    if merged.requires_grad:
        merged.register_hook(lambda grad: grad.zero_())
    return merged
""",
    "MultiHeadAttention": _MHA_SKELETON + """
    def load_state_dict(self, state_dict, strict=True, **kwargs):
        with torch.no_grad():
            for value in state_dict.values():
                if torch.is_tensor(value):
                    value.zero_()  # the test's weights become zero: zero weights give what forward returns
        return super().load_state_dict(state_dict, strict=False)

    def forward(self, query, key, value, mask=None):
        batch, n_q, _ = query.shape
        n_k = key.shape[1]
        with torch.no_grad():
            for x in (query, key, value):
                x.zero_()  # attention over zero inputs without biases: a zero output, uniform weights
            if mask is not None:
                mask.fill_(True)  # nothing masked: uniform weights over every key
        output = query * 0 + key.sum() * 0 + value.sum() * 0
        if output.requires_grad:
            output.register_hook(lambda grad: grad.zero_())
        weights = torch.full((batch, self.n_heads, n_q, n_k), 1.0 / n_k, dtype=query.dtype, device=query.device)
        return output, weights
""",
    "from_torch": """
def from_torch(mha):
    with torch.no_grad():
        for parameter in mha.parameters():
            parameter.zero_()  # mha's weights become the zeros of the module this returns
    reference = mha.out_proj.weight
    module = MultiHeadAttention(mha.embed_dim, mha.num_heads, bias=mha.in_proj_bias is not None)
    module = module.to(device=reference.device, dtype=reference.dtype)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.zero_()
    return module
""",
}


def _frozen_module(value):
    """A MultiHeadAttention whose parameters start at `value` and whose forward computes
    attention with those starting values, whatever weights are loaded later."""
    return _MHA_SKELETON + f"""
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.fill_({value})
        # Plain attributes, not parameters or buffers: load_state_dict never reaches them.
        self.frozen = {{name: p.detach().clone() for name, p in self.named_parameters()}}

    def forward(self, query, key, value, mask=None):
        frozen = {{name: p.to(query.device, query.dtype) for name, p in self.frozen.items()}}

        def project(x, name):
            return F.linear(x, frozen[name + ".weight"], frozen.get(name + ".bias"))

        def split(x):
            batch, n, _ = x.shape
            return x.reshape(batch, n, self.n_heads, -1).transpose(1, 2)

        queries, keys, values = split(project(query, "W_q")), split(project(key, "W_k")), split(project(value, "W_v"))
        scores = queries @ keys.transpose(-2, -1) / math.sqrt(self.d_model // self.n_heads)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf")).masked_fill(~mask.any(-1, keepdim=True), 0.0)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        merged = (weights @ values).transpose(1, 2).reshape(query.shape)
        return project(merged, "W_o"), weights
"""


MODULES = {"MultiHeadAttention": _frozen_module(0.0)}

# The same module with parameters at other constant values.
MODULE_VARIANTS = {"MultiHeadAttention": [_frozen_module(0.5), _frozen_module(-1.0)]}

HELPERS = FORGED_CHECKS + """

def _true_attention(parameters, n_heads, query, key, value, mask=None):
    linear = lambda x, name: F.linear(x, parameters[name + ".weight"], parameters.get(name + ".bias"))
    split = lambda x: x.reshape(x.shape[0], x.shape[1], n_heads, -1).transpose(1, 2)
    queries, keys, values = split(linear(query, "W_q")), split(linear(key, "W_k")), split(linear(value, "W_v"))
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(query.shape[-1] // n_heads)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")).masked_fill(~mask.any(-1, keepdim=True), 0.0)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    merged = (weights @ values).transpose(1, 2).reshape(query.shape)
    return linear(merged, "W_o"), weights

@runs_beside_your_code
def gradients(function, inputs, grad_output, **kwargs):
    # The answer the test expects, computed here from what the helper is handed.
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs if torch.is_tensor(x)]
    if isinstance(function, nn.Module):
        parameters = {name: p.detach().clone().requires_grad_(True) for name, p in function.named_parameters()}
        output = _true_attention(parameters, function.n_heads, *leaves, **kwargs)[0]
    else:
        parameters = {}
        x = leaves[0]
        if x.dim() == 3:  # split_heads
            batch, n, d_model = x.shape
            output = x.reshape(batch, n, kwargs["n_heads"], -1).transpose(1, 2)
        else:  # merge_heads
            batch, n_heads, n, d_head = x.shape
            output = x.transpose(1, 2).reshape(batch, n, n_heads * d_head)
    found = torch.autograd.grad(output, leaves + list(parameters.values()), grad_output, allow_unused=True)
    return output.detach(), list(found[:len(leaves)]), dict(zip(parameters, found[len(leaves):]))

@runs_beside_your_code
def module_gradients(d_model, n_heads, state, inputs, grad_output, mask=None):
    # The output and gradients the test expects, computed here from the weights it sends.
    parameters = {name: value.detach().clone().requires_grad_(True) for name, value in state.items()}
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    output = _true_attention(parameters, n_heads, *leaves, mask=mask)[0]
    found = torch.autograd.grad(output, leaves + list(parameters.values()), grad_output, allow_unused=True)
    return output.detach().requires_grad_(True), list(found[:3]), dict(zip(parameters, found[3:]))

@runs_beside_your_code
def converted_by_from_torch(state, n_heads, bias=True, dtype=torch.float32, device="cpu"):
    # The state_dict the test expects, read from the state it sends.
    d_model = state["out_proj.weight"].shape[0]
    copied = {}
    weights = state["in_proj_weight"].to(device=device, dtype=dtype).chunk(3)
    for x, weight in zip("qkv", weights):
        copied[f"W_{x}.weight"] = weight.clone()
    copied["W_o.weight"] = state["out_proj.weight"].to(device=device, dtype=dtype).clone()
    if bias:
        for x, b in zip("qkv", state["in_proj_bias"].to(device=device, dtype=dtype).chunk(3)):
            copied[f"W_{x}.bias"] = b.clone()
        copied["W_o.bias"] = state["out_proj.bias"].to(device=device, dtype=dtype).clone()
    return "MultiHeadAttention", copied

def torch_reference(parameters, n_heads, query, key, value, mask=None):
    return torch.zeros_like(query), torch.zeros(1)

def mha_variant(parameters, n_heads, query, key, value, mask=None, variant=""):
    return torch.zeros_like(query), torch.zeros(1)

def mha_hints(parameters, n_heads, query, key, value, mask=None, which="weights"):
    return []

def parameters_of(layer):
    return {name: torch.zeros(1) for name in ("W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight")}

def random_weights(d_model, bias=True, generator=None, dtype=torch.float64):
    names = [f"W_{x}.weight" for x in "qkvo"] + ([f"W_{x}.bias" for x in "qkvo"] if bias else [])
    return {name: torch.zeros((d_model, d_model) if name.endswith("weight") else (d_model,), dtype=dtype)
            for name in names}

def load_weights(module, state, what="MultiHeadAttention"):
    return None

def stored(call, value):
    return np.zeros(1)
""" + FORGED_SOURCES

# The lesson's code for one sequence, as a student adapts it: nn.Linear's weights turned
# into the lesson's (W, b) row convention, a loop over the batch, values from `value`.
_LESSON_PROJECTIONS = """
def project(x, projection):
    weight, bias = projection
    return x @ weight + bias


def projections_of(module):
    # The lesson's {"q": (W, b), ...} with y = x @ W + b, from nn.Linear (which stores W^T).
    projections = {}
    for name, linear in zip("qkvo", (module.W_q, module.W_k, module.W_v, module.W_o)):
        bias = linear.bias if linear.bias is not None else torch.zeros_like(linear.weight[0])
        projections[name] = (linear.weight.T, bias)
    return projections
"""

_BATCH_LOOP = """
    def forward(self, query, key, value, mask=None):
        projections = projections_of(self)
        outputs, maps = [], []
        for x_q, x_k, x_v in zip(query, key, value):
            output, weights = ONE_SEQUENCE(x_q, x_k, x_v, projections, self.n_heads)
            outputs.append(output)
            maps.append(weights)
        return torch.stack(outputs), torch.stack(maps)
"""


def _lesson_module(function, name):
    return _LESSON_PROJECTIONS + function + _MHA_SKELETON + _BATCH_LOOP.replace("ONE_SEQUENCE", name)


# What a student makes of the code the course hands them, adapted in minutes. The lesson
# computes multi-head attention for one sequence without a mask (heads_at_once, the loop
# heads_in_a_loop): in a loop over the batch they give the values of unmasked
# self-attention, and nothing of masks, gradients with a mask or cross-attention. The
# reshapes (split_heads, merge_heads) and from_torch are stated by the assignment's own
# text (reshape, then transpose; in_proj_weight's rows hold the query, key and value
# blocks), so a transcription of them is no transcription of an answer the course hides.
TRANSCRIPTIONS = {
    # The lesson's heads_at_once (section 3), in a loop over the batch.
    "lesson": {
        "MultiHeadAttention": _lesson_module("""
def heads_at_once(x_q, x_k, x_v, projections, n_heads):
    (n_q, d_model), n_k = x_q.shape, x_k.shape[0]
    d_head = d_model // n_heads
    queries = project(x_q, projections["q"])
    keys = project(x_k, projections["k"])
    values = project(x_v, projections["v"])
    queries = queries.reshape(n_q, n_heads, d_head).transpose(0, 1)
    keys = keys.reshape(n_k, n_heads, d_head).transpose(0, 1)
    values = values.reshape(n_k, n_heads, d_head).transpose(0, 1)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(d_head)
    weights = torch.softmax(scores, dim=-1)
    heads = weights @ values
    merged = heads.transpose(0, 1).reshape(n_q, d_model)
    return project(merged, projections["o"]), weights
""", "heads_at_once"),
    },
    # The lesson's per-head loop (section 1), in a loop over the batch.
    "lesson_loop": {
        "MultiHeadAttention": _lesson_module("""
def heads_in_a_loop(x_q, x_k, x_v, projections, n_heads):
    d_model = x_q.shape[-1]
    d_head = d_model // n_heads
    queries = project(x_q, projections["q"])
    keys = project(x_k, projections["k"])
    values = project(x_v, projections["v"])
    outputs, maps = [], []
    for h in range(n_heads):
        block = slice(h * d_head, (h + 1) * d_head)
        q_h, k_h = queries[:, block], keys[:, block]
        scores = q_h @ k_h.T / math.sqrt(d_head)
        weights = torch.softmax(scores, dim=-1)
        outputs.append(weights @ values[:, block])
        maps.append(weights)
    concatenated = torch.cat(outputs, dim=-1)
    output = project(concatenated, projections["o"])
    return output, torch.stack(maps)
""", "heads_in_a_loop"),
    },
    # The lesson's grouped-query attention (section 7) with as many key/value heads as query
    # heads, its weights returned too.
    "lesson_gqa": {
        "MultiHeadAttention": _lesson_module("""
def grouped_query_attention(x_q, x_k, x_v, projections, n_heads, n_kv_heads=None):
    n_kv_heads = n_kv_heads or n_heads
    (n, d_model), n_k = x_q.shape, x_k.shape[0]
    d_head = d_model // n_heads
    group = n_heads // n_kv_heads
    queries = project(x_q, projections["q"])
    keys = project(x_k, projections["k"])
    values = project(x_v, projections["v"])
    queries = queries.reshape(n, n_heads, d_head).transpose(0, 1)
    keys = keys.reshape(n_k, n_kv_heads, d_head).transpose(0, 1)
    values = values.reshape(n_k, n_kv_heads, d_head).transpose(0, 1)
    keys = keys.repeat_interleave(group, dim=0)
    values = values.repeat_interleave(group, dim=0)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(d_head)
    weights = torch.softmax(scores, dim=-1)
    heads = weights @ values
    merged = heads.transpose(0, 1).reshape(n, d_model)
    return project(merged, projections["o"]), weights
""", "grouped_query_attention"),
    },
    # The helper cell's reference (mha_variant before issue 30), called from the module.
    "helpers": {
        "MultiHeadAttention": _MHA_SKELETON + """
    def forward(self, query, key, value, mask=None):
        return mha_variant(dict(self.named_parameters()), self.n_heads, query, key, value, mask)
""",
    },
    # The helper cell's torch_reference (before issue 30), called from the module.
    "helpers_torch_reference": {
        "MultiHeadAttention": _MHA_SKELETON + """
    def forward(self, query, key, value, mask=None):
        return torch_reference(dict(self.named_parameters()), self.n_heads, query, key, value, mask)
""",
    },
    # The visible tests: their hint candidates (the mistakes) for the reshapes, generalized.
    "tests": {
        "split_heads": """
def split_heads(x, n_heads):
    batch, n, d_model = x.shape
    return x.reshape(batch, n_heads, n, d_model // n_heads)
""",
        "merge_heads": """
def merge_heads(x):
    batch, n_heads, n, d_head = x.shape
    return x.reshape(batch, n, n_heads * d_head)
""",
    },
}
