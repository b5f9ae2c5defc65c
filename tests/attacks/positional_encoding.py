"""Attacks on the tests of chapter 5 (positional_encoding): answers that must not gain points.

GARBAGE holds wrong answers of the right shapes and dtypes for every graded name (the
baseline): zero tables and biases, a zero rotation, and a LearnedPositionalEmbedding with
its nn.Embedding attribute and the ValueError of the contract that returns zeros.

IN_PLACE holds the same answers, which also change every tensor they are handed in place,
in the way that would make a careless test pass: apply_rope zeroes x (the rotation of
zero is the zero it returns) and the positions, LearnedPositionalEmbedding zeroes x and
returns the table (x + table for the zeroed x), the weights handed to load_state_dict
are zeroed, and a hook zeroes the upstream gradient while it is backpropagated (the
gradient of zero is zero). sinusoidal_encoding and alibi_bias are handed no tensor.

MODULES holds a LearnedPositionalEmbedding whose table starts at zero and that computes
nothing useful: x plus the zero table it started with, whatever table is loaded later,
with gradients that reach the table as if it were used. A test that reads the module's
own table to compute its expected values, or that checks the gradients but not the
output, expects exactly that. MODULE_VARIANTS holds the same idea with constant tables.

HELPERS is a student cell, added after the last answer, that redefines every helper of
the `test_helpers` cell in the kernel to say what would help the garbage most: no input
changed, and the output and gradients the test expects, computed from what the helper is
handed.
"""

from attacks._forged_checks import FORGED_CHECKS

_LEARNED_SKELETON = """
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_positions, d_model):
        super().__init__()
        self.embedding = nn.Embedding(max_positions, d_model)
"""

_LENGTH_CHECK = """
        n = x.shape[-2]
        if n > self.embedding.num_embeddings:
            raise ValueError("the sequence is longer than the table")
"""

GARBAGE = {
    "sinusoidal_encoding": """
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    return torch.zeros(n_positions, d_model)
""",
    "LearnedPositionalEmbedding": _LEARNED_SKELETON + """
    def forward(self, x):""" + _LENGTH_CHECK + """
        return torch.zeros_like(x)
""",
    "apply_rope": """
def apply_rope(x, positions=None, base=10000.0):
    return torch.zeros_like(x)
""",
    "alibi_bias": """
def alibi_bias(n_heads, n, causal=True):
    return torch.zeros(n_heads, n, n)
""",
}

IN_PLACE = {
    "sinusoidal_encoding": GARBAGE["sinusoidal_encoding"],
    "LearnedPositionalEmbedding": _LEARNED_SKELETON + """
    def load_state_dict(self, state_dict, strict=True, **kwargs):
        with torch.no_grad():
            for value in state_dict.values():
                if torch.is_tensor(value):
                    value.zero_()  # the test's table becomes zero: x + zero is x
        return super().load_state_dict(state_dict, strict=False)

    def forward(self, x):""" + _LENGTH_CHECK + """
        with torch.no_grad():
            x.zero_()  # x + table[:n] for the zeroed x is the table this returns
        output = x * 0 + self.embedding.weight[:n]
        if output.requires_grad:
            output.register_hook(lambda grad: grad.zero_())  # the upstream gradient becomes zero
        return output
""",
    "apply_rope": """
def apply_rope(x, positions=None, base=10000.0):
    with torch.no_grad():
        x.zero_()  # the rotation of zero is zero
        if torch.is_tensor(positions):
            positions.zero_()  # position 0: no rotation
    output = x * 0
    if output.requires_grad:
        output.register_hook(lambda grad: grad.zero_())
    return output
""",
    "alibi_bias": GARBAGE["alibi_bias"],
}


def _frozen_table(value):
    """A LearnedPositionalEmbedding whose table starts at `value` and whose output uses that
    starting table, whatever table is loaded later; gradients still reach the live table."""
    return _LEARNED_SKELETON + f"""
        with torch.no_grad():
            self.embedding.weight.fill_({value})
        # A plain attribute, not a parameter or buffer: load_state_dict never reaches it.
        self.frozen = self.embedding.weight.detach().clone()

    def forward(self, x):""" + _LENGTH_CHECK + """
        live = self.embedding.weight[:n]
        frozen = self.frozen[:n].to(device=x.device, dtype=x.dtype)
        return x + frozen + (live - live.detach())  # the value of the frozen table, the gradient of the live one
"""


MODULES = {"LearnedPositionalEmbedding": _frozen_table(0.0)}

# The same module with tables at other constant values.
MODULE_VARIANTS = {"LearnedPositionalEmbedding": [_frozen_table(0.5), _frozen_table(-1.0)]}

HELPERS = FORGED_CHECKS + """

def expect_tensor(value, dtype, name):
    return None

def device_failure(error, target, what):
    return AssertionError("")

def load_weights(module, state, what=""):
    return None

def _rope(x, positions=None, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    positions = torch.arange(n, dtype=torch.float64) if positions is None else positions.to(torch.float64)
    angles = positions[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)

@runs_beside_your_code
def gradients(function, inputs, grad_output, **kwargs):
    # The answer the test expects, computed here from what the helper is handed.
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs if torch.is_tensor(x)]
    x = leaves[0]
    if isinstance(function, nn.Module):
        table = function.embedding.weight.detach().clone().requires_grad_(True)
        output = x + table[:x.shape[-2]]
        grad_x, grad_table = torch.autograd.grad(output, [x, table], grad_output)
        return output.detach().requires_grad_(True), [grad_x], {"embedding.weight": grad_table}
    output = _rope(x, **kwargs)
    (grad_x,) = torch.autograd.grad(output, [x], grad_output)
    return output.detach().requires_grad_(True), [grad_x], {}
"""
