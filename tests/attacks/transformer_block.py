"""Attacks on the tests of chapter 6 (transformer_block): answers that must not gain points.

GARBAGE holds wrong answers of the right shapes and dtypes for every graded name (the
baseline): modules with the contract's attributes whose output is zero (the blocks, the
feed-forward network), a CausalSelfAttention whose y is zero and whose cache of zeros grows
by the right number of tokens, and a generate that appends zeros to the prompt.

IN_PLACE holds the same answers, which also change every tensor they are handed in place,
in the way that would make a careless test pass: zero inputs (a zero input to a block whose
weights are zero gives zero), the weights handed to load_state_dict zeroed, the upstream
gradient zeroed by a hook, and the prompt zeroed by generate.

MODULES holds modules whose parameters start at zero and that compute with those values
whatever weights they are given: the feed-forward network's zero, a pre-norm block's
identity (x + 0 + 0), causal attention's zero. A test that read the module's own
parameters to compute its expected values would expect exactly that.

HELPERS is a student cell, added after the test helpers, that redefines every helper of
the `test_helpers` cell in the kernel to say what would help the garbage most: no input
changed, the outputs and gradients PyTorch's own layers give for the weights the helper is
handed, the whole sequence's y for every chunk, a record of calls that shows a perfect
use of the cache.
"""

from attacks._forged_checks import FORGED_CHECKS, ZEROING_LOAD

_FF = """
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
"""

_ENCODER = """
class EncoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
"""

_DECODER = """
class DecoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
"""

_ATTENTION = """
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.W_qkv = nn.Linear(d_model, 3 * d_model)
        self.W_o = nn.Linear(d_model, d_model)
"""

_ZERO_CACHE = """
        batch, t, d_model = x.shape
        shape = (batch, self.n_heads, t, d_model // self.n_heads)
        new = torch.zeros(shape, dtype=x.dtype, device=x.device)
        if cache is None:
            return torch.zeros_like(x), (new, new.clone())
        return torch.zeros_like(x), (torch.cat([cache[0], new], dim=2), torch.cat([cache[1], new], dim=2))
"""

GARBAGE = {
    "FeedForward": _FF + """
    def forward(self, x):
        return torch.zeros_like(x)
""",
    "EncoderBlock": _ENCODER + """
    def forward(self, x, mask=None):
        return torch.zeros_like(x)
""",
    "DecoderBlock": _DECODER + """
    def forward(self, x, memory, self_mask=None, memory_mask=None):
        return torch.zeros_like(x)
""",
    "CausalSelfAttention": _ATTENTION + """
    def forward(self, x, cache=None):""" + _ZERO_CACHE,
    "generate": """
def generate(model, prompt, n_new):
    return torch.cat([prompt, torch.zeros(prompt.shape[0], n_new, dtype=prompt.dtype)], dim=1)
""",
}


_ZERO_INPUTS = """
        with torch.no_grad():
            for value in inputs:
                if torch.is_tensor(value) and value.is_floating_point():
                    value.zero_()  # the test's inputs become zero
        output = inputs[0] * 0
        if output.requires_grad:
            output.register_hook(lambda grad: grad.zero_())
        return output
"""

IN_PLACE = {
    "FeedForward": _FF + ZEROING_LOAD + """
    def forward(self, *inputs):""" + _ZERO_INPUTS,
    "EncoderBlock": _ENCODER + ZEROING_LOAD + """
    def forward(self, *inputs, mask=None):
        if mask is not None:
            mask.fill_(True)""" + _ZERO_INPUTS,
    "DecoderBlock": _DECODER + ZEROING_LOAD + """
    def forward(self, *inputs, self_mask=None, memory_mask=None):
        for mask in (self_mask, memory_mask):
            if mask is not None:
                mask.fill_(True)""" + _ZERO_INPUTS,
    "CausalSelfAttention": _ATTENTION + ZEROING_LOAD + """
    def forward(self, x, cache=None):
        with torch.no_grad():
            x.zero_()
            if cache is not None:
                for part in cache:
                    part.zero_()""" + _ZERO_CACHE,
    "generate": """
def generate(model, prompt, n_new):
    prompt.zero_()  # the test's prompt becomes the zeros this appends
    return torch.cat([prompt, torch.zeros(prompt.shape[0], n_new, dtype=prompt.dtype)], dim=1)
""",
}

_FROZEN = """
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.zero_()
"""

MODULES = {
    # Zero weights: linear2(relu(linear1(x))) is zero.
    "FeedForward": _FF + _FROZEN + """
    def forward(self, x):
        return x * 0
""",
    # Zero weights: attention, the feed-forward network and the norms all give zero, so a
    # pre-norm block is the identity and a post-norm block gives zero.
    "EncoderBlock": _ENCODER + _FROZEN + """
    def forward(self, x, mask=None):
        return x.clone() if self.norm_first else x * 0
""",
    "DecoderBlock": _DECODER + _FROZEN + """
    def forward(self, x, memory, self_mask=None, memory_mask=None):
        return x.clone() if self.norm_first else x * 0
""",
    "CausalSelfAttention": _ATTENTION + _FROZEN + """
    def forward(self, x, cache=None):""" + _ZERO_CACHE,
}

HELPERS = FORGED_CHECKS + """

def _pytorch_names(state):
    renamed = {}
    for name, value in state.items():
        if name.startswith("ff."):
            name = name[3:]
        elif name.startswith("cross_attn."):
            name = "multihead_attn." + name[len("cross_attn."):]
        renamed[name] = value
    return renamed

@runs_beside_your_code
def run_block(block_class, sizes, state, inputs, masks=None, train=False, repeat=1, grad_output=None):
    # What PyTorch's own layer gives for the weights this helper is handed.
    d_model, n_heads, d_ff, dropout, norm_first = sizes
    kind = nn.TransformerEncoderLayer if len(inputs) == 1 else nn.TransformerDecoderLayer
    layer = kind(d_model, n_heads, d_ff, dropout, batch_first=True, norm_first=norm_first, dtype=torch.float64)
    layer.load_state_dict(_pytorch_names(state))
    layer.train(train)
    masks = {name: ~value for name, value in (masks or {}).items()}
    keywords = {"mask": "src_mask", "self_mask": "tgt_mask", "memory_mask": "memory_mask"}
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    outputs = [layer(*leaves, **{keywords[k]: v for k, v in masks.items()}) for _ in range(repeat)]
    found, parameters = [], {}
    if grad_output is not None:
        named = dict(layer.named_parameters())
        grads = torch.autograd.grad(outputs[0], leaves + list(named.values()), grad_output)
        found = list(grads[:len(leaves)])
        parameters = dict(zip([n if not n.startswith("linear") else "ff." + n for n in named], grads[len(leaves):]))
    return [], [], [o.detach() for o in outputs], found, parameters

@runs_beside_your_code
def run_in_chunks(module_class, d_model, n_heads, state, x, sizes):
    y, keys, values = causal_reference(state, n_heads, x)
    outputs, shapes, start = [], [], 0
    for size in sizes:
        outputs.append(y[:, start:start + size])
        start += size
        shapes.append([tuple(keys[:, :, :start].shape)] * 2)
    return outputs, shapes, [keys, values]

@runs_beside_your_code
def gradients(function, inputs, grad_output, **kwargs):
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    output = leaves[0] * 1.0
    return output.detach().requires_grad_(True), [grad_output.clone()], {}

def record_calls(function):
    return function, []

def lm_forward(weights, tokens, caches=None, start=0):
    return torch.zeros(tokens.shape[0], tokens.shape[1], 13, dtype=torch.float64), []

def greedy_without_cache(weights, prompt, n_new):
    return torch.cat([prompt, torch.zeros(prompt.shape[0], n_new, dtype=prompt.dtype)], dim=1)

def torch_block(state, n_heads, norm_first, x, memory=None, self_mask=None, memory_mask=None, dropout=0.0):
    return torch.zeros_like(x)

def load_weights(module, state, what):
    return None
"""
