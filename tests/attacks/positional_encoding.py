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

def stored(call, value):
    return np.zeros(1)

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

# A transcription pastes the code the course hands over, renamed, wrapped at its interface
# (arguments converted, batch axes added or dropped), with a trivial __init__ and at most
# one flipped sign, flag or constant. It does not add the loops that turn the lessons'
# simplest cases (one pair, one position, one row of one head) into the general function,
# nor convert between the conventions of the code bases that course.positional takes its
# encodings from (all the sines before the cosines, half-split RoPE, ALiBi's recency form,
# which the catalogue lists as known mistakes): that work is the assignment's. A converted
# code base is a library answer, and its own test (test_*_no_shortcut) finds it.

# The lesson's R_p (section 4, interleaved_matrix: one head of width 8, base 10000), its
# frequencies computed from the width and base given, applied row by row as the lesson's
# check of the permutation does.
_LESSON_ROPE = """
def rotation(angle):
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s], [s, c]], dtype=torch.float64)


def interleaved_matrix(p, omegas):
    blocks = [rotation(p * omega) for omega in omegas]
    return torch.block_diag(*blocks)


def apply_rope(x, positions=None, base=10000.0):
    n, d = x.shape
    omegas = base ** (-np.arange(0, d, 2) / d)
    positions = range(n) if positions is None else positions.tolist()
    rows = [interleaved_matrix(p, omegas) @ x[i].double() for i, p in enumerate(positions)]
    return torch.stack(rows).to(x.dtype)
"""

# course.positional's half-split RoPE, as it is: Llama's rotary embedding from transformers.
_HALF_SPLIT = """
import functools

from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb


@functools.lru_cache(maxsize=None)
def llama_rotary(d_head, base):
    config = LlamaConfig(head_dim=d_head,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    return LlamaRotaryEmbedding(config)


def rope_half_split(queries, keys, base=10000.0, scale=1.0):
    n, d_head = queries.shape[-2], queries.shape[-1]
    positions = torch.arange(n, device=queries.device)[None] / scale
    cos, sin = llama_rotary(d_head, float(base))(queries, positions)
    return apply_rotary_pos_emb(queries, keys, cos, sin)
"""

# ALiBi's recency form (course.positional.recency_bias, BLOOM's build_alibi_tensor, the
# lesson's section 5), on every query, the future masked as the lesson masks it.
_RECENCY = """
from transformers.models.bloom.modeling_bloom import build_alibi_tensor


def recency_bias(n_heads, n):
    every_token = torch.ones(1, n)
    return build_alibi_tensor(every_token, n_heads, torch.float32)


def alibi_bias(n_heads, n, causal=True):
    bias = recency_bias(n_heads, n).expand(n_heads, n, n)
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    return bias.masked_fill(future, float("-inf")) if causal else bias.clone()
"""

# What a student makes of the code the course hands them, adapted in minutes.
TRANSCRIPTIONS = {
    "lesson": {
        # one_pair (section 2): the sinusoids of one pair of features.
        "sinusoidal_encoding": """
def one_pair(positions, omega):
    angles = np.asarray(positions, dtype=np.float64) * omega
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1)


def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    return torch.tensor(one_pair(np.arange(n_positions), 1.0), dtype=torch.float32)
""",
        # section 3: tokens_16 + table_learned.weight[:16], for any n.
        "LearnedPositionalEmbedding": _LEARNED_SKELETON + """
    def forward(self, x):
        return x + self.embedding.weight[:x.shape[-2]]
""",
        "apply_rope": _LESSON_ROPE,
        "alibi_bias": _RECENCY,
    },
    "course": {
        # course.positional.sinusoid_table: Whisper's table from transformers.
        "sinusoidal_encoding": """
from transformers.models.whisper.modeling_whisper import sinusoids


def sinusoid_table(n, d):
    return sinusoids(n, d)


def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    return sinusoid_table(n_positions, d_model)
""",
        # OneLayerModel's x + self.positions.weight[:n].
        "LearnedPositionalEmbedding": _LEARNED_SKELETON + """
    def forward(self, x):
        n = x.shape[-2]
        return x + self.embedding.weight[:n]
""",
        "apply_rope": _HALF_SPLIT + """
def apply_rope(x, positions=None, base=10000.0):
    return rope_half_split(x, x, base)[0]
""",
        "alibi_bias": _RECENCY,
    },
}
